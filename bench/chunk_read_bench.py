"""One chunk reader over a 2,000,000-row table while a writer commits: rows/s, and how many rows the
binlog fix-up changed. Baseline in the same run: the same rows by one plain pymysql SELECT
(unbuffered, no conversion, no watermarks).

    .venv/bin/python -m bench.chunk_read_bench [--rows 2000000] [--chunk-size 8096]

Starts a throwaway MariaDB of its own and stops it afterwards.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import pymysql.cursors

from airflow_provider_mysqlcdc.cdc.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.splitter import split_table
from dev import mariadb

TABLE = """CREATE TABLE bench.orders (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, sku VARCHAR(64) NOT NULL,
    amount DECIMAL(12,2) NOT NULL, created DATETIME(3) NOT NULL, updated TIMESTAMP(6) NOT NULL, note TEXT NULL)"""
LOAD = """INSERT INTO bench.orders (customer, sku, amount, created, updated, note)
    SELECT seq % 50000, CONCAT('SKU-', LPAD(seq % 9973, 8, '0'), '-', MD5(seq)), (seq % 100000) / 100,
           '2024-01-01' + INTERVAL seq SECOND, '2024-01-01' + INTERVAL seq SECOND,
           IF(seq % 3 = 0, NULL, CONCAT('note for order ', seq, ' ', REPEAT('x', seq % 40)))
    FROM seq_1_to_{rows}"""


def writer(server: mariadb.MariaDbServer, rows: int, stopping: threading.Event, counts: list[int]) -> None:
    conn = server.admin_connect("bench")
    rnd = random.Random(3)
    with conn.cursor() as cur:
        while not stopping.is_set():
            cur.execute("BEGIN")
            for _ in range(5):
                key = rnd.randint(1, rows)
                cur.execute("UPDATE orders SET amount = amount + 1, updated = NOW(6) WHERE id = %s", (key,))
            cur.execute("COMMIT")
            counts[0] += 5
            time.sleep(0.002)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--port", type=int, default=33082)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chunk-bench-") as base:
        server = mariadb.start(Path(base), args.port)
        try:
            admin = server.admin_connect()
            with admin.cursor() as cur:
                cur.execute("CREATE DATABASE bench")
                cur.execute(TABLE)
                cur.execute("USE bench")
                cur.execute(LOAD.format(rows=args.rows))
                cur.execute("ANALYZE TABLE bench.orders")
                cur.fetchall()
            config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)

            plain = config.connect(cursorclass=pymysql.cursors.SSCursor)
            started = time.perf_counter()
            with plain.cursor() as cur:
                cur.execute("SELECT * FROM bench.orders")
                baseline_rows = sum(len(batch) for batch in iter(lambda: cur.fetchmany(4096), ()))
            baseline = baseline_rows / (time.perf_counter() - started)
            print(f"baseline: plain pymysql SELECT     {baseline_rows:>9,} rows  {baseline:>9,.0f} rows/s")

            schema = load_table_schema(plain, TableId("bench", "orders"))
            chunks = split_table(plain, schema, args.chunk_size)
            stopping, counts = threading.Event(), [0]
            thread = threading.Thread(target=writer, args=(server, args.rows, stopping, counts), daemon=True)
            thread.start()
            started = time.perf_counter()
            read = changed = with_binlog = 0
            with ChunkReader(config, schema, server_id=5450) as reader:
                for snap in reader.read(chunks):
                    read += len(snap.rows)
                    changed += snap.changed_keys
                    with_binlog += snap.low_watermark != snap.high_watermark
            took = time.perf_counter() - started
            stopping.set()
            thread.join()
            rate = read / took
            print(f"chunk reader (LW, SELECT, HW, fix-up) {read:>9,} rows  {rate:>9,.0f} rows/s  "
                  f"({len(chunks)} chunks, {with_binlog} with a binlog window)")
            print(f"writer: {counts[0]:,} row updates during the read; fix-up changed {changed:,} rows")
            print(f"chunk reader / plain SELECT: {rate / baseline:.2f}x")
        finally:
            mariadb.stop(Path(base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
