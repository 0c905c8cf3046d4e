"""A throwaway MariaDB per run (stopped however the run ends), the benchmarks' tables and the writes they
measure, and the options of the benchmarks on a server."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dev import mariadb

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig


@contextlib.contextmanager
def throwaway_server(port: int, extra_args: Sequence[str] = ()) -> Iterator[mariadb.MariaDbServer]:
    """A server (``extra_args``: more ``mariadbd`` options) with an empty database ``bench``."""
    with tempfile.TemporaryDirectory(prefix="bench-mariadb-") as base:
        server = mariadb.start(Path(base), port, extra_args=extra_args)
        try:
            with server.admin_connect().cursor() as cur:
                cur.execute("CREATE DATABASE bench")
            yield server
        finally:
            mariadb.stop(Path(base))


def bench_arguments(
    description: str | None, argv: list[str] | None, port: int, rows_per_batch: bool = False, events: bool = False
) -> argparse.Namespace:
    """The options every benchmark takes: table size, chunk size, and the throwaway server's port."""
    from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--port", type=int, default=port)
    if rows_per_batch:
        parser.add_argument("--rows-per-batch", type=int, default=SplitOptions.rows_per_batch)
    if events:
        parser.add_argument("--events", type=int, default=1_000_000, help="row events to stream")
    return parser.parse_args(argv)


TABLE = """CREATE TABLE bench.{table} (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, sku VARCHAR(64) NOT NULL,
    amount DECIMAL(12,2) NOT NULL, created DATETIME(3) NOT NULL, updated TIMESTAMP(6) NOT NULL, note TEXT NULL)"""
LOAD = """INSERT INTO bench.{table} (customer, sku, amount, created, updated, note)
    SELECT seq % 50000, CONCAT('SKU-', LPAD(seq % 9973, 8, '0'), '-', MD5(seq)), (seq % 100000) / 100,
           '2024-01-01' + INTERVAL seq SECOND, '2024-01-01' + INTERVAL seq SECOND,
           IF(seq % 3 = 0, NULL, CONCAT('note for order ', seq, ' ', REPEAT('x', seq % 40)))
    FROM seq_1_to_{rows}"""


TABLE_ANYWHERE = TABLE.replace("bench.{table}", "{table}")
"""The benchmark's table, in any database (``{table}`` a qualified name: a database of many tables)."""
LOAD_ANYWHERE = """INSERT INTO {table} (customer, sku, amount, created, updated, note)
    SELECT seq % 50000, CONCAT('SKU-', MD5(seq)), (seq % 100000) / 100, '2024-01-01' + INTERVAL seq SECOND,
           '2024-01-01' + INTERVAL seq SECOND, IF(seq % 3 = 0, NULL, CONCAT('note ', seq))
    FROM seq_1_to_{rows}"""
"""``{rows}`` rows of it, shorter SKUs and notes than ``LOAD``'s."""


def load_orders(cur: Any, rows: int, table: str = "orders") -> None:
    """``bench.<table>``: ``rows`` rows of about 160 bytes (the table of every benchmark of the snapshot)."""
    cur.execute(TABLE.format(table=table))
    cur.execute("USE bench")
    cur.execute(LOAD.format(rows=rows, table=table))
    cur.execute(f"ANALYZE TABLE bench.{table}")
    cur.fetchall()


def raw_replication_rows(config: Any, start: Any, server_id: int) -> int:
    """The baseline of the binlog benchmarks: row events mysql-replication decodes (its ``rows``
    property) from ``start`` to the binlog's end."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(connection_settings=config.replication_settings(), server_id=server_id,
                                log_file=start.file, log_pos=start.position, resume_stream=True, blocking=False,
                                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    rows = sum(len(event.rows) for event in stream)
    stream.close()
    return rows


def connectorx_select_rate(config: Any) -> float:
    """Rows/s of one connectorx SELECT of ``bench.orders`` into Arrow: no chunks, watermarks or conversion."""
    import time

    import connectorx

    from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import connectorx_url

    started = time.perf_counter()
    table = connectorx.read_sql(connectorx_url(config, "bench"), "SELECT * FROM bench.orders", return_type="arrow")
    return float(table.num_rows / (time.perf_counter() - started))


def many_tables_arguments(description: str | None, argv: list[str] | None, tables: int, rows: int,
                          port: int) -> argparse.Namespace:
    """The options of the benchmarks of a database of many small tables: how many, their rows, the port."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tables", type=int, default=tables)
    parser.add_argument("--rows", type=int, default=rows, help="rows per table")
    parser.add_argument("--port", type=int, default=port)
    return parser.parse_args(argv)


def load_small_tables(cur: Any, tables: int, rows: int) -> list[TableId]:
    """``bench.t00000`` ... : ``tables`` tables of ``rows`` small rows each (a database of many tables), analyzed."""
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId

    names = [f"t{n:05d}" for n in range(tables)]
    for name in names:
        cur.execute(f"CREATE TABLE bench.{name} (id INT PRIMARY KEY, v VARCHAR(20), w DECIMAL(10,2))")
        cur.execute(f"INSERT INTO bench.{name} SELECT seq, CONCAT('v', seq), seq / 10 FROM seq_1_to_{rows}")
    cur.execute("ANALYZE TABLE " + ", ".join(f"bench.{name}" for name in names))
    cur.fetchall()
    return [TableId("bench", name) for name in names]


@contextlib.contextmanager
def small_tables_database(args: argparse.Namespace) -> Iterator[
        tuple[mariadb.MariaDbServer, list[TableId], ConnectionConfig, str]]:
    """A throwaway server holding ``args.tables`` tables of ``args.rows`` rows (``load_small_tables``; options of
    ``many_tables_arguments``), the CDC user's connection settings and a temporary folder for the lake."""
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig

    with throwaway_server(args.port) as server, tempfile.TemporaryDirectory(prefix="bench-lake-") as folder:
        with server.admin_connect("bench").cursor() as cur:
            tables = load_small_tables(cur, args.tables, args.rows)
        yield server, tables, ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port), folder


TRANSACTION_ROWS = 10_000


def write_events(server: Any, table: str, rows: int, events: int) -> int:
    """Row events in 10,000-row transactions: of every ten, eight update rows of ``1..rows``, one
    inserts new rows and one deletes the rows inserted before. Returns the row events written."""
    written, transaction, inserted = 0, 0, 0
    with server.admin_connect("bench").cursor() as cur:
        while written < events:
            kind, low = transaction % 10, (transaction * TRANSACTION_ROWS) % rows
            if kind == 8:
                inserted = 100_000_000 + transaction * TRANSACTION_ROWS
                cur.execute(f"INSERT INTO {table} (id, customer, sku, amount, created, updated, note) "
                            f"SELECT id + %s, customer, sku, amount, created, updated, note FROM {table} "
                            f"WHERE id BETWEEN 1 AND %s", (inserted, TRANSACTION_ROWS))
            elif kind == 9 and inserted:
                cur.execute(f"DELETE FROM {table} WHERE id > %s", (inserted,))
            else:
                cur.execute(f"UPDATE {table} SET amount = amount + 1, updated = NOW(6) WHERE id > %s AND id <= %s",
                            (low, low + TRANSACTION_ROWS))
            written += cur.rowcount
            transaction += 1
    return written
