"""The stream's metrics through Airflow's ``Stats`` (StatsD, Datadog or OpenTelemetry, as configured).

``StatsStreamObserver`` implements the engine's ``StreamObserver`` with the metrics documented in
docs/metrics.md. Every metric carries the task's ``dag_id`` and ``task_id`` as tags, and the
per-table counters a ``table`` tag: Datadog and OpenTelemetry keep tags; plain StatsD drops them
unless ``[metrics] statsd_influxdb_enabled`` appends them to the name, so the names themselves hold
no table and a plain StatsD counter sums over the tables. Airflow's task runner initialises
``Stats`` from ``[metrics]``; outside a task run (``operator.execute`` called directly) it is a
no-op unless the caller initialises it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk.observability import stats

from airflow_provider_mysqlcdc.cdc.source.retention import PositionMargin
from airflow_provider_mysqlcdc.engine.stream.stream_observer import CommitObservation, MergeObservation

_log = logging.getLogger(__name__)

PREFIX = "mysql_cdc.stream."
LAG_SECONDS = PREFIX + "lag_seconds"
BATCHES = PREFIX + "batches"
ROWS = PREFIX + "rows"
EVENTS = PREFIX + "events"
BATCH_ROWS = PREFIX + "batch_rows"
BATCH_EVENTS = PREFIX + "batch_events"
MERGES = PREFIX + "merges"
MERGE_DURATION = PREFIX + "merge_duration"
MERGE_ROWS = PREFIX + "merge_rows"
TABLE_LAG_SECONDS = PREFIX + "table_lag_seconds"
MAX_TABLE_LAG_SECONDS = PREFIX + "max_table_lag_seconds"
BINLOG_MARGIN_SECONDS = PREFIX + "binlog_margin_seconds"
BINLOG_BEHIND_BYTES = PREFIX + "binlog_behind_bytes"

# an idle stream hears a heartbeat every quarter second: re-send its lag of 0 only this often, so that
# backends which drop a gauge not seen for a while keep it, without a packet per heartbeat
IDLE_LAG_EVERY_SECONDS = 10.0

_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/]")


def tag_value(value: object) -> str:
    """A tag value Airflow's StatsD name check accepts (it drops the whole metric otherwise)."""
    return _TAG_UNSAFE.sub("_", str(value))


def task_tags(context: Mapping[str, Any] | None, task_id: str) -> dict[str, str]:
    """``dag_id`` and ``task_id`` of the running task instance (Airflow's own ``ti.stats_tags``), or
    just ``task_id`` outside a DAG run."""
    ti = context.get("ti") if context else None
    tags = getattr(ti, "stats_tags", None) if ti is not None else None
    if not isinstance(tags, Mapping):
        tags = {"task_id": task_id}
    return {str(k): tag_value(v) for k, v in tags.items()}


class StatsStreamObserver:
    """Sends the stream's batches, lag and merges to Airflow's ``Stats``; never fails the stream."""

    def __init__(self, tags: Mapping[str, str], clock: Callable[[], float] = time.monotonic) -> None:
        self.tags = dict(tags)
        self._clock = clock
        self._idle_lag_sent: float | None = None  # when lag 0 was last sent, while idle

    def committed(self, commit: CommitObservation) -> None:
        def send() -> None:
            written = sum(commit.rows.values())
            stats.incr(BATCHES, tags=self.tags)
            stats.incr(EVENTS, commit.events_read, tags=self.tags)
            for table, rows in commit.rows.items():
                if rows:
                    stats.incr(ROWS, rows, tags={**self.tags, "table": tag_value(table)})
            stats.gauge(BATCH_ROWS, written, tags=self.tags)
            stats.gauge(BATCH_EVENTS, commit.events_read, tags=self.tags)
            if commit.lag_seconds is not None:
                stats.gauge(LAG_SECONDS, round(commit.lag_seconds, 3), tags=self.tags)
                self._idle_lag_sent = None
            for table, lag in commit.table_lag_seconds.items():
                stats.gauge(TABLE_LAG_SECONDS, round(lag, 3), tags={**self.tags, "table": tag_value(table)})
            behind = commit.furthest_behind
            if behind is not None:
                stats.gauge(MAX_TABLE_LAG_SECONDS, round(behind[1], 3), tags=self.tags)

        self._safely(send)

    def caught_up(self) -> None:
        now = self._clock()
        if self._idle_lag_sent is not None and now - self._idle_lag_sent < IDLE_LAG_EVERY_SECONDS:
            return
        self._idle_lag_sent = now

        def send() -> None:
            stats.gauge(LAG_SECONDS, 0, tags=self.tags)
            stats.gauge(MAX_TABLE_LAG_SECONDS, 0, tags=self.tags)

        self._safely(send)

    def merged(self, merge: MergeObservation) -> None:
        def send() -> None:
            stats.incr(MERGES, tags=self.tags)
            stats.timing(MERGE_DURATION, merge.seconds * 1000.0, tags=self.tags)
            for table, rows in merge.rows.items():
                if rows:
                    stats.incr(MERGE_ROWS, rows, tags={**self.tags, "table": tag_value(table)})

        self._safely(send)

    def margin_checked(self, margin: PositionMargin) -> None:
        """A check of the checkpoint's binlog retention (``engine.stream.retention_watch``): its margin, when
        something purges the binlog, and the binlog bytes the server wrote after the checkpoint."""

        def send() -> None:
            if margin.seconds is not None:
                stats.gauge(BINLOG_MARGIN_SECONDS, round(margin.seconds, 1), tags=self.tags)
            stats.gauge(BINLOG_BEHIND_BYTES, margin.behind_bytes, tags=self.tags)

        self._safely(send)

    @staticmethod
    def _safely(send: Callable[[], None]) -> None:
        # metrics are a side channel: a misconfigured backend must not stop the replication
        try:
            send()
        except Exception:
            _log.warning("could not send stream metrics", exc_info=True)
