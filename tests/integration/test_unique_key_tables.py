"""Tables without a primary key, end to end through the example DAG (split, real ``spark-submit`` on
``local[2]``, the stream), with a writer committing through the snapshot and into the stream:

- ``pairs`` has no primary key but a UNIQUE index on NOT NULL columns ``(region, n)``, which keys it by
  itself (a nullable UNIQUE index, which repeats NULLs, is passed over); its chunk key ``region`` has
  only three values;
- ``codes`` is split on ``chunk_key_columns`` = its unique string column ``code`` (``utf8mb4_general_ci``)
  while its rows are keyed by another unique column ``id``: the configured chunk key has to survive into
  the Spark job and the stream, and the writer moves rows between chunks by changing their codes.

The lake equals each table through ``read_table`` and through ``deltalake`` alone, after the run and
after a second run that streams on from the checkpoint.
"""

from __future__ import annotations

import random
import time
from collections.abc import Hashable
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import row_key_of
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import batch_schema
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import current_rows, table_contents
from tests.integration.example_dag import example_dag
from tests.writers import TransactionWriter

SERVER_IDS = "5850-5865"  # this module's binlog reader ids (the ``connections`` fixture)

ROWS = 30_000
REGIONS = ("east", "north", "west")


class Writer(TransactionWriter):
    """Inserts, updates (of keys too), deletes; rows move between chunks: ``pairs`` by region, ``codes`` by code."""

    def write(self, cur: Any, rnd: random.Random) -> None:
        n, count = rnd.randint(1, ROWS + 2_000), self.count

        def region(offset: int) -> str:
            return REGIONS[(n + offset) % 3]

        cur.execute("BEGIN")
        cur.execute("INSERT INTO pairs VALUES (%s, %s, NULL, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                    (region(0), n, n))
        cur.execute("UPDATE pairs SET email = %s, v = v + 1 WHERE region = %s AND n = %s",
                    (f"w{self.seed}.{count}@x", region(5), n + 5))
        cur.execute("UPDATE IGNORE pairs SET region = %s WHERE region = %s AND n = %s", (region(1), region(7), n + 7))
        cur.execute("UPDATE IGNORE pairs SET n = n + 100000 WHERE region = %s AND n = %s", (region(9), n + 9))
        cur.execute("DELETE FROM pairs WHERE region = %s AND n = %s", (region(11), n + 11))
        cur.execute("INSERT IGNORE INTO codes VALUES (%s, %s, 'new')", (ROWS + 1 + count, f"K{n:05d}x"))
        cur.execute("UPDATE IGNORE codes SET code = %s, note = %s WHERE id = %s",
                    (f"m{n:05d}", f"moved {count}", rnd.randint(1, ROWS)))
        cur.execute("DELETE FROM codes WHERE id = %s", (rnd.randint(1, ROWS),))
        cur.execute("COMMIT")
        time.sleep(0.002)


def lake_matches(base_uri: str, schema: TableSchema, source: dict[Hashable, tuple[Any, ...]]) -> None:
    """The current state as ``read_table`` reads it and as ``deltalake`` alone reads it equal ``source``,
    one row per key."""
    key = row_key_of(schema)
    for reader, rows in (("read_table", canonical_rows(read_table(base_uri, str(schema.id)))),
                         ("deltalake", current_rows(base_uri, schema))):
        assert len(rows) == len(source), f"{reader}: {len(rows)} rows of {schema.id}, the table has {len(source)}"
        assert {key(r): r for r in rows} == source, f"{reader} reads another {schema.id} than the table"


def test_tables_keyed_by_a_unique_index_snapshot_and_stream(airflow_db, connections, mariadb_server, admin,
                                                            cdc_conn, database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE pairs (region VARCHAR(8) NOT NULL, n INT NOT NULL, email VARCHAR(40) NULL, v INT, "
                    "UNIQUE KEY a_email (email), UNIQUE KEY pair (region, n), KEY by_v (v))")
        cur.execute(f"INSERT INTO pairs SELECT ELT(1 + seq MOD 3, 'east', 'north', 'west'), seq, "
                    f"IF(seq MOD 4 = 0, NULL, CONCAT('e', seq, '@x')), seq FROM seq_1_to_{ROWS}")
        cur.execute("CREATE TABLE codes (id INT NOT NULL, code VARCHAR(16) COLLATE utf8mb4_general_ci NOT NULL, "
                    "note TEXT, UNIQUE KEY by_id (id), UNIQUE KEY code_unique (code))")
        cur.execute(f"INSERT INTO codes SELECT seq, CONCAT('k', LPAD(seq, 5, '0')), CONCAT('n', seq) "
                    f"FROM seq_1_to_{ROWS}")
        for table in ("pairs", "codes"):
            cur.execute(f"ANALYZE TABLE {table}")
            cur.fetchall()
    pairs, codes = TableId(database, "pairs"), TableId(database, "codes")
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [str(pairs), str(codes)], "base_uri": base_uri, "chunk_key_columns": {str(codes): "code"},
            "stop_after_idle_seconds": 3}
    schemas = {pairs: load_table_schema(cdc_conn, pairs), codes: load_table_schema(cdc_conn, codes, "code")}

    def stream_started_a_while_ago() -> bool:
        checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
        return checkpoint is not None and checkpoint.seq >= 3

    writer = Writer(mariadb_server, database, 180, 7, until=stream_started_a_while_ago)
    writer.start()
    run = example_dag().test(run_conf=conf)
    writer.join()
    assert run.state == "success" and writer.count > 50

    # each table planned with its unique index as the key and, for codes, the configured chunk key
    store = SnapshotStore(Lake.at(base_uri))
    pairs_plan, codes_plan = store.read_plan(pairs), store.read_plan(codes)
    assert pairs_plan is not None and codes_plan is not None
    assert (pairs_plan.schema.key_index, pairs_plan.schema.row_key, pairs_plan.schema.chunk_key) == \
        ("pair", ("region", "n"), "region")
    assert (codes_plan.schema.key_index, codes_plan.schema.row_key, codes_plan.schema.chunk_key) == \
        ("by_id", ("id",), "code")
    assert len(codes_plan.chunks) >= 3 and all(isinstance(c.end, str) for c in codes_plan.chunks[:-1])
    snapshots = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    # both small tables in one Spark job, each its own batch (Delta commit and manifest)
    assert [ti.state for ti in snapshots] == ["success"]
    chunks = len(pairs_plan.chunks) + len(codes_plan.chunks)
    assert snapshots[0].rendered_map_index == f"{database}: 2 tables, {chunks} chunks"
    (stream,) = [ti for ti in run.get_task_instances() if ti.task_id == "stream"]
    assert stream.xcom_pull(task_ids="stream")["rows"] > 0
    for schema in schemas.values():
        lake_matches(base_uri, schema, table_contents(cdc_conn, schema))

    # a second run streams on from the checkpoint (whose schemas name the key index) and equals again
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and checkpoint.schemas[codes].key_index == "by_id"
    assert checkpoint.schemas[codes].chunk_key == "code"
    Writer(mariadb_server, database, 2, 8).run()
    rerun = example_dag().test(run_conf=conf)
    assert rerun.state == "success"
    assert not [ti for ti in rerun.get_task_instances() if ti.task_id == "snapshot" and ti.state == "success"]
    for schema in schemas.values():
        lake_matches(base_uri, schema, table_contents(cdc_conn, schema))


def test_a_batch_reads_the_current_columns_with_the_planned_chunk_key(mariadb_server, admin, cdc_conn,
                                                                      database) -> None:
    """What the Spark job does first (``batch_schema``): the table's columns now, read from information_schema,
    which knows nothing of chunk_key_columns: the plan's chunk key and key index are kept."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE tags (id INT NOT NULL, tag VARCHAR(9) NOT NULL, UNIQUE KEY u_id (id))")
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    planned = load_table_schema(cdc_conn, TableId(database, "tags"), "tag")
    assert batch_schema(planned, config, Lake.at("/lake")) is planned
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE tags ADD COLUMN note TEXT")
    current = batch_schema(planned, config, Lake.at("/lake"))
    assert current.column_names == ("id", "tag", "note")
    assert (current.chunk_key, current.row_key, current.key_index) == ("tag", ("id",), "u_id")
