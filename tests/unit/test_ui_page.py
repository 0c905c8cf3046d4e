"""The MySQL CDC page's data and HTML on the fixture lake (``tests/fixtures/lakes/current``: two tables
snapshotted, three stream batches, ``shop.tags`` stopped), read with the page's code and checked against
the lake read with deltalake and the documents; and what the run's rendered fields give."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.retention import BinlogFile, position_margin, retention_from_variables
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.engine.verification.verify import ChunkVerdict, KeyList, VerifyReport, VerifyStore
from airflow_provider_mysqlcdc.lake.changelog import changes_table, table_event_record
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import MarginCheck, write_margin_check
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from airflow_provider_mysqlcdc.operators.resnapshot import MySqlResnapshotOperator
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator
from airflow_provider_mysqlcdc.operators.verify import (
    MySqlVerifyOperator,
    MySqlVerifyPlanOperator,
    MySqlVerifySummaryOperator,
)
from airflow_provider_mysqlcdc.ui import lake_status as lake_status_module
from airflow_provider_mysqlcdc.ui.lake_status import LakeStatus, lake_status
from airflow_provider_mysqlcdc.ui.page import DagStatus, LakeReport, _size, render_dag
from airflow_provider_mysqlcdc.ui.runs import (
    OPERATORS,
    STREAM_OPERATOR,
    LakeRef,
    RenderedTask,
    RunFacts,
    TaskState,
    _batches,
    _lake,
    _tables,
    facts_of,
)
from tests.lakes import insert, off, transaction

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lakes" / "current"
ORDERS, TAGS = TableId("shop", "orders"), TableId("shop", "tags")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    shutil.copytree(FIXTURE, tmp_path / "lake")
    return Lake.at(str(tmp_path / "lake"))


def delta(uri: str) -> tuple[int, int, int, int]:
    table = DeltaTable(uri)
    files = pa.table(table.get_add_actions(flatten=True))
    return (table.version(), files.num_rows, pc.sum(files.column("size_bytes")).as_py(),
            pc.sum(files.column("num_records")).as_py())


def test_the_tables_chunks_and_delta_figures_are_the_lakes(lake: Lake) -> None:
    status = lake_status(lake, now=0)
    assert [(t.table, t.state) for t in status.tables] == [("shop.orders", "streaming"), ("shop.tags", "stopped")]
    for view in status.tables:
        table = lake.table(view.table)
        plan = SnapshotStore(lake).read_plan(table.id)
        assert plan is not None
        manifests = SnapshotStore(lake).manifests(plan)
        assert [(c.index, c.batch, c.state) for c in view.chunks] == [
            (c.index, plan.batch_of(c), "done") for c in plan.chunks]
        results = {r.chunk.index: r for m in manifests if m is not None for r in m.chunks}
        assert [(c.rows, c.high_watermark) for c in view.chunks] == [
            (results[c.index].rows, str(results[c.index].high_watermark)) for c in plan.chunks]
        assert view.current is not None and view.changelog is not None
        assert (view.current.version, view.current.files, view.current.bytes, view.current.rows) == delta(
            table.current.uri)
        assert (view.changelog.version, view.changelog.files, view.changelog.bytes, view.changelog.rows) == delta(
            table.changelog.uri)
    (tags,) = [t for t in status.tables if t.table == "shop.tags"]
    assert [e.kind for e in tags.events] == ["stopped"] and tags.stopped_by == "taken out of the captured tables"
    # key ranges as the hover shows them: unbounded ends None, keys as JSON
    orders = status.tables[0]
    assert (orders.chunks[0].start, orders.chunks[0].end, orders.chunks[-1].end) == (None, "31", None)


def test_the_stream_its_lag_and_lease_are_the_lakes(lake: Lake) -> None:
    checkpoint = StreamStore(lake).read_checkpoint()
    assert checkpoint is not None
    stream = lake_status(lake, now=0).stream
    assert stream is not None
    seq, offset = checkpoint.visible
    assert (stream.seq, stream.offset, stream.gtid) == (seq, f"{offset.file}:{offset.position}", offset.gtid)
    assert stream.last_commit == checkpoint.updated_at and [p.seq for p in stream.history] == [1, 2, 3]
    # each batch's lag: its latest changelog commit minus the newest source commit time of its rows
    for point in stream.history:
        commits, newest = [], []
        for table in (ORDERS, TAGS):
            changelog = DeltaTable(lake.table(table).changelog.uri)
            commits += [c["timestamp"] for c in changelog.history() if c.get("stream_seq") == str(point.seq)]
            rows = changelog.to_pyarrow_table(columns=["_stream_seq", "_op_ts"])
            newest += [ts for s, ts in zip(*rows.to_pydict().values(), strict=True) if s == point.seq]
        assert point.lag_seconds == round(max(0, max(commits) - max(newest)) / 1000, 1)
        assert point.rows == sum(
            DeltaTable(lake.table(t).changelog.uri).to_pyarrow_table(
                filters=[("_stream_seq", "=", point.seq)]).num_rows for t in (ORDERS, TAGS))
    assert stream.lag_seconds == stream.history[-1].lag_seconds
    assert stream.lease_holder == "tests.replica" and not stream.lease_held  # released when the writer stopped
    # the rows/s window: all three batches within 5 minutes of "now" just after the last, none long after
    last = max(DeltaTable(lake.table(t).changelog.uri).history()[0]["timestamp"] for t in (ORDERS, TAGS)) / 1000
    after = lake_status(lake, now=last + 1).stream
    assert after is not None and after.rows_per_second == round(sum(p.rows for p in stream.history) / 300, 1)


def test_the_binlog_margin_is_the_last_check_in_the_lake_with_its_age(lake: Lake) -> None:
    def page(status: LakeStatus) -> tuple[str, dict[str, Any]]:
        dag = DagStatus("d", "r", "running", None, None, [LakeReport(LakeRef(lake.base_uri, None), status)])
        return render_dag(dag, "", "/j"), dag.to_dict()["lakes"][0]["status"]["stream"]["binlog_margin"]

    html, shown = page(lake_status(lake, now=0))
    assert shown is None and '<span class="muted" data-field="binlog-margin">not measured yet</span>' in html
    files = [BinlogFile("mysql-bin.000001", 9000), BinlogFile("mysql-bin.000002", 500)]
    now = 1_700_000_000.0
    retention = retention_from_variables({"binlog_expire_logs_seconds": "86400"})
    margin = position_margin(retention, files, "mysql-bin.000001", 1000, now, lambda name: now - 20 * 3600)
    write_margin_check(lake, MarginCheck.of(margin, "stream", 6 * 3600, now))
    # a stream down for 3 h: the figure as measured (4 h left, below its 6 h), and how old it is
    html, shown = page(lake_status(lake, now=now + 3 * 3600))
    assert shown == {"measured_at": "2023-11-14T22:13:20+00:00", "age_seconds": 10800.0, "checked_by": "stream",
                     "file": "mysql-bin.000001", "position": 1000, "seconds": 4 * 3600.0, "limited_by": "age",
                     "behind_bytes": 8500, "warn_below_seconds": 21600.0, "below": True}
    assert ('<span data-field="binlog-margin" data-value="14400.0" data-limited-by="age" data-below="true" '
            'data-age-seconds="10800.0" class="bad">4 h (warns below 6 h)</span>') in html
    assert ('data-field="binlog-margin-age">measured 3 h ago by the stream (2023-11-14T22:13:20+00:00), binlog file '
            'mysql-bin.000001, 8.3 KiB of binlog behind</span>') in html
    # the split's check of a purged file; a server that purges nothing
    gone = position_margin(retention, files[1:], "mysql-bin.000001", 1000, now, lambda name: now)
    write_margin_check(lake, MarginCheck.of(gone, "split", None, now))
    html, shown = page(lake_status(lake, now=now + 1))
    assert shown["below"] and 'class="bad">none: binlog file mysql-bin.000001 is purged</span>' in html
    assert "measured 1 s ago by the split task" in html
    never = position_margin(retention_from_variables({"binlog_expire_logs_seconds": "0"}), files, "mysql-bin.000001",
                            1000, now, lambda name: now)
    write_margin_check(lake, MarginCheck.of(never, "stream", 6 * 3600, now))
    html, shown = page(lake_status(lake, now=now))
    assert shown["seconds"] is None and not shown["below"]
    assert 'data-below="false" data-age-seconds="0.0">not purged (no retention by age or size)</span>' in html


def test_a_batchs_newest_change_comes_from_file_statistics_and_after_compaction_from_the_rows(
        lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream file holds one batch of one table: the newest source commit time of a batch (its lag) is
    its files' statistics, no row read (a whole database's page reads a thousand changelogs). Once a
    compaction put several batches in one file, the rows are read, and the history is the same."""
    store = StreamStore(lake)
    checkpoint = store.read_checkpoint()
    assert checkpoint is not None
    checkpoint.advance(4, off(2, 300))  # a batch of two transactions of orders, 4 s apart: one file
    records = [*transaction(2, 100, insert((900, 1, Decimal("1.00"), "x", None)), ts_ms=5_000),
               *transaction(2, 200, insert((901, 1, Decimal("2.00"), "y", None)), ts_ms=9_000)]
    store.commit(checkpoint, {ORDERS: [changes_table(records, checkpoint.schemas[ORDERS])]})
    reads: list[str] = []
    rows_read = lake_status_module._newest_read
    monkeypatch.setattr(lake_status_module, "_newest_read",
                        lambda changelog, *seqs: reads.append(changelog.uri) or rows_read(changelog, *seqs))
    before = lake_status(lake, now=0).stream
    assert before is not None and reads == []

    for table in (ORDERS, TAGS):
        changelog = lake.table(table).changelog.open()
        assert changelog is not None and changelog.compact(1 << 30).files_removed > 1
    after = lake_status(lake, now=0).stream
    assert after is not None and sorted(reads) == sorted(lake.table(t).changelog.uri for t in (ORDERS, TAGS))
    assert [(p.seq, p.rows, p.lag_seconds) for p in after.history] == [
        (p.seq, p.rows, p.lag_seconds) for p in before.history]
    assert any(p.lag_seconds for p in before.history)  # lags to compare, not all unknown


