"""The lake on S3: moto's S3 server on loopback (``tests/s3_server.py``), reached through a lake connection
(``lake_conn_id``, an ``aws`` connection) with no AWS variable set at all, or through the standard AWS
variables alone (a deployment without a lake connection).

- The commits: delta-rs 1.6 commits a Delta log entry with a conditional put (``If-None-Match: *``), the
  server refuses a second writer of the same version, and snapshot batches committing in parallel to one
  table on S3 all land (``replace_partition``'s retry); our JSON documents are written in place, whole.
- The example DAG with ``base_uri="s3a://..."`` and ``lake_conn_id``, no AWS variable set: split, the Spark
  snapshot (``local[2]``: the driver gets the storage options from ``spark-submit``'s environment, the
  executors in their closure, and write Parquet to S3 with pyarrow), the deferrable stream and its MERGE,
  under a writer; then ``read_table``, ``read_changes`` and plain ``deltalake`` (with the connection's
  storage options) equal the source, and compaction, vacuum and checkpoints run on the bucket. The asset
  watcher's trigger, run in a process of its own with ``lake_conn_id`` (``tests/trigger_worker.py``), turns
  the stream's commits into an event. (No Spark
  views: those need Hadoop's s3a jars.)
- kill -9 of a stream worker at random moments, on S3 through the AWS variables: the lake equals the
  table, no change twice.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.stream.table_upkeep import TableUpkeep
from airflow_provider_mysqlcdc.hooks.lake_connection import lake_storage_options
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import read_margin_check
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.format.delta_schema import MERGE_APP_ID, STREAM_APP_ID
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag
from airflow_provider_mysqlcdc.lake.handle import Lake, changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.maintenance import (
    DEFAULT_POLICY,
    MaintenancePolicy,
    checkpoint,
    compact,
    vacuum,
)
from airflow_provider_mysqlcdc.lake.write.snapshot_commit import data_file, replace_partition
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests import s3_server, stream_worker, trigger_worker
from tests.airflow_connections import set_airflow_connections
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.example_dag import example_dag
from tests.integration.orders import OrdersWriter

LAKE_CONN_ID = "lake_s3"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    """The S3 server, for this module's tests."""
    server = s3_server.start(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        s3_server.stop(server)


@pytest.fixture
def aws_variables(s3: s3_server.S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard AWS variables pointing at the server, for the test and the processes it starts (the
    stream workers): a deployment without a lake connection."""
    for name, value in s3.variables().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def lake_options(s3: s3_server.S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No AWS variable at all, in this process and the ones it starts (spark-submit, its Python workers):
    the server only through the ``aws`` connection ``LAKE_CONN_ID``. Returns its storage options."""
    s3_server.reach_only_through(s3, LAKE_CONN_ID, monkeypatch)
    return lake_storage_options(LAKE_CONN_ID)


@pytest.mark.usefixtures("aws_variables")
def test_commits_are_conditional_puts(s3: s3_server.S3Server) -> None:
    # the server refuses a PUT with If-None-Match: * of a key that exists, as S3 does since 2024
    client = s3.client()
    client.put_object(Bucket=s3.bucket, Key="probe", Body=b"first")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="PreconditionFailed"):
        client.put_object(Bucket=s3.bucket, Key="probe", Body=b"second", IfNoneMatch="*")  # type: ignore[attr-defined]

    # delta-rs commits with exactly that: without conditional puts it cannot commit on S3 at all
    rows = pa.table({"writer": [-1], "n": [-1]})
    with pytest.raises(OSError, match="PutMode::Create"):
        write_deltalake("s3://bucket/no-conditional-put", rows, storage_options={"conditional_put": "disabled"})

    # racing writers, no retries: every commit that succeeded is in the table, none overwrote another's version
    uri = "s3://bucket/race"
    write_deltalake(uri, rows)
    succeeded, failed = [], []

    def append(writer: int) -> None:
        for n in range(8):
            try:
                write_deltalake(uri, pa.table({"writer": [writer], "n": [n]}), mode="append",
                                commit_properties=CommitProperties(max_commit_retries=0))
                succeeded.append((writer, n))
            except Exception:  # noqa: BLE001  (a lost race: CommitFailedError)
                failed.append((writer, n))

    threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table = DeltaTable(uri).to_pyarrow_table()
    assert sorted(zip(table.column("writer").to_pylist(), table.column("n").to_pylist(), strict=True))[1:] == sorted(
        succeeded)
    assert DeltaTable(uri).version() == len(succeeded)
    assert succeeded and len(succeeded) + len(failed) == 32


def test_parallel_snapshot_batches_commit_to_one_table(lake_options: dict[str, str]) -> None:
    """Four batches of one table commit at once (as parallel mapped tasks do): each lands, by
    ``replace_partition``'s retries on S3's refused conditional puts."""
    lake, table = Lake.at("s3://bucket/parallel", lake_options), TableId("shop", "orders")
    table_dir = lake.table(table).current_dir
    file_schema = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
    errors: list[BaseException] = []

    def batch(number: int) -> None:
        try:
            relative = f"_batch={number}/part-0.parquet"
            rows = pa.table({"id": list(range(number * 100, number * 100 + 100)), "note": ["x"] * 100},
                            schema=file_schema)
            pq.write_table(rows, f"{table_dir}/{relative}", filesystem=lake.fs)
            written = [data_file(lake.table(table), relative)]
            replace_partition(lake.table(table), number, written, file_schema, {"mysql_cdc.batch": str(number)})
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=batch, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    ids = DeltaTable(lake.table(table).current.uri, storage_options=lake_options).to_pyarrow_table(
        columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(400))


def test_upkeep_never_raises_a_protocol_on_s3(lake_options: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """A table made on S3 has the upkeep's properties from its first commit. One that lacks them (made by an
    older version) and has a DATETIME column keeps its properties and protocol, and upkeep says so once: there
    our own log entries cannot be written, and delta-rs would add the variantType reader feature."""
    lake = Lake.at("s3://bucket/properties", lake_options)
    made, older = TableId("shop", "made"), TableId("shop", "older")
    ntz_rows = pa.table({"id": [1], "at": pa.array([1], pa.timestamp("us"))})
    lake.table(made).changelog.append(ntz_rows, CommitTag(STREAM_APP_ID, 1))
    assert DeltaTable(lake.table(made).changelog.uri, storage_options=lake_options).metadata().configuration == \
        DEFAULT_POLICY.table_properties()

    uri = lake.table(older).changelog.uri
    write_deltalake(uri, ntz_rows, storage_options=lake_options)
    upkeep = TableUpkeep(lake, MaintenancePolicy(check_every_commits=1))
    with caplog.at_level(logging.WARNING, logger="airflow_provider_mysqlcdc.engine.stream.table_upkeep"):
        upkeep.changelogs_committed([older])
        upkeep.changelogs_committed([older])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "variantType" in warnings[0] and "ALTER TABLE" in warnings[0]
    table = DeltaTable(uri, storage_options=lake_options)
    assert table.metadata().configuration == {} and table.protocol().reader_features == ["timestampNtz"]


def test_one_commit_is_read_alone_on_s3(s3: s3_server.S3Server, lake_options: dict[str, str]) -> None:
    """An as-of read's snapshot time on an object store: one GET of the version's log entry, not every entry's."""
    current = Lake.at("s3://bucket/one-commit", lake_options).table(TableId("db", "t")).current
    for n in range(3):
        write_deltalake(current.uri, pa.table({"n": [n]}), mode="append", storage_options=lake_options,
                        commit_properties=CommitProperties(custom_metadata={"n": str(n)}))
    history = current.history()
    assert history is not None and [c.version for c in history] == [2, 1, 0]
    assert [current.commit(c.version) for c in history] == history
    assert history[0].metadata["n"] == "2" and history[0].timestamp_ms > 0
    assert current.commit(3) is None
    s3.client().delete_object(Bucket=s3.bucket, Key=f"one-commit/db/t/current/_delta_log/{0:020d}.json")  # type: ignore[attr-defined]
    assert current.commit(0) is None


def test_json_documents_are_written_in_place(s3: s3_server.S3Server, lake_options: dict[str, str]) -> None:
    lake = Lake.at("s3a://bucket/documents", lake_options)
    assert lake.object_store and lake.root == "bucket/documents"
    lake.write_json(lake.path("_stream", "checkpoint.json"), {"seq": 1})
    lake.write_json(lake.path("_stream", "checkpoint.json"), {"seq": 2})
    assert lake.read_json(lake.path("_stream", "checkpoint.json")) == {"seq": 2}
    # one object, no temporary one left beside it, no folder markers
    assert s3.keys("documents/") == ["documents/_stream/checkpoint.json"]

    # read while rewritten (of other sizes): never a torn document (pyarrow's HEAD, then ranged GET, see one
    # in six torn without read_json's check)
    path, stopping, writes = lake.path("_stream", "checkpoint.json"), threading.Event(), [0]

    def rewrite() -> None:
        while not stopping.is_set():
            writes[0] += 1
            lake.write_json(path, {"seq": writes[0], "pad": "x" * (writes[0] * 37 % 1500)})

    lake.write_json(path, {"seq": 0, "pad": ""})
    rewriter = threading.Thread(target=rewrite)
    rewriter.start()
    try:
        deadline, seqs = time.monotonic() + 3, []
        while time.monotonic() < deadline:
            document = lake.read_json(path)
            assert document is not None and document["pad"] == "x" * (document["seq"] * 37 % 1500)
            seqs.append(document["seq"])
    finally:
        stopping.set()
        rewriter.join()
    assert len(set(seqs)) > 10 and writes[0] > 10


def test_example_dag_on_s3(s3: s3_server.S3Server, lake_options: dict[str, str], airflow_db,
                           monkeypatch: pytest.MonkeyPatch, mariadb_server, admin, cdc_conn, database,
                           tmp_path: Path) -> None:
    set_airflow_connections(monkeypatch, mariadb_server, "5700-5715")
    monkeypatch.chdir(tmp_path)  # a URI taken for a relative local path would land here
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_20000")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()
    table = f"{database}.orders"
    schema = load_table_schema(cdc_conn, TableId.parse(table))
    spark_uri, uri = "s3a://bucket/lake", "s3://bucket/lake"
    conf = {"tables": [table], "base_uri": spark_uri, "lake_conn_id": LAKE_CONN_ID, "rows_per_batch": 16_000,
            "stop_after_idle_seconds": 4, "defer_after_idle_seconds": 0}
    lake, spark_lake = Lake.at(uri, lake_options), Lake.at(spark_uri, lake_options)

    def stream_started_a_while_ago() -> bool:
        checkpoint = StreamStore(lake).read_checkpoint()
        return checkpoint is not None and checkpoint.seq >= 3

    writer = OrdersWriter(mariadb_server, database, 150, 1, until=stream_started_a_while_ago)
    writer.start()
    started = time.monotonic()
    watcher = trigger_worker.start(spark_uri, table, LAKE_CONN_ID)  # the asset watcher's trigger, a process apart
    try:
        run = example_dag().test(run_conf=conf)
        writer.join()
        event = trigger_worker.first_event(watcher, timeout=120)
    finally:
        watcher.kill()  # it has ended already, unless something failed before its first event
    print(f"the example DAG on S3: {time.monotonic() - started:.0f} s, {writer.count} writes")
    assert run.state == "success" and writer.count > 50
    snapshots = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    assert len(snapshots) >= 2 and all(ti.state == "success" for ti in snapshots)
    assert not {"s3a:", "s3:", "bucket"} & set(os.listdir(tmp_path)), "something wrote the lake to a local path"

    source = table_rows(cdc_conn, schema)
    assert not [name for name in os.environ if name.startswith("AWS_")]  # the connection did it all
    assert canonical_rows(read_table(lake, table)) == source
    assert canonical_rows(read_table(spark_lake, table)) == source
    assert read_changes(lake, table).num_rows > 0
    # the stream merged its changes when it stopped: plain deltalake, with the connection's options, reads the table
    columns = list(schema.column_names)
    current = DeltaTable(table_uri(spark_uri, table), storage_options=lake_options)
    assert canonical_rows(current.to_pyarrow_table(columns=columns).sort_by("id")) == source
    merged = StreamStore(lake).read_checkpoint()
    assert merged is not None and current.transaction_version(MERGE_APP_ID) == merged.seq
    # the trigger, with the connection alone, saw the stream's commits of the table
    assert (event["source"], event["table"]) == ("stream", table) and event["rows"] > 0
    assert 0 <= event["first_seq"] <= event["seq"] <= merged.seq

    keys = s3.keys(f"lake/{database}/orders/")
    assert f"lake/{database}/orders/snapshot/_plan.json" in keys
    batches = {k.split("/")[4] for k in keys if "/snapshot/batch=" in k}  # a manifest a batch
    assert len({k.split("/")[4] for k in keys if "/current/_batch=" in k}) == len(batches) >= len(snapshots)
    assert not [k for k in keys + s3.keys("lake/_stream/") if k.endswith(".tmp")]
    assert "lake/_stream/checkpoint.json" in s3.keys("lake/_stream/")
    margin = read_margin_check(lake)  # the stream's last binlog margin check, for the page: one object
    assert margin is not None and margin.checked_by == "stream" and "lake/_stream/binlog_margin.json" in s3.keys(
        "lake/_stream/")

    # maintenance on the bucket: compaction, vacuum of what it replaced, a checkpoint; the data unchanged
    for location in (lake.table(table).changelog, lake.table(table).current):
        before = len(location.open().files())  # type: ignore[union-attr]
        compaction = compact(location, target_file_bytes=64 * 1024 * 1024)
        assert len(location.open().files()) == (  # type: ignore[union-attr]
            before - compaction.files_removed + compaction.files_added)
        deleted = vacuum(location, retention_hours=0)
        assert deleted and not set(deleted) & set(s3.keys(location.uri.removeprefix("s3://bucket/")))
        checkpoint(location)
    changelog_files = s3.keys(changelog_uri(uri, table).removeprefix("s3://bucket/") + "/_delta_log/")
    assert any(k.endswith(".checkpoint.parquet") for k in changelog_files)
    assert canonical_rows(read_table(lake, table)) == source


@pytest.mark.usefixtures("aws_variables")
def test_killed_stream_on_s3_resumes_without_loss_or_duplicates(s3: s3_server.S3Server, mariadb_server, admin,
                                                                 cdc_conn, database) -> None:
    """tests/integration/test_stream_crashes.py's kill -9 at random moments, with the lake on S3 (reached
    through the standard AWS variables: the stream workers are processes of their own), where a commit is
    several requests (Parquet file, log entry, checkpoint document) that a kill can split."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE crashes (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
    table = TableId(database, "crashes")
    schema = load_table_schema(cdc_conn, table)
    base_uri = "s3://bucket/crashes"
    store = StreamStore(Lake.at(base_uri))
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False)
    store.commit(Checkpoint(0, start, {table: schema}), {})
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)

    with admin.cursor() as cur:
        cur.execute("INSERT INTO crashes SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_3000")
    # no bulk updates (test_stream_crashes has them): each stream batch is a few requests to a server in
    # Python, and a catch-up of 200,000 updated rows in batches of 400 events would take minutes here
    writer = CrashesWriter(mariadb_server, database, 10, seed=7)
    writer.start()
    torn = 0

    def count_torn() -> None:  # killed between the changelog's commit and the checkpoint's
        nonlocal torn
        torn += _changelog_ahead(store, table)

    kills = stream_worker.kill_repeatedly(base_uri, config, random.Random(4),
                                          lambda kills: writer.is_alive() or kills < 4, count_torn, max_delay=1.5)
    writer.join()
    assert writer.count > 100
    checkpoint_seq = store.read_checkpoint().seq  # type: ignore[union-attr]
    assert checkpoint_seq >= kills

    stream_worker.tear_and_catch_up(base_uri, config, table, schema)
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    print(f"kill -9 on S3: {kills} kills ({torn} between a changelog commit and its checkpoint), "
          f"{writer.count} transactions, {checkpoint_seq} batches committed")


def _changelog_ahead(store: StreamStore, table: TableId) -> int:
    """1 when the changelog holds a stream batch the checkpoint does not name (a kill between the two)."""
    changelog, checkpoint = store.changelog(table), store.read_checkpoint()
    if changelog is None or checkpoint is None:
        return 0
    return int(changelog.applied(STREAM_APP_ID) > checkpoint.seq)


class CrashesWriter(OrdersWriter):
    """test_stream_dag's writer, on the ``crashes`` table."""

    def write(self, cur: object, rnd: random.Random) -> None:
        super().write(_Renamed(cur), rnd)


class _Renamed:
    """A cursor that writes ``crashes`` where the statement says ``orders``."""

    def __init__(self, cur: object) -> None:
        self.cur = cur

    def execute(self, statement: str, args: object = None) -> object:
        return self.cur.execute(statement.replace("orders", "crashes"), args)  # type: ignore[attr-defined]
