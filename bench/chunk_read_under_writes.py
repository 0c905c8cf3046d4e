"""One chunk reader over a 2,000,000-row table while a writer commits: rows/s, and how many rows the
binlog fix-up changed. Baselines in the same run: the same rows by one plain SELECT, through pymysql
(unbuffered tuples) and through connectorx (Arrow), with no chunks, watermarks or conversion.

    .venv/bin/python -m bench.chunk_read_under_writes [--rows 2000000] [--chunk-size 8096]

Starts a throwaway MariaDB of its own and stops it afterwards.
"""

from __future__ import annotations

import multiprocessing
import random
import sys
import time
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

import pymysql.cursors

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from bench.common.server import bench_arguments, connectorx_select_rate, load_orders, throwaway_server
from dev import mariadb


def writer(server: mariadb.MariaDbServer, rows: int, stopping: Event, count: Synchronized) -> None:
    """Runs in its own process, so that it competes with the reader for the CPU but not for the GIL."""
    conn = server.admin_connect("bench")
    rnd = random.Random(3)
    with conn.cursor() as cur:
        while not stopping.is_set():
            cur.execute("BEGIN")
            for _ in range(5):
                key = rnd.randint(1, rows)
                cur.execute("UPDATE orders SET amount = amount + 1, updated = NOW(6) WHERE id = %s", (key,))
            cur.execute("COMMIT")
            count.value += 5
            time.sleep(0.002)


def _plain_pymysql(config: ConnectionConfig) -> float:
    conn = config.connect(cursorclass=pymysql.cursors.SSCursor)
    started = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute("SELECT * FROM bench.orders")
        rows = sum(len(batch) for batch in iter(lambda: cur.fetchmany(4096), ()))
    return rows / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv, port=33082)
    with throwaway_server(args.port) as server:
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            load_orders(cur, args.rows)
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        rates = {
            "plain pymysql SELECT (tuples)": _plain_pymysql(config),
            "plain connectorx SELECT (Arrow)": connectorx_select_rate(config),
        }
        control = config.connect()
        schema = load_table_schema(control, TableId("bench", "orders"))
        chunks = split_table(control, schema, args.chunk_size)
        stopping, count = multiprocessing.Event(), multiprocessing.Value("q", 0)
        process = multiprocessing.Process(target=writer, args=(server, args.rows, stopping, count), daemon=True)
        process.start()
        try:
            started = time.perf_counter()
            read = changed = with_binlog = 0
            with ChunkReader(config, schema, server_id=5450) as reader:
                for snap in reader.read(chunks):
                    read += snap.table.num_rows
                    changed += snap.changed_keys
                    with_binlog += snap.low_watermark != snap.high_watermark
            took = time.perf_counter() - started
        finally:
            stopping.set()
            process.join()
        rates["chunk reader: LW, SELECT, HW, fix-up"] = read / took
        for name, rate in rates.items():
            print(f"{name:40} {rate:>10,.0f} rows/s")
        print(f"{len(chunks)} chunks, {with_binlog} with a binlog window; the writer made {count.value:,} row updates "
              f"during the read; the fix-up changed {changed:,} rows")
        for name, rate in list(rates.items())[:2]:
            print(f"chunk reader / {name}: {rates['chunk reader: LW, SELECT, HW, fix-up'] / rate:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