def test_a_batch_without_manifest_is_pending_or_what_airflow_says(lake: Lake) -> None:
    lake.fs.delete_file(lake.table(ORDERS).manifest(1))
    pending = lake_status(lake, ["shop.orders"], now=0)
    (orders,) = pending.tables
    assert orders.state == "snapshot" and orders.batches_done == 1
    assert [c.state for c in orders.chunks] == ["done", "done", "pending", "pending"]
    assert orders.chunks[2].rows is None
    running = lake_status(lake, ["shop.orders"], {(ORDERS, 1): "running"}, now=0).tables[0]
    assert [c.state for c in running.chunks] == ["done", "done", "running", "running"]
    html = render_dag(DagStatus("d", "r", "running", ["shop.orders"], None, [
        LakeReport(LakeRef(lake.base_uri, None), pending, TaskState("stream", -1, None, 0))]), "", "/j")
    assert re.search(r'<tr data-table="shop.orders" data-chunks="4" data-chunks-done="2">', html)
    assert html.count('data-state="pending"') == 2


def test_the_latest_verification_shows_its_verdict_and_the_chunks_that_differ(lake: Lake) -> None:
    store = VerifyStore(lake)
    checkpoint = StreamStore(lake).read_checkpoint()
    assert checkpoint is not None
    hw = checkpoint.offset
    equal = VerifyReport(ORDERS, "manual__1", (ChunkVerdict(Chunk(ORDERS, 0, None, 31), hw, 30, 30),), 1.0, (0,))
    store.write_report(equal)
    assert lake_status(lake, now=0).tables[0].verification.equal  # type: ignore[union-attr]
    differs = VerifyReport(ORDERS, "manual__2", (
        ChunkVerdict(Chunk(ORDERS, 0, None, 31), hw, 30, 30),
        ChunkVerdict(Chunk(ORDERS, 2, 61, 91), hw, 30, 29, missing=KeyList(1, ((70,),)),
                     different=KeyList(2, ((62,), (63,))))), 2.0, (0, 1))
    store.write_report(differs)
    status = lake_status(lake, now=0)
    verification = status.tables[0].verification
    assert verification is not None and not verification.equal
    assert (verification.run, verification.differing_chunks, verification.missing, verification.different) == (
        "manual__2", [2], 1, 2)
    lakes = [LakeReport(LakeRef(lake.base_uri, None), status)]
    airflow = "/airflow-ui"  # the UI's URL prefix the links start with
    html = render_dag(DagStatus("d", "r", "success", None, None, lakes, {"manual__2": "verify"}), airflow, "/j")
    assert 'data-verdict="differs">1 chunks differ</span> (2)' in html
    assert f'<a href="{airflow}/dags/verify" target="_top" data-field="repair">repair</a>' in html
    assert f'<a href="{airflow}/dags/verify/runs/manual__2" target="_top">manual__2</a>' in html
    # a verification run of a DAG the user may not read (or none): no link
    html = render_dag(DagStatus("d", "r", "success", None, None, lakes), airflow, "/j")
    assert f"{airflow}/dags/verify" not in html and "run the verification DAG again" in html


