"""A database of many small tables and one bigger one, snapshotted as a user runs it (the example DAG through
``dag.test()``, real ``spark-submit`` on ``local[2]``) while a writer changes every table: the split packs
the 61 tables into a few mapped tasks, whose binlog readers fit the connection's default server id range
(9 ids, no ``server_id`` extra), and the replica equals the source. Then one job is run again, as a
cleared mapped task runs: it replaces exactly its own tables' batches (new Delta versions and manifests)
and leaves every other table's untouched.
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import DEFAULT_SERVER_ID_RANGE, ServerIdRange
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import job_server_id, job_tasks
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from tests.compared_rows import current_rows, table_rows
from tests.integration.example_dag import example_dag
from tests.replica import run_stopping_stream
from tests.writers import TransactionWriter

SMALL_TABLES, SMALL_ROWS, BIG_ROWS = 60, 300, 40_000
ROWS_PER_BATCH = 20_000  # the big table: 5 chunks of 8,096 in batches of 2, 2 and 1 chunks


class Writer(TransactionWriter):
    """One transaction after another, each an update, an insert and a delete in random tables (the big one
    in half of them)."""

    def write(self, cur: Any, rnd: random.Random) -> None:
        table = "big" if rnd.random() < 0.5 else f"s{rnd.randrange(SMALL_TABLES):02d}"
        top = BIG_ROWS if table == "big" else SMALL_ROWS
        key = rnd.randint(1, top + 200)
        cur.execute("BEGIN")
        cur.execute(f"UPDATE {table} SET v = v + 1, note = %s WHERE id = %s", (f"u{rnd.random():.5f}", key))
        cur.execute(f"INSERT IGNORE INTO {table} VALUES (%s, %s, %s)", (key + 3, key, "new"))
        cur.execute(f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1, top),))
        cur.execute("COMMIT")


def versions(base_uri: str, tables: list[TableId]) -> dict[TableId, int]:
    return {t: DeltaTable(table_uri(base_uri, t)).version() for t in tables}


def test_a_database_of_many_tables_snapshots_in_a_few_jobs_and_one_job_reruns_alone(
    airflow_db, connections: ConnectionConfig, mariadb_server, admin, cdc_conn, database: str, tmp_path
) -> None:
    names = ["big", *(f"s{i:02d}" for i in range(SMALL_TABLES))]
    with admin.cursor() as cur:
        for name in names:
            rows = BIG_ROWS if name == "big" else SMALL_ROWS
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
            cur.execute(f"INSERT INTO {name} SELECT seq, seq, CONCAT('n', seq) FROM seq_1_to_{rows}")
        cur.execute(f"ANALYZE TABLE {', '.join(names)}")
        cur.fetchall()
    tables = [TableId(database, n) for n in names]
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [str(t) for t in tables], "base_uri": base_uri, "rows_per_batch": ROWS_PER_BATCH,
            "stop_after_idle_seconds": 0}

    stop = threading.Event()
    writer = Writer(mariadb_server, database, seconds=3_600, seed=27, until=stop.is_set)
    writer.start()
    try:
        run = example_dag().test(run_conf=conf)
    finally:
        stop.set()
        writer.join(30)
    assert run.state == "success" and writer.count > 20

    # a few mapped tasks for 61 tables: the big table's batches, and the small tables packed together
    snapshots = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    labels = [ti.rendered_map_index for ti in snapshots]
    assert 1 < len(snapshots) <= 5 and all(ti.state == "success" for ti in snapshots), labels
    assert any(re.fullmatch(rf"{database}: \d+ tables, \d+ chunks", label) for label in labels), labels
    (split,) = [ti for ti in run.get_task_instances() if ti.task_id == "split"]
    packs = [Job.from_dict(p) for p in split.xcom_pull(task_ids="split")]
    assert [p.label for p in packs] == labels
    assert sorted(b.table for p in packs for b in p.batches) == sorted(
        [*(tables[0] for _ in range(3)), *tables[1:]])  # every batch once: the big table's 3, one a small table
    # the binlog readers of the whole run fit the default range, one id each, the stream's last left free
    ids = ServerIdRange.parse(DEFAULT_SERVER_ID_RANGE)
    readers = [job_server_id(p, ids, task) for p in packs for task in range(job_tasks(p))]
    assert len(readers) == len(set(readers)) and set(readers) <= set(range(ids.start, ids.end))

    # the replica equals the source once the stream has read what the writer did last
    run_stopping_stream(connections, StreamOptions(base_uri, tuple(tables), stop_after_idle_seconds=0))
    for table in tables:
        schema = load_table_schema(cdc_conn, table)
        assert sorted(current_rows(base_uri, schema)) == table_rows(cdc_conn, schema), table

    # one job again, as a cleared mapped task runs it: its batches are replaced (a Delta commit and a manifest
    # of a new attempt each), every other batch's manifest and every other table's Delta table stay as they were
    # (a large table's batches may be in several jobs)
    # imported here: importing Airflow while pytest collects binds its log output to pytest's own capture
    from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator

    store = SnapshotStore(Lake.at(base_uri))
    again = max(packs, key=lambda p: len(p.tables))
    mine = set(again.tables)
    before = versions(base_uri, tables)
    attempts = {b: m.attempt for p in packs for b in p.batches if (m := store.read_manifest(b)) is not None}
    outcome = MySqlSnapshotSparkOperator(task_id="snapshot", batch=again.to_dict(), base_uri=base_uri).execute({})
    assert outcome["label"] == again.label and len(outcome["batches"]) == len(again.batches)
    after = versions(base_uri, tables)
    assert {t for t in tables if after[t] != before[t]} == mine
    assert all(after[t] == before[t] + 1 for t in mine)  # one commit a batch: one batch a small table here
    for batch, attempt in attempts.items():
        manifest = store.read_manifest(batch)
        assert manifest is not None and (manifest.attempt != attempt) == (batch in again.batches), batch.label
    with admin.cursor() as cur:  # a change after the re-run, and the replica still follows the source
        cur.execute(f"UPDATE {again.tables[0].table} SET note = 'after the re-run' WHERE id % 7 = 0")
    run_stopping_stream(connections, StreamOptions(base_uri, tuple(tables), stop_after_idle_seconds=0))
    for table in tables:
        schema = load_table_schema(cdc_conn, table)
        assert sorted(current_rows(base_uri, schema)) == table_rows(cdc_conn, schema), table
