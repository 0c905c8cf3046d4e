"""Reads as of a source position equal the source's state at that position (issue 19, test c).

A writer commits multi-row transactions (inserts, updates, deletes, delete + re-insert) the whole time.
While it runs, the test captures the source's state at known offsets: ``START TRANSACTION WITH CONSISTENT
SNAPSHOT`` on MariaDB freezes the binlog offset of the snapshot (``binlog_snapshot_file/position``) and
its GTID position, and a SELECT in that transaction is the table exactly there, whatever commits
meanwhile. The replica is snapshotted and streamed (some changes merged into the current table, later
ones not), then read as of each captured offset, and as of each captured GTID position through
``resolve_as_of``: each equals the captured state. Positions before the snapshot finished are refused.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.as_of import resolve_as_of
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_snapshot_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import AsOfError
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from tests import replica
from tests.airflow_connections import config_of
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.orders import OrdersWriter, create_orders


def capture(server: Any, database: str, schema: TableSchema) -> tuple[BinlogOffset, list[tuple[Any, ...]]]:
    """The table's rows and the binlog offset (with its GTID position) of one consistent snapshot."""
    conn = server.admin_connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        offset = read_snapshot_offset(conn, with_gtid=True)
        rows = table_rows(conn, schema)
        with conn.cursor() as cur:
            cur.execute("COMMIT")
        return offset, rows
    finally:
        conn.close()


def test_as_of_reads_equal_the_source_at_captured_positions(mariadb_server, admin, cdc_conn, database,
                                                            tmp_path) -> None:
    create_orders(admin)
    table = f"{database}.orders"
    schema = load_table_schema(cdc_conn, TableId(database, "orders"))
    config, base_uri = config_of(mariadb_server), str(tmp_path / "lake")
    writer = OrdersWriter(mariadb_server, database, seconds=3_600, seed=19)
    writer.start()
    try:
        before_snapshot = capture(mariadb_server, database, schema)
        replica.snapshot(config, base_uri, table, chunk_size=500, chunks_per_batch=4)
        captured = []
        for _ in range(3):
            time.sleep(0.3)
            captured.append(capture(mariadb_server, database, schema))
        replica.stream(config, base_uri, [table], merge=True)  # these changes are merged ...
        for _ in range(3):
            time.sleep(0.3)
            captured.append(capture(mariadb_server, database, schema))
    finally:
        writer.until = lambda: True
        writer.join(30)
    assert writer.count > 50
    replica.stream(config, base_uri, [table], merge=False)  # ... and these are in the changelog only

    for offset, rows in captured:
        assert canonical_rows(read_table(base_uri, table, as_of=offset)) == rows, offset
        at_file_position = f"{offset.file}:{offset.position}"
        assert canonical_rows(read_table(base_uri, table, as_of=at_file_position)) == rows, at_file_position
    # a GTID position names the same point: resolved on the server to the next transaction's start
    for offset, rows in (captured[0], captured[-1]):
        assert offset.gtid
        resolved = resolve_as_of(offset.gtid, config, server_id=5601)
        assert canonical_rows(read_table(base_uri, table, as_of=resolved.offset)) == rows, offset.gtid
    assert len({tuple(map(tuple, rows)) for _, rows in captured}) == len(captured)  # the states differ

    with pytest.raises(AsOfError, match="before the snapshot finished"):
        read_table(base_uri, table, as_of=before_snapshot[0])


def test_spark_views_as_of_equal_read_table_as_of(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark view of a table as of an offset (a window per key) reads what read_table(as_of=...) reads,
    at every position of the unit tests' lake (changes merged up to batch 1, batch 2 not)."""
    import logging

    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.lake import register_views
    from tests.as_of_history import EXPECTED, merge, snapshot, stream
    from tests.lakes import Lakes, rows_of

    lake = Lakes(str(tmp_path / "lake"), monkeypatch)
    snapshot(lake)
    stream(lake)
    merge(lake, 1)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        for point, expected in EXPECTED:
            if isinstance(point, int | dt.datetime):
                with pytest.raises(AsOfError, match="views take as_of as a binlog offset"):
                    register_views(spark, lake.base_uri, ["shop.orders"], as_of=point)
                continue
            view = register_views(spark, lake.base_uri, ["shop.orders"], as_of=point)["shop.orders"]
            rows = [tuple(r) for r in spark.sql(f"SELECT id, name, qty FROM {view} ORDER BY id").collect()]
            assert rows == expected == rows_of(read_table(lake.base_uri, "shop.orders", as_of=point)), point
        with pytest.raises(AsOfError, match="before the snapshot"):
            register_views(spark, lake.base_uri, ["shop.orders"], as_of="mysql-bin.000001:150")
    finally:
        spark.stop()


def test_resolve_as_of_a_time_finds_the_first_transaction_committed_after_it(mariadb_server, admin) -> None:
    """Commit times have second resolution: a quiet second on each side of the time makes it exact."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS moments (id INT AUTO_INCREMENT PRIMARY KEY)")
        cur.execute("INSERT INTO moments VALUES ()")
    time.sleep(1.2)
    with admin.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, position = cur.fetchone()[:2]
    moment = int(time.time() * 1000)
    time.sleep(1.2)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO moments VALUES ()")
    resolved = resolve_as_of(moment, config_of(mariadb_server), server_id=5602).offset
    assert resolved is not None and (resolved.file, resolved.position) == (file, position)