def test_a_failed_stream_links_to_its_log_and_a_running_one_does_not(lake: Lake) -> None:
    status = lake_status(lake, now=0)

    def page(task: TaskState) -> str:
        return render_dag(DagStatus("d", "manual 1", "failed", None, None, [
            LakeReport(LakeRef(lake.base_uri, None), status, task)]), "/ui", "/j")

    assert ('<a href="/ui/dags/d/runs/manual%201/tasks/stream" target="_top" data-field="stream-log">'
            in page(TaskState("stream", -1, "failed", 2)))
    assert "/ui/dags/d/runs/manual%201/tasks/stream/mapped/3" in page(TaskState("stream", 3, "up_for_retry", 1))
    assert 'data-field="stream-log"' not in page(TaskState("stream", -1, "running", 1))


def test_the_page_escapes_what_it_shows(lake: Lake) -> None:
    status = lake_status(lake, now=0)
    html = render_dag(DagStatus("<b>dag</b>", "run<script>", "running", None, None, [
        LakeReport(LakeRef("<i>lake</i>", None), None, None, "an <img> error")]), "", "/j?a=1&b=2")
    assert "<script>" not in html and "<img>" not in html and "<b>dag" not in html and "<i>lake" not in html
    assert "run&lt;script&gt;" in html and 'href="/j?a=1&amp;b=2"' in html
    assert status.tables  # the fixture has tables: the escaping test is not about an empty page


