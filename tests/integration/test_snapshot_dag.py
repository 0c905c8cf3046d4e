"""The snapshot as a user runs it: split -> mapped SparkSubmit per batch -> a downstream task, through
``dag.test()``, real ``spark-submit`` on ``local[2]``, a real MariaDB with a writer committing
throughout. One batch's Spark job is killed (kill -9 of its JVM) and its attempt left with a torn
file in its Delta partition folder; the next run redoes that batch only. The lake is read with
``deltalake`` itself: the table's current-state Delta table, and the batch manifests' watermarks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections.abc import Hashable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import apply_changes, row_key_of
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.cdc.split.emit_filter import EmitFilter
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import job_server_id, job_tasks
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, BatchManifest, SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from tests.compared_rows import current_rows, table_contents
from tests.integration.example_dag import example_dag
from tests.writers import TransactionWriter

SERVER_IDS = "5460-5475"  # this module's binlog reader ids (the ``connections`` fixture)

ROWS = 200_000


class SparkKiller(threading.Thread):
    """Kills the spark-submit JVM of one batch of one lake as soon as it starts (the lake's path keeps it off
    another test run's job of the same batch on the machine)."""

    def __init__(self, label: str, base_uri: str) -> None:
        super().__init__(daemon=True)
        self.label, self.base_uri = label.encode(), base_uri.encode()
        self.stopping, self.killed = threading.Event(), False

    def run(self) -> None:
        while not self.stopping.wait(0.1) and not self.killed:
            for proc in Path("/proc").iterdir():
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"SparkSubmit" in cmdline and self.label in cmdline and self.base_uri in cmdline:
                    os.kill(int(proc.name), signal.SIGKILL)
                    self.killed = True


class Writer(TransactionWriter):
    """An update, a delete and a re-insert of neighbouring keys of ``orders`` a transaction."""

    pause = 0.005

    def write(self, cur: Any, rnd: random.Random) -> None:
        key = rnd.randint(-100, ROWS + 1000)
        cur.execute("BEGIN")
        cur.execute("UPDATE orders SET amount = amount + 1, note = %s WHERE id = %s", (f"u{key}", key))
        cur.execute("DELETE FROM orders WHERE id = %s", (key + 7,))
        cur.execute("INSERT IGNORE INTO orders VALUES (%s, %s, %s, NULL)", (key + 7, key, Decimal("1.50")))
        cur.execute("COMMIT")


def lake_state(store: SnapshotStore, schema: TableSchema, config: ConnectionConfig, cdc_conn: Any,
               until: BinlogOffset) -> dict[Hashable, tuple[Any, ...]]:
    """The committed snapshot (the Delta table), plus the binlog after each chunk's HW (the manifests'):
    what the stream will do."""
    plan = store.read_plan(schema.id)
    assert plan is not None
    key = row_key_of(schema)
    order = KeyOrder.for_column(cdc_conn, schema.chunk_key_column)
    state: dict[Hashable, tuple[Any, ...]] = {}
    for row in current_rows(store.lake.base_uri, schema):
        assert key(row) not in state, f"{key(row)} written twice"
        state[key(row)] = row
    finished: list[FinishedChunkInfo] = []
    for batch in plan.batches:
        manifest = store.read_manifest(batch)
        assert manifest is not None, f"{batch.label} has no manifest"
        finished += [FinishedChunkInfo.of(result.chunk, result.high_watermark) for result in manifest.chunks]
    emit = EmitFilter({schema.id: finished}, {schema.id: order.sort_keys})
    stream = BinlogReader(config.replication_settings(), 5490, config.server_id, {schema.id: schema},
                          min(c.high_watermark for c in finished),  # the lowest HW: no chunk misses an event
                          reload_schema=lambda t: load_table_schema(cdc_conn, t), stop=until)
    index = schema.column_names.index(schema.chunk_key)
    apply_changes(state, (r for r in stream if isinstance(r, ChangeRecord)
                          and emit.should_emit(r.table, order.sort_key(r.values[index]), r.offset)), key)
    return state


def test_mapped_spark_snapshot_then_rerun_of_one_broken_batch(
    airflow_db, connections, mariadb_server, admin, cdc_conn, database, tmp_path
) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute(f"INSERT INTO orders SELECT seq, seq % 97, seq / 100, IF(seq % 5 = 0, NULL, CONCAT('n', seq)) "
                    f"FROM seq_1_to_{ROWS}")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [f"{database}.orders"], "base_uri": base_uri, "rows_per_batch": 60_000,
            "stop_after_idle_seconds": 0}  # the stream task stops as soon as it has caught up
    schema = load_table_schema(cdc_conn, TableId(database, "orders"))
    store = SnapshotStore(Lake.at(base_uri))
    server = ServerInfo.read(cdc_conn)

    # the plan is known before the run: 25 chunks of 8096 rows, 7 chunks (60,000 rows) per batch
    broken = Batch(schema.id, 1, 7, 13)
    writer, killer = Writer(mariadb_server, database, seed=11), SparkKiller(broken.label, base_uri)
    writer.start()
    killer.start()
    try:
        run = example_dag().test(run_conf=conf)
    finally:
        writer.stopping.set()
        killer.stopping.set()
        writer.join(10)
        killer.join(10)
    assert killer.killed and writer.count > 10
    assert run.state == "failed"
    plan = store.read_plan(schema.id)
    assert plan is not None and len(plan.batches) >= 3 and broken in plan.batches
    states = {ti.rendered_map_index: ti.state for ti in run.get_task_instances() if ti.task_id == "snapshot"}
    assert states == {b.label: "failed" if b == broken else "success" for b in plan.batches}
    assert store.read_manifest(broken) is None  # a killed job commits nothing

    # a torn file of the killed attempt in its partition folder must not matter either; the next run
    # redoes that batch only
    manifests = [store.read_manifest(b) for b in plan.batches]
    junk = store.part_path(broken, "killed", 0)
    store.lake.fs.create_dir(junk.rsplit("/", 1)[0])
    with store.lake.fs.open_output_stream(junk) as stream:
        stream.write(b"half a file")
    with admin.cursor() as cur:
        cur.execute("UPDATE orders SET note = 'after the first run' WHERE id % 1000 = 0")
    rerun = example_dag().test(run_conf=conf)
    assert rerun.state == "success"
    redone = [ti for ti in rerun.get_task_instances() if ti.task_id == "snapshot"]
    assert [ti.rendered_map_index for ti in redone] == [broken.label]
    for batch, before in zip(plan.batches, manifests, strict=True):
        after = store.read_manifest(batch)
        assert after is not None
        # the others are not re-read
        assert before is None if batch == broken else before is not None and after.attempt == before.attempt
    # one Delta commit per batch, each replacing its own partition with its own attempt's files (as of the
    # last batch's commit: the stream's MERGE rewrites files afterwards)
    committed = [store.read_manifest(b) for b in plan.batches]
    last_batch = max(m.delta_version for m in committed if m is not None)
    delta = DeltaTable(table_uri(base_uri, schema.id), version=last_batch)
    files = sorted(uri.rsplit("/", 2)[-2] + "/" + uri.rsplit("/", 1)[-1] for uri in delta.file_uris())
    assert files == sorted(f for m in committed if m is not None for f in m.files)
    assert store.lake.exists(junk) and not any(f.endswith(junk.rsplit("/", 1)[-1]) for f in files)
    # the first batch to commit created the table (version 0) with its files
    assert sorted(m.delta_version for m in committed if m is not None) == list(range(len(plan.batches)))
    # the mapped task's XComs reach the downstream task as one list of manifests
    (summary,) = [ti for ti in rerun.get_task_instances() if ti.task_id == "summarize"]
    assert summary.xcom_pull(task_ids="summarize")["batches"] == 1
    assert lake_state(store, schema, connections, cdc_conn, read_current_offset(cdc_conn, server)) == \
        table_contents(cdc_conn, schema)

    # once the snapshot is finished, a run maps no Spark task and still goes on downstream
    done = example_dag().test(run_conf=conf)
    assert done.state == "success"
    (summary,) = [ti for ti in done.get_task_instances() if ti.task_id == "summarize"]
    assert summary.state == "success" and summary.xcom_pull(task_ids="summarize")["batches"] == 0


