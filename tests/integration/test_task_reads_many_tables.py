"""One snapshot task's batches of many small tables (``engine.snapshot.snapshot_batch.write_batches``): read through one
source session, their chunks selected between one pair of watermarks and fixed up from one binlog pass,
each table's rows exact, and an ALTER TABLE of one of them between those watermarks still stops the attempt."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import BatchChunks, write_batches
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, ChunkResult, SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake

TABLES = 5
"""Three chunks each: one read group (16 chunks) holds all of them."""


@pytest.fixture()
def config(mariadb_server) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port)


def small_tables(admin: Any, cdc_conn: Any, database: str, prefix: str) -> list[tuple[TableSchema, list[Chunk]]]:
    """``TABLES`` tables of 300 rows, three chunks each."""
    tables = []
    for i in range(TABLES):
        with admin.cursor() as cur:
            cur.execute(f"CREATE TABLE {prefix}_{i} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {prefix}_{i} SELECT seq, seq * {i} FROM seq_1_to_300")
        schema = load_table_schema(cdc_conn, TableId(database, f"{prefix}_{i}"))
        tables.append((schema, split_table(cdc_conn, schema, chunk_size=100)))
    return tables


def connections(admin: Any) -> int:
    with admin.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        return int(cur.fetchone()[1])


def write(tmp_path: Any, config: ConnectionConfig,
          tables: list[tuple[TableSchema, list[Chunk]]]) -> Iterator[ChunkResult]:
    store = SnapshotStore(Lake.at(str(tmp_path / "lake")))
    batches = [BatchChunks(Batch(schema.id, 0, 0, len(chunks) - 1), schema, chunks) for schema, chunks in tables]
    return write_batches(store, "a", 0, config, batches, server_id=5720)


def test_a_task_of_many_tables_connects_once_and_reads_them_under_one_pair_of_watermarks(
        admin, cdc_conn, database, config, tmp_path) -> None:
    tables = small_tables(admin, cdc_conn, database, "small")
    schema, chunks = tables[0]
    before = connections(admin)
    ArrowSelect(config, schema).read_many(chunks)  # what connectorx's SELECT of one table's group connects
    per_select = connections(admin) - before

    before = connections(admin)
    results = list(write(tmp_path, config, tables))
    opened = connections(admin) - before

    # one control connection for the task, and connectorx's for one SELECT a table (no writes: no binlog pass)
    assert opened == 1 + TABLES * per_select
    # every chunk the split made once (three a table, unless the table's row estimate made the split cut another)
    assert sorted((r.chunk.table, r.chunk.index) for r in results) == sorted(
        (c.table, c.index) for _, chunks in tables for c in chunks)
    assert sum(r.rows for r in results) == 300 * TABLES
    assert len({(r.low_watermark, r.high_watermark) for r in results}) == 1


def test_an_alter_of_one_of_many_tables_between_their_watermarks_stops_the_attempt(
        mariadb_server, admin, cdc_conn, database, config, tmp_path) -> None:
    """The last table's SELECT waits for an ALTER TABLE of it (its metadata lock), which waits for a
    transaction that read the table: the ALTER lands after the group's low watermark and before its high
    one, deterministically."""
    tables = small_tables(admin, cdc_conn, database, "altered")
    last = tables[-1][0].id
    holder = mariadb_server.admin_connect(database)
    with holder.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute(f"SELECT * FROM {last.quoted} LIMIT 1")  # holds the table's metadata lock until COMMIT

    def alter() -> None:
        conn = mariadb_server.admin_connect(database)
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {last.quoted} ADD COLUMN note VARCHAR(10)")
        conn.close()

    def wait_for_a_lock_wait(statement: str) -> None:
        """Until a ``statement`` (ALTER, SELECT) waits for the table's metadata lock, 60 s at most."""
        deadline = time.monotonic() + 60
        watcher = mariadb_server.admin_connect(database)
        with watcher.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("SELECT INFO FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table "
                            "metadata lock' AND INFO LIKE %s", (f"{statement}%",))
                if cur.fetchall():
                    break
                time.sleep(0.05)
        watcher.close()

    def release_once_the_select_waits() -> None:
        wait_for_a_lock_wait("SELECT")
        with holder.cursor() as cur:
            cur.execute("COMMIT")

    altering = threading.Thread(target=alter)
    altering.start()
    wait_for_a_lock_wait("ALTER")  # from here on, a SELECT of the table waits behind the ALTER
    releasing = threading.Thread(target=release_once_the_select_waits)
    releasing.start()
    results: list[ChunkResult] = []
    try:
        with pytest.raises(SchemaChangeError, match=f"{last} changed by 'ALTER TABLE .* between the watermarks"):
            for result in write(tmp_path, config, tables):
                results.append(result)
    finally:
        releasing.join(90)
        altering.join(90)
        holder.close()
    assert results == []  # nothing of the attempt handed on
