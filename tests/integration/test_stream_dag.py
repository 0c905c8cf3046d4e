"""End to end through the example DAG: snapshot + deferrable stream of a plain table and of a table
with every type of the type matrix, with writes during the snapshot and during the stream; the
lake's current state equals each table, through ``read_table`` and through the Spark views; a
second run after more writes skips the snapshot, streams on from the checkpoint, and equals again."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.example_dag import example_dag
from tests.integration.orders import OrdersWriter
from tests.integration.type_matrix import TypesWriter, create_types_table

SERVER_IDS = "5500-5515"  # this module's binlog reader ids (the ``connections`` fixture)


def spark_view_rows(base_uri: str, table: str) -> tuple[int, list[int]]:
    """The changelog's size and the current ids, through the Spark views of the lake."""
    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.lake import register_views

    # py4j says goodbye from a finalizer at interpreter exit, when pytest has closed its stream
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        view = register_views(spark, base_uri, [table])[table]
        changes = spark.sql(f"SELECT COUNT(*) FROM {view}_changes").collect()[0][0]
        return changes, [row.id for row in spark.sql(f"SELECT id FROM {view} ORDER BY id").collect()]
    finally:
        spark.stop()


def delta_reader_rows(base_uri: str, table: str, columns: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The current state's ``columns``, ordered by id, as three engines read it with nothing of ours:
    deltalake, DuckDB over the files the Delta log lists, and Polars' Delta reader."""
    import duckdb
    import polars as pl
    from deltalake import DeltaTable

    uri = table_uri(base_uri, table)
    delta = DeltaTable(uri)
    quoted = ", ".join(f'"{c}"' for c in columns)
    return {
        "deltalake": canonical_rows(delta.to_pyarrow_table(columns=columns).sort_by("id")),
        "duckdb": duckdb.connect().read_parquet(delta.file_uris()).project(quoted).order("id").fetchall(),
        "polars": canonical_rows(pl.read_delta(uri, columns=columns).sort("id").to_arrow()),
    }


def test_snapshot_then_stream_equals_the_table_twice(airflow_db, connections, mariadb_server, admin, cdc_conn,
                                                     database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_50000")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()
    create_types_table(admin)
    base_uri = str(tmp_path / "lake")
    tables = [f"{database}.orders", f"{database}.types"]
    # the stream hands every wait to the triggerer at once, so the deferral path runs while the writers write
    conf = {"tables": tables, "base_uri": base_uri, "rows_per_batch": 40_000, "stop_after_idle_seconds": 4,
            "defer_after_idle_seconds": 0}
    schemas = [load_table_schema(cdc_conn, TableId.parse(t)) for t in tables]

    def stream_started_a_while_ago() -> bool:
        checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
        return checkpoint is not None and checkpoint.seq >= 3

    # through the snapshot into the stream (or 3 minutes at most)
    writers = [OrdersWriter(mariadb_server, database, 180, 1, until=stream_started_a_while_ago),
               TypesWriter(mariadb_server, database, 180, 1, until=stream_started_a_while_ago)]
    for writer in writers:
        writer.start()
    run = example_dag().test(run_conf=conf)
    for writer in writers:
        writer.join()
    assert run.state == "success" and writers[0].count > 100 and writers[1].count > 20
    (stream,) = [ti for ti in run.get_task_instances() if ti.task_id == "stream"]
    summary = stream.xcom_pull(task_ids="stream")
    assert summary["rows"] > 0 and summary["stopped"] == "idle for 4 s" and summary["deferrals"] >= 1
    for table, schema in zip(tables, schemas, strict=True):
        assert canonical_rows(read_table(base_uri, table)) == table_rows(cdc_conn, schema), table
    # the stream merged its changes when it stopped: any Delta reader sees the table as it is
    orders = table_rows(cdc_conn, schemas[0])
    for engine, rows in delta_reader_rows(base_uri, tables[0], list(schemas[0].column_names)).items():
        assert rows == orders, f"{engine} reads another current state than the table's"

    # the next run: no snapshot left, the stream continues from the checkpoint
    seq = StreamStore(Lake.at(base_uri)).read_checkpoint().seq  # type: ignore[union-attr]
    OrdersWriter(mariadb_server, database, 2, seed=2).run()
    TypesWriter(mariadb_server, database, 2, seed=2).run()
    rerun = example_dag().test(run_conf=conf)
    assert rerun.state == "success"
    assert not [ti for ti in rerun.get_task_instances() if ti.task_id == "snapshot" and ti.state == "success"]
    assert StreamStore(Lake.at(base_uri)).read_checkpoint().seq > seq  # type: ignore[union-attr]
    for table, schema in zip(tables, schemas, strict=True):
        assert canonical_rows(read_table(base_uri, table)) == table_rows(cdc_conn, schema), table

    changes, ids = spark_view_rows(base_uri, tables[0])
    stream_changes = read_changes(base_uri, tables[0])
    assert changes == stream_changes.num_rows > 0
    assert min(stream_changes.column("_op_ts").to_pylist()) > 0  # the stream's only: snapshot rows are current
    assert ids == [row[0] for row in table_rows(cdc_conn, schemas[0])]

    # a third run after DDL on the source: the example DAG's stream follows it (schema_change_behavior
    # 'evolve', its default) and every Delta reader sees the source's new columns and values
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE orders RENAME COLUMN note TO remark")
        cur.execute("ALTER TABLE orders ADD COLUMN status VARCHAR(8) NOT NULL DEFAULT 'new'")
        cur.execute("UPDATE orders SET status = 'paid', remark = 'r' WHERE id BETWEEN 100 AND 120")
    renamed = load_table_schema(cdc_conn, TableId.parse(tables[0]))
    third = example_dag().test(run_conf=conf)
    assert third.state == "success"
    orders = table_rows(cdc_conn, renamed)
    assert canonical_rows(read_table(base_uri, tables[0])) == orders
    for engine, rows in delta_reader_rows(base_uri, tables[0], list(renamed.column_names)).items():
        assert rows == orders, f"{engine} reads another current state than the table's after its DDL"
    # the current table's own columns are the source's: no column left under its old name
    own = [f.name for f in DeltaTable(table_uri(base_uri, tables[0])).schema().fields if not f.name.startswith("_")]
    assert own == list(renamed.column_names)
    records = read_changes(base_uri, tables[0]).filter(pc.equal(pc.field("_op"), "!S"))
    assert records.column("_ddl").to_pylist() == [
        "ALTER TABLE orders RENAME COLUMN note TO remark",
        "ALTER TABLE orders ADD COLUMN status VARCHAR(8) NOT NULL DEFAULT 'new'",
    ]
