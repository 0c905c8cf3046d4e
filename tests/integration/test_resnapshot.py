"""Repair: re-snapshot key ranges of a replica, damaged in the lake and behind the source, while a writer
writes and the stream keeps capturing; the replica converges to the source, only the ranges asked for
are touched, and changes after a chunk's new high watermark still win.

The snapshot is made with the engine's own steps without Spark (``tests.replica``): the Spark path is
the snapshot DAG test's; the repair runs in the worker in any case.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.operators.resnapshot import MySqlResnapshotOperator
from tests.arrow_rows import canonical_rows
from tests.compared_rows import current_rows, table_rows
from tests.integration.stream_task import stream_task
from tests.replica import snapshot
from tests.writers import TransactionWriter

SERVER_IDS = "5900-5909"
pytestmark = pytest.mark.usefixtures("connections")
ROWS = 3000


@pytest.fixture()
def config(mariadb_server: Any) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port, server_id=ServerIdRange.parse(SERVER_IDS))


def repair(base_uri: str, resnapshot: Any) -> list[dict[str, Any]]:
    operator = MySqlResnapshotOperator(task_id="repair", base_uri=base_uri, resnapshot=resnapshot)
    return operator.execute(context={})


def replica(base_uri: str, schema: TableSchema) -> list[tuple[Any, ...]]:
    return sorted(canonical_rows(read_table(base_uri, str(schema.id)).select(list(schema.column_names))))


class Writer(TransactionWriter):
    """Updates, deletes and inserts, inside the repaired ranges and outside, until stopped."""

    pause = 0.002

    def write(self, cur: Any, rnd: random.Random) -> None:
        key = rnd.randint(1, ROWS + 200)
        cur.execute("BEGIN")
        cur.execute("UPDATE rep SET v = v + 1 WHERE id = %s", (key,))
        cur.execute("DELETE FROM rep WHERE id = %s", (key + 3,))
        cur.execute("INSERT IGNORE INTO rep VALUES (%s, %s, %s)", (key + 5, f"w{key}", key))
        cur.execute("COMMIT")


def lake_row(base_uri: str, table: TableId, key: int) -> pa.Table:
    current = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table()
    return current.filter(pc.equal(current.column("id"), key))


def test_damaged_ranges_are_repaired_while_the_source_changes(
    admin: Any, config: ConnectionConfig, database: str, mariadb_server: Any, tmp_path: Any
) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE rep (id INT PRIMARY KEY, name VARCHAR(20), v INT)")
        cur.execute(f"INSERT INTO rep SELECT seq, CONCAT('n', seq), seq FROM seq_1_to_{ROWS}")
    table, base_uri = TableId(database, "rep"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=250, chunks_per_batch=4)
    stream_task(base_uri, str(table))
    schema = load_table_schema(admin, table)
    uri = table_uri(base_uri, table)
    plan = SnapshotStore(Lake.at(base_uri)).read_plan(table)
    assert plan is not None and len(plan.chunks) >= 10
    last = plan.chunks[-1].index

    # damage: in the lake (a row lost, a value changed, a key the source never had) and in the source
    # without binlog (changes the stream never saw: a delete and an update)
    DeltaTable(uri).delete("id = 5")
    DeltaTable(uri).update(updates={"v": "-1"}, predicate="id = 1700")
    DeltaTable(uri).delete("id = 2600")  # outside the ranges asked for first
    extra = lake_row(base_uri, table, 10)
    extra = extra.set_column(extra.schema.get_field_index("id"), "id", pa.array([100_000], pa.int32()))
    batch = extra.schema.get_field_index("_batch")  # the partition of the last chunk, where 100000 belongs
    extra = extra.set_column(batch, "_batch",
                             pa.array([plan.batch_of(plan.chunks[-1])], extra.schema.field(batch).type))
    write_deltalake(uri, extra, mode="append", partition_by=["_batch"])
    with admin.cursor() as cur:
        cur.execute("SET sql_log_bin = 0")
        cur.execute("DELETE FROM rep WHERE id = 1500")
        cur.execute("UPDATE rep SET v = 7777 WHERE id = 1600")
        cur.execute("SET sql_log_bin = 1")
    assert replica(base_uri, schema) != sorted(table_rows(admin, schema))

    writer = Writer(mariadb_server, database, seed=5)
    writer.start()
    try:
        (report,) = repair(base_uri, {str(table): {"ranges": [[1, 1800]], "chunks": [last]}})
    finally:
        writer.stopping.set()
        writer.join()
    assert writer.count > 10
    repaired = {c["chunk"] for c in report["chunks"]}
    assert last in repaired and all(plan.chunks[i].end is None or plan.chunks[i].start is None
                                    or plan.chunks[i].start <= 1800 for i in repaired - {last})
    assert report["rows_deleted"] >= 2  # 1500 (gone from the source) and 100000 (never in it)
    assert report["rows_updated"] >= 2 and report["rows_inserted"] >= 1  # 1600 and 1700; 5
    stream_task(base_uri, str(table))  # the stream catches up with the writer: its changes after the HWs win
    source = sorted(table_rows(admin, schema))
    lake = replica(base_uri, schema)
    assert [r for r in source if r[0] != 2600] == lake  # equal but the one damage outside the ranges
    assert 2600 in {r[0] for r in source} and 1500 not in {r[0] for r in lake}

    (whole,) = repair(base_uri, {str(table): "all"})
    assert len(whole["chunks"]) == len(plan.chunks) and whole["rows_inserted"] == 1  # 2600 is back
    assert whole["rows_updated"] == 0 and whole["rows_deleted"] == 0  # rows that are right stay as they are
    assert replica(base_uri, schema) == source
    assert sorted(current_rows(base_uri, schema)) == source  # the Delta table alone, too


def test_string_keys_are_ranged_in_the_collation_order(admin: Any, config: ConnectionConfig, database: str,
                                                        tmp_path: Any) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE tags (code VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT)")
        cur.execute("INSERT INTO tags SELECT CONCAT('k', LPAD(seq, 4, '0')), seq FROM seq_1_to_1200")
    table, base_uri = TableId(database, "tags"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=250, chunks_per_batch=4)
    uri = table_uri(base_uri, table)
    DeltaTable(uri).delete("code = 'k0300' OR code = 'k1100'")
    # 'K0250'..'K0350' in upper case: the same keys under the _ci collation (Python's order would differ)
    (report,) = repair(base_uri, {str(table): [["K0250", "K0350"]]})
    schema = load_table_schema(admin, table)
    codes = {r[0] for r in canonical_rows(read_table(base_uri, str(table)).select(["code"]))}
    assert "k0300" in codes and "k1100" not in codes
    assert report["rows_inserted"] == 1 and len(report["chunks"]) <= 2
    assert len(codes) == 1199 and schema.chunk_key == "code"


def test_the_operator_refuses_what_it_cannot_do(tmp_path: Any) -> None:
    """The request's forms are unit-tested (test_resnapshot_request); here what the task meets."""
    with pytest.raises(InvalidOptionError, match="names no key range and no chunk"):
        repair(str(tmp_path), '{"db.t": {"chunks": []}}')  # a template rendered to JSON text
    with pytest.raises(InvalidOptionError, match="must map 'db.table'"):
        repair(str(tmp_path), "['db.t']")
    with pytest.raises(SnapshotStateError, match="snapshot it first"):
        repair(str(tmp_path), {"db.t": "all"})
    assert repair(str(tmp_path), {}) == []