def test_split_gives_every_binlog_reader_of_a_run_its_own_server_id(
    connections, mariadb_server, admin, cdc_conn, database, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several tables with several batches each, as the mapped tasks would run them all at once: no two
    readers (Spark tasks of any batch, or the stream) share an id; a range too small fails the split
    before it writes any plan, naming the extra and a range that fits."""
    # imported here: importing Airflow while pytest collects binds its log output to pytest's own capture,
    # and test_tables_change (which imports this module) then cannot read the stream's log with capsys
    from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator

    sizes = {"ids_a": 20_000, "ids_b": 6_000, "ids_c": 10}
    with admin.cursor() as cur:
        for table, rows in sizes.items():
            cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {table} SELECT seq, seq FROM seq_1_to_{rows}")
            cur.execute(f"ANALYZE TABLE {table}")
            cur.fetchall()
    base_uri = str(tmp_path / "lake")
    store = SnapshotStore(Lake.at(base_uri))
    tables = [f"{database}.{t}" for t in sizes]

    def split() -> list[Job]:
        operator = MySqlChunkSplitOperator(task_id="split", tables=tables, base_uri=base_uri, chunk_size=2_000,
                                           rows_per_batch=6_000, readers_per_batch=2)
        return [Job.from_dict(b) for b in operator.execute({})]

    def use_range(text: str) -> ServerIdRange:
        conn = json.loads(os.environ["AIRFLOW_CONN_MYSQL_CDC_DEFAULT"])
        monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({**conn, "extra": {"server_id": text}}))
        return ServerIdRange.parse(text)

    use_range("5460-5465")
    with pytest.raises(InvalidOptionError) as error:
        split()
    message = str(error.value)
    assert "server_id extra of the connection 'mysql_cdc_default' gives 6 server ids (5460-5465)" in message
    assert "+ 1 for the stream" in message and '"server_id": "5460-' in message
    assert all(store.read_plan(TableId.parse(t)) is None for t in tables)  # nothing planned

    ids = use_range("5460-5475")
    packs = split()
    batches = [b for p in packs for b in p.batches]
    assert {b.table.table for b in batches} == set(sizes) and max(b.number for b in batches) >= 2
    readers = [job_server_id(p, ids, task) for p in packs for task in range(job_tasks(p))]
    assert len(readers) == len(set(readers)) and ids.end not in readers  # the stream takes the last id
    assert all(job_tasks(p) == min(2, p.chunk_count) for p in packs)

    # a later run assigns ids to the batches still pending only, again from the first id
    for done in packs[0].batches:
        store.write_manifest(BatchManifest(done, "done", load_table_schema(cdc_conn, done.table), (), bytes=0,
                                           seconds=0.0, delta_version=1))
    again = split()
    assert [p.batches for p in again] == [p.batches for p in packs[1:]] and job_server_id(again[0], ids, 0) == 5460


def test_split_reads_small_rows_in_groups_and_chunks_of_about_chunk_max_bytes_one_at_a_time(
    connections, admin, database, tmp_path
) -> None:
    """A table with a TEXT column of short values is read 16 chunks at once and ahead; a table whose rows make
    each chunk about ``chunk_max_bytes`` one chunk at a time, none ahead (the pack's read group)."""
    from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator  # see the test above

    with admin.cursor() as cur:
        cur.execute("CREATE TABLE notes (id INT PRIMARY KEY, body TEXT)")
        cur.execute("INSERT INTO notes SELECT seq, CONCAT('note ', seq) FROM seq_1_to_3000")
        cur.execute("CREATE TABLE pages (id INT PRIMARY KEY, body LONGTEXT)")
        cur.execute("INSERT INTO pages SELECT seq, REPEAT('x', 300000) FROM seq_1_to_20")
    operator = MySqlChunkSplitOperator(task_id="split", tables=[f"{database}.notes", f"{database}.pages"],
                                       base_uri=str(tmp_path / "lake"), chunk_size=100, chunk_max_bytes=1024 * 1024)
    packs = [Job.from_dict(d) for d in operator.execute({})]
    groups = {b.table.table: group for p in packs for b, group in zip(p.batches, p.read_groups, strict=True)}
    assert groups == {"notes": 16, "pages": 1}  # 100 rows of ~15 B a chunk; 3 rows of 300 KB a chunk