def test_the_rendered_fields_give_lakes_batches_and_tables() -> None:
    assert _lake({"base_uri": "/lake", "lake_conn_id": "None"}) == LakeRef("/lake", None)
    assert _lake({"base_uri": "s3://b/l", "lake_conn_id": "aws_lake"}) == LakeRef("s3://b/l", "aws_lake")
    assert _lake({"base_uri": "{{ params.base_uri }}"}) is None and _lake({"tables": ["a.b"]}) is None
    pack = Job((Batch(ORDERS, 1, 2, 3), Batch(TAGS, 0, 0, 1)), (100, 50), 0, 2).to_dict()
    assert _batches(pack) == [(ORDERS, 1), (TAGS, 0)] and _batches(str(pack)) == [(ORDERS, 1), (TAGS, 0)]
    # one batch's dict, as a split of an earlier version rendered it
    assert _batches({"table": "shop.orders", "number": 1, "first_chunk": 2, "last_chunk": 3}) == [(ORDERS, 1)]
    assert _batches("not a batch") == [] and _batches(None) == [] and _batches({"tables": "x"}) == []
    assert _tables(["shop.a", "shop.b"]) == {"shop.a", "shop.b"} and _tables('["shop.a"]') == {"shop.a"}
    assert _tables("None") is None and _tables([]) is None


def test_the_operator_names_are_the_operators() -> None:
    classes = (MySqlChunkSplitOperator, MySqlSnapshotSparkOperator, MySqlBinlogStreamOperator, MySqlVerifyPlanOperator,
               MySqlVerifyOperator, MySqlVerifySummaryOperator, MySqlResnapshotOperator)
    assert set(OPERATORS) == {c.__name__ for c in classes}
    assert STREAM_OPERATOR == MySqlBinlogStreamOperator.__name__


