"""The stream's metrics, received from Airflow's real StatsD backend on a UDP socket.

The operator runs as in ``test_stream_modes`` (``execute`` without a DAG run, stopping once idle).
Outside a task run nobody initialises Airflow's ``Stats``, so the test does what the task runner's
``main`` does, from ``[metrics]`` set in the environment (Airflow reads it at that moment), and
puts the no-op backend back afterwards. The second half turns on ``statsd_influxdb_enabled`` to see
the tags (plain StatsD drops them).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_observer import (
    CommitObservation,
    MergeObservation,
    NoStreamObserver,
)
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.stream_metrics import StatsStreamObserver, tag_value, task_tags
from tests.integration.statsd_listener import StatsdListener, total
from tests.integration.stream_task import stream_task

TASK_ID = "stream_metrics"

pytestmark = pytest.mark.usefixtures("connections")


def test_stream_sends_its_metrics_to_statsd(admin, database, tmp_path, statsd: StatsdListener,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = f"{database}.metrics_a", f"{database}.metrics_b"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE metrics_a (id INT PRIMARY KEY, v VARCHAR(5))")
        cur.execute("CREATE TABLE metrics_b (id INT PRIMARY KEY, v VARCHAR(5))")
    lake = str(tmp_path / "lake")
    # the first checkpoint; nothing to write, caught up
    stream_task(lake, a, b, task_id=TASK_ID, startup_mode="latest-offset")
    first = statsd.metrics()
    assert first["mysql_cdc.stream.lag_seconds"] == [(0.0, "g")]  # caught up and idle: lag 0
    assert first["mysql_cdc.stream.max_table_lag_seconds"] == [(0.0, "g")]
    assert "mysql_cdc.stream.rows" not in first

    with admin.cursor() as cur:
        for key in range(1, 4):
            cur.execute("INSERT INTO metrics_a VALUES (%s, 'x')", (key,))
        cur.execute("INSERT INTO metrics_b VALUES (1, 'x'), (2, 'y')")
    summary = stream_task(lake, a, b, task_id=TASK_ID)
    got = statsd.metrics()
    assert summary["rows"] == 5
    assert total(got["mysql_cdc.stream.rows"], "c") == 5
    assert total(got["mysql_cdc.stream.events"], "c") == 5
    assert total(got["mysql_cdc.stream.batches"], "c") == summary["batches"] >= 1
    assert total(got["mysql_cdc.stream.batch_rows"], "g") == 5  # one gauge per batch, summing to all rows
    assert len(got["mysql_cdc.stream.batch_events"]) == summary["batches"]
    lags = [v for v, kind in got["mysql_cdc.stream.lag_seconds"] if kind == "g"]
    assert lags and all(0 <= lag < 60 for lag in lags), lags
    assert total(got["mysql_cdc.stream.merges"], "c") == 1  # the merge when the stream stops
    assert total(got["mysql_cdc.stream.merge_rows"], "c") == 5
    (duration, kind), = got["mysql_cdc.stream.merge_duration"]
    assert kind == "ms" and 0 < duration < 60_000

    # influx-style tags: the table on the row counters, the task on everything
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")
    statsd.initialise_stats()
    with admin.cursor() as cur:
        cur.execute("UPDATE metrics_a SET v = 'z' WHERE id = 1")  # -U and +U: two changelog rows
        cur.execute("INSERT INTO metrics_b VALUES (3, 'x')")
    summary = stream_task(lake, a, b, task_id=TASK_ID)
    statsd.metrics()
    rows: dict[str, float] = defaultdict(float)
    for tags, value in statsd.tagged["mysql_cdc.stream.rows"]:
        assert tags["task_id"] == TASK_ID
        rows[tags["table"]] += value
    assert rows == {a: 2, b: 1} and summary["rows"] == 3
    merged = {tags["table"]: value for tags, value in statsd.tagged["mysql_cdc.stream.merge_rows"]}
    assert merged == {a: 2, b: 1}
    assert all(tags == {"task_id": TASK_ID} for tags, _ in statsd.tagged["mysql_cdc.stream.lag_seconds"])
    # each table's lag, tagged with it, and the largest of a batch's
    table_lags = defaultdict(list)
    for tags, value in statsd.tagged["mysql_cdc.stream.table_lag_seconds"]:
        table_lags[tags["table"]].append(value)
    assert set(table_lags) == {a, b} and all(0 <= v < 60 for vs in table_lags.values() for v in vs)
    largest = [v for _, v in statsd.tagged["mysql_cdc.stream.max_table_lag_seconds"]]
    assert largest and max(largest) == max(v for vs in table_lags.values() for v in vs)


class Recording:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def committed(self, commit: CommitObservation) -> None:
        self.seen.append(commit)

    def caught_up(self) -> None:
        self.seen.append("caught up")

    def merged(self, merge: MergeObservation) -> None:
        self.seen.append(merge)


def test_runner_tells_its_observer(admin, database, tmp_path, cdc_conn) -> None:
    """The runner's calls in order: idle heartbeats say caught up only when nothing was written since the
    previous one; the merge counts the rows of the batches before it."""

    table = f"{database}.observed"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE observed (id INT PRIMARY KEY)")
    config = MySqlCdcHook().get_config()
    options = StreamOptions(str(tmp_path / "lake"), (TableId.parse(table),), StartupMode.LATEST,
                            stop_after_idle_seconds=1.0, poll_interval=0.2, writer="observer test")
    recording = Recording()
    runner = StreamRunner(options, config, recording)
    control = config.connect()
    try:
        checkpoint = runner.open(control)
        with admin.cursor() as cur:
            cur.execute("INSERT INTO observed VALUES (1), (2)")
        runner.run(control, checkpoint, StreamProgress.start(), may_wait=False)
    finally:
        control.close()
    batches = [s for s in recording.seen if isinstance(s, CommitObservation)]
    assert sum(sum(b.rows.values()) for b in batches) == 2
    written = next(i for i, s in enumerate(recording.seen) if isinstance(s, CommitObservation) and s.rows)
    assert recording.seen[written].lag_seconds is not None and recording.seen[written].lag_seconds >= 0
    assert "caught up" in recording.seen[written + 1:]  # idle for a second after the write: lag 0
    assert isinstance(recording.seen[-1], MergeObservation) and recording.seen[-1].rows == {table: 2}


def test_observer_defaults_and_tags() -> None:
    observer = NoStreamObserver()  # the runner's default: accepts everything, does nothing
    assert observer.committed(CommitObservation(1, {"a.b": 1}, 1, 0.5)) is None
    assert observer.caught_up() is None
    assert observer.merged(MergeObservation(0.1, {"a.b": 1})) is None
    assert tag_value("shop.order lines$") == "shop.order_lines_"
    assert task_tags({}, "stream") == {"task_id": "stream"}

    class Ti:
        stats_tags = {"dag_id": "cdc", "task_id": "stream"}

    assert task_tags({"ti": Ti()}, "stream") == {"dag_id": "cdc", "task_id": "stream"}


def test_idle_lag_is_resent_only_now_and_then(statsd: StatsdListener) -> None:
    clock = [100.0]
    observer = StatsStreamObserver({"task_id": "t"}, clock=lambda: clock[0])
    observer.caught_up()
    clock[0] += 1
    observer.caught_up()  # a heartbeat later: not again
    clock[0] += 10
    observer.caught_up()
    observer.committed(CommitObservation(1, {"a.b": 2}, 2, 1.5))
    observer.caught_up()  # idle again after a batch: at once
    assert [v for v, _ in statsd.metrics()["mysql_cdc.stream.lag_seconds"]] == [0.0, 0.0, 1.5, 0.0]
