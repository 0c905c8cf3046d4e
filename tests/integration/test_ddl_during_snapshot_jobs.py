"""A DDL during a multi-job Spark snapshot on the example DAG: run between two of the table's jobs (from a
wrapper of the snapshot operator, so at a known point, not by timing), ADD COLUMN with a DEFAULT, RENAME
COLUMN and INT -> BIGINT each end with the DAG run successful and the lake, read with deltalake alone,
equal to the source once the stream has caught up: the jobs before the DDL committed the old columns,
those after it the new ones (a widened column widens the batches before it), and the stream applies the
DDL at its offset. A DDL no type can follow (INT -> VARCHAR) fails the job's task with the job's own
error, its class and message. And a DDL while a task reads (run between two of its chunks) has that
task's batches read again with the new columns, without Spark."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import BatchChunks
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.documents.snapshot import ChunkResult, Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from airflow_provider_mysqlcdc.spark.application import JobBatch, SparkApplication, TaskChunks
from airflow_provider_mysqlcdc.spark.snapshot_job import TaskFailure, commit_job, read_chunks, read_job
from tests.compared_rows import current_rows, table_rows
from tests.integration.example_dag import example_dag
from tests.integration.watched_jobs import JobsWatched

SERVER_IDS = "5740-5759"  # this module's binlog reader ids (the ``connections`` fixture)
ROWS = 20_000
"""Three chunks of the split's default size, a batch and a Spark job each with ``rows_per_batch`` 5,000."""

DDLS = {
    "add column with a default": ("ADD COLUMN c VARCHAR(8) NOT NULL DEFAULT 'new'", ["id", "n", "label", "c"]),
    "rename column": ("RENAME COLUMN label TO title", ["id", "n", "title"]),
    "int to bigint": ("MODIFY n BIGINT", ["id", "n", "label"]),
}


def create_items(admin: Any, name: str, rows: int = ROWS) -> None:
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, n INT, label VARCHAR(20))")
        cur.execute(f"INSERT INTO {name} SELECT seq, seq * 3, CONCAT('l', seq) FROM seq_1_to_{rows}")


def alter_under_writes(mariadb_server: Any, database: str, name: str, ddl: str) -> None:
    """Changes of rows in every batch before and after ``ALTER TABLE <name> <ddl>``, and rows inserted after it."""
    conn = mariadb_server.admin_connect(database)
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {name} SET n = n + 1 WHERE id % 1000 = 0")
        cur.execute(f"DELETE FROM {name} WHERE id % 1000 = 500")
        cur.execute(f"ALTER TABLE {name} {ddl}")
        cur.execute(f"UPDATE {name} SET n = -id WHERE id % 1000 = 1")
        cur.execute(f"INSERT INTO {name} (id, n) SELECT {ROWS} + seq, seq FROM seq_1_to_50")
    conn.close()


def run_conf(database: str, names: list[str], base_uri: str, rows_per_batch: int = 5_000) -> dict[str, Any]:
    return {"tables": [f"{database}.{name}" for name in names], "base_uri": base_uri, "rows_per_batch": rows_per_batch,
            "stop_after_idle_seconds": 0}  # the changes are all made before the stream task: it stops once caught up


def assert_lake_is_source(base_uri: str, cdc_conn: Any, database: str, name: str,
                          columns: list[str]) -> dict[str, str]:
    """The current Delta table, read with deltalake, holds the source's rows and exactly its columns (and
    the metadata ones); returns its columns' Delta types."""
    schema = load_table_schema(cdc_conn, TableId(database, name))
    assert list(schema.column_names) == columns
    assert sorted(current_rows(base_uri, schema)) == table_rows(cdc_conn, schema)
    fields = DeltaTable(table_uri(base_uri, schema.id)).schema().fields
    assert [f.name for f in fields if not f.name.startswith("_")] == columns
    return {f.name: str(f.type) for f in fields}