def test_a_runs_rendered_tasks_give_its_lakes_tables_batch_and_stream_states() -> None:
    lake = {"base_uri": "/lake", "lake_conn_id": "None"}
    def pack(*batches: Batch) -> dict[str, object]:
        return Job(batches, tuple(100 for _ in batches), 0, 1).to_dict()

    tasks = [
        RenderedTask("split", -1, {**lake, "tables": ["shop.orders", "shop.tags"]}, "success",
                     "MySqlChunkSplitOperator"),
        RenderedTask("snapshot", 0, {**lake, "batch": pack(Batch(ORDERS, 0, 0, 1))}, "success",
                     "MySqlSnapshotSparkOperator"),
        RenderedTask("snapshot", 1, {**lake, "batch": pack(Batch(ORDERS, 1, 2, 3))}, "running",
                     "MySqlSnapshotSparkOperator"),
        RenderedTask("snapshot", 2, {**lake, "batch": str(pack(Batch(TAGS, 0, 0, 1)))}, "failed",
                     "MySqlSnapshotSparkOperator"),
        RenderedTask("stream", -1, {**lake, "tables": '["shop.orders", "shop.tags"]'}, "deferred", STREAM_OPERATOR, 2),
        RenderedTask("other", -1, {"sql": "SELECT 1"}, "success", "SQLExecuteQueryOperator"),
    ]
    facts = facts_of(RunFacts("d", "r", "running"), tasks)
    assert facts.lakes == [LakeRef("/lake", None)] and facts.tables == {"shop.orders", "shop.tags"}
    assert facts.batch_states == {(ORDERS, 1): "running", (TAGS, 0): "failed"}
    assert facts.streams == {LakeRef("/lake", None): TaskState("stream", -1, "deferred", 2)}
    # a task instance's tables: that batch's
    assert facts_of(RunFacts("d", "r", None), tasks, "snapshot", 2).tables == {"shop.tags"}
    # a split choosing its tables by patterns: the run's tables are those of its lakes, all of them
    by_pattern = [RenderedTask("split", -1, {**lake, "tables": None, "include_tables": "shop\\..*"}, "success",
                               "MySqlChunkSplitOperator"), *tasks[1:3]]
    assert facts_of(RunFacts("d", "r", None), by_pattern).tables is None


def test_the_table_events_of_the_changelog_are_listed_in_binlog_order(lake: Lake) -> None:
    checkpoint = StreamStore(lake).read_checkpoint()
    assert checkpoint is not None
    schema, offset = checkpoint.schemas[ORDERS], checkpoint.offset
    # the third is a killed run's batch past the checkpoint: not committed, not shown
    statements = [(ChangeKind.SCHEMA_CHANGE, "ALTER TABLE orders ADD COLUMN x INT", offset.position + 10, 0),
                  (ChangeKind.TRUNCATE, "TRUNCATE TABLE orders", offset.position, 0),
                  (ChangeKind.SCHEMA_CHANGE, "ALTER TABLE orders DROP COLUMN x", offset.position + 20, 1)]
    for kind, statement, position, past in statements:
        record = table_event_record(schema, kind, statement, replace(offset, position=position), 1_795_000_000_000)
        record = record.append_column(STREAM_SEQ_COLUMN, pa.array([checkpoint.seq + past], pa.int64()))
        lake.table(ORDERS).changelog.append(record, CommitTag())
    (orders,) = lake_status(lake, ["shop.orders"], now=0).tables
    assert [(e.kind, e.statement, e.source_time) for e in orders.events] == [
        ("truncate", "TRUNCATE TABLE orders", "2026-11-18T11:06:40+00:00"),
        ("schema change", "ALTER TABLE orders ADD COLUMN x INT", "2026-11-18T11:06:40+00:00")]
    assert orders.events[0].at == f"binlog file 1 position {offset.position}"
    html = render_dag(DagStatus("d", "r", None, None, None, [
        LakeReport(LakeRef(lake.base_uri, None), lake_status(lake, now=0))]), "", "/j")
    assert html.count('data-event="truncate"') == 1 and html.count('data-event="schema change"') == 1


def test_sizes_read_as_people_write_them() -> None:
    assert [_size(n) for n in (5, 2048, 161_280, 5 * 1024**3, 3000 * 1024**3)] == [
        "5 B", "2.0 KiB", "157.5 KiB", "5.0 GiB", "3,000.0 GiB"]
