"""The deferrable binlog stream: write change batches while there are events, wait in the triggerer
while there are none, and stop when the configured condition says so."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_mysqlcdc.cdc.startup import STREAM_STARTUP_MODES
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

STARTUP_MODES = ("initial", "snapshot", *STREAM_STARTUP_MODES)
DEFAULT_WAKE_SECONDS = 300.0


class MySqlBinlogStreamOperator(BaseOperator):
    """Streams the binlog of ``tables`` into the lake, continuing from the lake's checkpoint.

    The first run starts according to ``startup_mode`` (like Flink CDC's ``scan.startup.mode``):
    ``initial`` from the snapshot's lowest high watermark with the per-chunk emit filter (the
    snapshot of every table must be committed), ``snapshot`` not at all, ``latest-offset`` at the
    server's current offset, ``earliest-offset`` at its first binlog, ``specific-offset`` at
    ``startup_offset`` (``"mysql-bin.000003:4"``, or the GTIDs already captured: a MySQL GTID set,
    a MariaDB GTID position), ``timestamp`` at the first transaction committed at or after
    ``startup_timestamp`` (epoch ms or ISO 8601). Later runs, retries and cleared tasks continue from
    the checkpoint, which is committed with each batch: nothing is lost or written twice.

    When caught up it polls the binlog every ``poll_interval`` seconds in the worker; once idle for
    ``defer_after_idle_seconds`` it defers to ``MySqlBinlogTrigger`` (with ``deferrable=False`` it
    keeps polling) until the binlog moves. It stops after ``stop_after_idle_seconds`` without a
    captured change, after ``max_duration_seconds``, or at ``stop_at_offset``; with none of them it
    runs forever (for ``@continuous`` DAGs). Set ``retries``: Airflow 3.3 can fail a task that
    defers often, and a retry simply continues from the checkpoint.
    """

    template_fields: Sequence[str] = (
        "base_uri", "tables", "startup_mode", "startup_offset", "startup_timestamp", "stop_after_idle_seconds",
        "max_duration_seconds", "stop_at_offset", "mysql_cdc_conn_id", "defer_after_idle_seconds",
    )

    def __init__(
        self,
        *,
        base_uri: str,
        tables: Sequence[str],
        startup_mode: str = "initial",
        startup_offset: str | None = None,
        startup_timestamp: Any = None,
        stop_after_idle_seconds: float | None = None,
        max_duration_seconds: float | None = None,
        stop_at_offset: str | None = None,
        max_batch_events: int = 100_000,
        max_batch_seconds: float = 10.0,
        max_batch_bytes: int = 64 * 1024 * 1024,
        poll_interval: float = 1.0,
        defer_after_idle_seconds: float = 60.0,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.tables = tables
        self.startup_mode = startup_mode
        self.startup_offset = startup_offset
        self.startup_timestamp = startup_timestamp
        self.stop_after_idle_seconds = stop_after_idle_seconds
        self.max_duration_seconds = max_duration_seconds
        self.stop_at_offset = stop_at_offset
        self.max_batch_events = max_batch_events
        self.max_batch_seconds = max_batch_seconds
        self.max_batch_bytes = max_batch_bytes
        self.poll_interval = poll_interval
        self.defer_after_idle_seconds = defer_after_idle_seconds
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> dict[str, Any] | None:
        if self.startup_mode not in STARTUP_MODES:
            raise InvalidOptionError(f"startup_mode must be one of {list(STARTUP_MODES)}, not {self.startup_mode!r}")
        if self.startup_mode == "snapshot":
            self.log.info("startup_mode 'snapshot': no binlog stream")
            return None
        if self.stop_at_offset:
            from airflow_provider_mysqlcdc.cdc.startup import parse_file_position

            parse_file_position(self.stop_at_offset, "stop_at_offset")  # a bad value fails before any work
        now = time.time()
        return self._stream({"started": now, "idle_since": now, "batches": 0, "rows": 0, "deferrals": 0})

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any] | None:
        from airflow_provider_mysqlcdc.exceptions import SourceConfigError

        if event.get("reason") == "error":
            raise SourceConfigError(f"waiting for the binlog failed: {event.get('error')}")
        return self._stream({k: event[k] for k in ("started", "idle_since", "batches", "rows", "deferrals")})

    def _stream(self, state: dict[str, Any]) -> dict[str, Any] | None:
        from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
        from airflow_provider_mysqlcdc.cdc.offset import check_offset_available
        from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
        from airflow_provider_mysqlcdc.lake.stream_batches import BatchLimits, stream_batches
        from airflow_provider_mysqlcdc.lake.stream_store import StreamStore
        from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger

        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        control = config.connect()
        store = StreamStore(self.base_uri)
        server_id = config.server_id.allocate(len(config.server_id) - 1)  # chunk readers count from the start
        checkpoint = store.read_checkpoint() or self._first_checkpoint(control, store, config, server_id)
        limits = BatchLimits(self.max_batch_events, self.max_batch_seconds, self.max_batch_bytes)
        while True:
            check_offset_available(control, checkpoint.offset)
            for report in stream_batches(config, server_id, store, checkpoint, control,
                                         lambda table: load_table_schema(control, table), limits):
                written = sum(report.rows.values())
                state["batches"] += 1
                state["rows"] += written
                if written:
                    state["idle_since"] = time.time()
                lag = f"{time.time() - report.last_ts_ms / 1000:.1f} s" if report.last_ts_ms else "n/a"
                self.log.info("batch %d: %d events read, rows written %s, offset %s, lag %s",
                              report.seq, report.events_read, report.rows, report.offset, lag)
            stopped = self._stop_reason(state, checkpoint.offset)
            if stopped:
                control.close()
                summary = {**state, "stopped": stopped, "offset": str(checkpoint.offset), "seq": checkpoint.seq}
                self.log.info("stream stops (%s): %s", stopped, summary)
                return summary
            # a resume from the triggerer costs seconds (and Airflow 3.3 races on quick resumes): defer
            # only after a quiet spell, and meanwhile poll here, where a change lands within a poll
            if not self.deferrable or time.time() - state["idle_since"] < float(self.defer_after_idle_seconds):
                time.sleep(self.poll_interval)
                continue
            control.close()
            state["deferrals"] += 1
            self.defer(
                trigger=MySqlBinlogTrigger(self.mysql_cdc_conn_id, checkpoint.offset.to_dict(), self._wake_at(state),
                                           self.poll_interval, state),
                method_name="execute_complete",
            )

    def _first_checkpoint(self, control: Any, store: Any, config: Any, server_id: int) -> Any:
        from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
        from airflow_provider_mysqlcdc.cdc.schema import TableId
        from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
        from airflow_provider_mysqlcdc.cdc.startup import start_offset
        from airflow_provider_mysqlcdc.lake.snapshot import SnapshotStore
        from airflow_provider_mysqlcdc.lake.stream_batches import checkpoint_from_manifests
        from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint

        tables = [TableId.parse(t) for t in self.tables]
        server = ServerInfo.read(control)
        if self.startup_mode == "initial":
            snapshots = SnapshotStore(self.base_uri)
            manifests: list[dict[str, Any]] = []
            schemas = {}
            for table in tables:
                plan = snapshots.read_plan(table)
                pending = snapshots.pending_batches(plan) if plan else None
                if plan is None or pending:
                    raise InvalidOptionError(
                        f"startup_mode 'initial' needs the finished snapshot of {table} in {self.base_uri}; "
                        f"run the snapshot tasks first (or choose another startup_mode)"
                    )
                schemas[table] = plan.schema
                manifests += [m for b in plan.batches if (m := snapshots.read_manifest(b)) is not None]
            checkpoint = checkpoint_from_manifests(manifests, schemas)
        else:
            offset = start_offset(self.startup_mode, control, server, config, server_id, self.startup_offset,
                                  self.startup_timestamp)
            checkpoint = Checkpoint(0, offset, {t: load_table_schema(control, t) for t in tables})
        store.commit(checkpoint, {})
        self.log.info("stream starts at %s (startup_mode %s)", checkpoint.offset, self.startup_mode)
        return checkpoint

    def _stop_reason(self, state: dict[str, Any], offset: Any) -> str | None:
        from airflow_provider_mysqlcdc.cdc.startup import parse_file_position

        now = time.time()
        if self.stop_at_offset:
            if not offset < parse_file_position(self.stop_at_offset, "stop_at_offset", offset.flavor):
                return f"reached {self.stop_at_offset}"
        if self.max_duration_seconds is not None and now - state["started"] >= float(self.max_duration_seconds):
            return f"ran {self.max_duration_seconds} s"
        idle = self.stop_after_idle_seconds
        if idle is not None and now - state["idle_since"] >= float(idle):
            return f"idle for {idle} s"
        return None

    def _wake_at(self, state: dict[str, Any]) -> float:
        deadlines = [time.time() + DEFAULT_WAKE_SECONDS]
        if self.stop_after_idle_seconds is not None:
            deadlines.append(state["idle_since"] + float(self.stop_after_idle_seconds))
        if self.max_duration_seconds is not None:
            deadlines.append(state["started"] + float(self.max_duration_seconds))
        return min(deadlines)