def test_a_ddl_between_the_jobs_of_a_snapshot(airflow_db: Any, connections: Any, mariadb_server: Any, admin: Any,
                                              cdc_conn: Any, database: str, tmp_path: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Each DDL of ``DDLS`` on a table of its own, the three tables in one DAG run: a table's DDL runs after the
    first job that committed a batch of it, and a later job commits the rest of it. A job reads two batches of
    about 6,700 rows (``rows_per_batch`` 14,000, one chunk a batch), so the nine batches take five Spark jobs
    rather than a run of three each."""
    names = {ddl: f"items_{index}" for index, ddl in enumerate(DDLS)}
    for name in names.values():
        create_items(admin, name)
        with admin.cursor() as cur:  # the split's row estimates, which pack the batches into jobs
            cur.execute(f"ANALYZE TABLE {name}")
            cur.fetchall()
    base_uri = str(tmp_path / "lake")
    altered_after: dict[str, int] = {}  # a table's DDL: after how many jobs

    def alter(ddl: str) -> Callable[[], None]:
        def run() -> None:
            altered_after[ddl] = len(jobs.outcomes)
            alter_under_writes(mariadb_server, database, names[ddl], DDLS[ddl][0])
        return run

    jobs = JobsWatched(monkeypatch, after_tables_first={f"{database}.{names[ddl]}": alter(ddl) for ddl in DDLS})
    run = example_dag().test(run_conf=run_conf(database, list(names.values()), base_uri, rows_per_batch=14_000))
    assert not jobs.errors and len(jobs.outcomes) == 5
    assert run.state == "success"
    for ddl, name in names.items():
        table = f"{database}.{name}"
        assert jobs.batches_of(table) == 3 and jobs.jobs_of(table, since=altered_after[ddl]) >= 1, ddl
        types = assert_lake_is_source(base_uri, cdc_conn, database, name, DDLS[ddl][1])
        assert types["n"] == ('PrimitiveType("long")' if ddl == "int to bigint" else 'PrimitiveType("integer")'), ddl


def test_a_ddl_no_type_follows_fails_the_task_with_the_jobs_own_error(
    airflow_db, connections, mariadb_server, admin, cdc_conn, database, tmp_path, monkeypatch
) -> None:
    create_items(admin, "items_converted")
    jobs = JobsWatched(monkeypatch, lambda: alter_under_writes(mariadb_server, database, "items_converted",
                                                               "MODIFY n VARCHAR(20)"))
    run = example_dag().test(run_conf=run_conf(database, ["items_converted"], str(tmp_path / "lake")))
    assert run.state == "failed" and len(jobs.outcomes) == 1 and len(jobs.errors) == 2
    for error in jobs.errors:
        assert type(error) is SchemaChangeError, error
        assert "read columns of other types than the batches committed before it (n int32 -> string), and no " \
               "type holds the values of both" in str(error)
        assert "Cannot execute" in str(error.__cause__)  # the provider's error, under the job's


def test_a_ddl_while_a_task_reads_has_its_batches_read_again(mariadb_server, admin, cdc_conn, database, tmp_path,
                                                             connections) -> None:
    """Two tasks (called here, without Spark), one batch each: the DDL comes after the first chunk of the
    second task, which stops (``SchemaChangeError``) and is read again with the new columns; the first task's
    batch keeps the old ones. Both commit, each with the columns it was read with."""
    create_items(admin, "items_read_again", 4_000)
    schema = load_table_schema(cdc_conn, TableId(database, "items_read_again"))
    chunks = split_table(cdc_conn, schema, chunk_size=1_000)
    plan = Plan(schema, chunks, group_batches(schema.id, chunks, (len(chunks) + 1) // 2))  # two batches
    lake = Lake.at(str(tmp_path / "lake"))
    store = SnapshotStore(lake)
    store.write_plan(plan)
    assert len(plan.batches) == 2 and len(plan.chunks_of(plan.batches[1])) >= 2
    job = Job(tuple(plan.batches), (2_000, 2_000), 0, 2, (1, 1))
    app = SparkApplication("snapshot", lake, job, tuple(JobBatch(b, plan, schema) for b in plan.batches), 2,
                           connections)
    attempt = uuid.uuid4().hex[:12]
    altered: list[bool] = []

    def task(index: int, batch: BatchChunks) -> Iterator[ChunkResult | TaskFailure]:
        for record in read_chunks(TaskChunks(lake, index, [batch], connections, 5750 + index), attempt=attempt):
            yield record
            if index == 1 and not altered:  # between the second task's first two chunks, once
                alter_under_writes(mariadb_server, database, "items_read_again",
                                   "MODIFY n BIGINT, ADD COLUMN c INT DEFAULT 7")
                altered.append(True)

    def read(app: SparkApplication, todo: Sequence[Sequence[Chunk]]) -> list[ChunkResult | TaskFailure]:
        return [record for index, (jb, part) in enumerate(zip(app.batches, todo, strict=True)) if part
                for record in task(index, BatchChunks(jb.batch, jb.schema, list(part), 1))]

    app, records = read_job(app, read)
    assert [[c.name for c in jb.schema.columns] for jb in app.batches] == [["id", "n", "label"],
                                                                           ["id", "n", "label", "c"]]
    manifests = commit_job(app, attempt, records, 1.0)
    assert [m.schema for m in manifests] == [jb.schema for jb in app.batches]
    fields = {f.name: str(f.type) for f in DeltaTable(table_uri(lake.base_uri, schema.id)).schema().fields}
    assert (fields["n"], fields["c"]) == ('PrimitiveType("long")', 'PrimitiveType("integer")')
    # the second batch's rows (its key range: from its first chunk's start on) are the source's now
    later = load_table_schema(cdc_conn, schema.id)
    start = plan.chunks[plan.batches[1].first_chunk].start
    assert start is not None
    in_lake = sorted(r for r in current_rows(lake.base_uri, later) if r[0] >= start)
    assert in_lake == [r for r in table_rows(cdc_conn, later) if r[0] >= start]
