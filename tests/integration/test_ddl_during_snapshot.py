"""An ALTER TABLE while a table's chunks are read: the chunk reader never mixes two schemas into one
batch; it stops with a SchemaChangeError saying to retry, and a reader opened with the current schema
(what the retry does) reads the table as it is."""

from __future__ import annotations

import threading
import time

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.handle import table_uri
from tests.arrow_rows import canonical_rows
from tests.compared_rows import current_rows, table_rows
from tests.integration.example_dag import example_dag

SERVER_IDS = "5680-5689"  # this module's binlog reader ids (the ``connections`` fixture)


@pytest.fixture()
def config(mariadb_server) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port)


def test_schema_changed_since_the_batch_started(admin, cdc_conn, database, config) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE planned (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO planned SELECT seq, seq FROM seq_1_to_2000")
    table = TableId(database, "planned")
    planned = load_table_schema(cdc_conn, table)
    chunks = split_table(cdc_conn, planned, chunk_size=500)
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE planned ADD COLUMN note VARCHAR(10), MODIFY v BIGINT")
    changed = r"changed before its first chunk.*now has id int\(11\), v bigint\(20\), note"
    with pytest.raises(SchemaChangeError, match=changed), ChunkReader(config, planned, server_id=5690) as reader:
        next(reader.read(chunks))
    current = load_table_schema(cdc_conn, table)
    with ChunkReader(config, current, server_id=5690) as reader:  # the retry: the current schema
        rows = [row for snapshot in reader.read(chunks) for row in canonical_rows(snapshot.table)]
    assert sorted(rows) == table_rows(cdc_conn, current)


@pytest.mark.parametrize("ddl", ["ADD COLUMN note VARCHAR(10)", "MODIFY v BIGINT", "DROP COLUMN v"])
def test_alter_between_the_watermarks_of_a_batch(mariadb_server, admin, cdc_conn, database, config, ddl) -> None:
    name = f"altered_{ddl.split()[0].lower()}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {name} SELECT seq, seq FROM seq_1_to_4000")
    schema = load_table_schema(cdc_conn, TableId(database, name))
    chunks = split_table(cdc_conn, schema, chunk_size=200)
    altered = threading.Event()

    def alter_then_write() -> None:  # the ALTER lands while chunks are selected, then rows follow it
        conn = mariadb_server.admin_connect(database)
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {name} {ddl}")
            altered.set()
            for key in range(1, 400, 7):
                cur.execute(f"UPDATE {name} SET id = id + 100000 WHERE id = %s", (key,))
        conn.close()

    with pytest.raises(SchemaChangeError, match=f"{name} changed .*retry the task"):
        with ChunkReader(config, schema, server_id=5691, group_size=4) as reader:
            for number, _ in enumerate(reader.read(chunks)):
                if number == 1:
                    writer = threading.Thread(target=alter_then_write)
                    writer.start()
                    altered.wait(30)
    writer.join(30)


def test_alter_after_the_split_through_the_example_dag(airflow_db, connections, mariadb_server, admin, cdc_conn,
                                                       database, tmp_path) -> None:
    """The split plans the table, an ALTER TABLE comes before the Spark batches read it: the batches read
    the current columns with the planned chunks into the current-state Delta table (read here with
    deltalake), and the stream goes on from there."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE evolving (id INT PRIMARY KEY, v INT, d DECIMAL(6,2))")
        cur.execute("INSERT INTO evolving SELECT seq, seq, seq / 100 FROM seq_1_to_20000")
    table, base_uri = f"{database}.evolving", str(tmp_path / "lake")
    plan = tmp_path / "lake" / database / "evolving" / "snapshot" / "_plan.json"

    def alter_once_planned() -> None:
        for _ in range(600):
            if plan.exists():
                break
            time.sleep(0.1)
        conn = mariadb_server.admin_connect(database)
        with conn.cursor() as cur:
            cur.execute("ALTER TABLE evolving ADD COLUMN note VARCHAR(10), MODIFY d DECIMAL(12,4)")
            cur.execute("UPDATE evolving SET note = 'n', d = d + 0.0001 WHERE id % 100 = 0")
        conn.close()

    altering = threading.Thread(target=alter_once_planned)
    altering.start()
    run = example_dag().test(run_conf={"tables": [table], "base_uri": base_uri, "rows_per_batch": 10_000,
                                       "stop_after_idle_seconds": 2})
    altering.join(60)
    assert run.state == "success" and plan.exists()
    schema = load_table_schema(cdc_conn, TableId.parse(table))
    assert [c.name for c in schema.columns] == ["id", "v", "d", "note"]
    assert sorted(current_rows(base_uri, schema)) == table_rows(cdc_conn, schema)
    delta = DeltaTable(table_uri(base_uri, table))
    types = {f.name: str(f.type) for f in delta.schema().fields}
    assert (types["note"], types["d"]) == ('PrimitiveType("string")', 'PrimitiveType("decimal(12,4)")')
