"""The quickstart job on the embedded defaults: a local MariaDB with the sample shop database.

It checks the source, discovers the shop tables, splits them into chunks and reads every chunk
with the watermarked chunk reader into Arrow, printing the plan and the figures. The server keeps
running afterwards (``python -m dev.mariadb stop --dir .local/mariadb`` stops it) so that a second
run reuses it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import discover_tables
from airflow_provider_mysqlcdc.cdc.source_checks import check_source
from airflow_provider_mysqlcdc.cdc.splitter import split_table
from dev import mariadb, sample_shop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path(".local/mariadb"), help="the server's data directory")
    parser.add_argument("--port", type=int, default=33061)
    parser.add_argument("--orders", type=int, default=300_000)
    parser.add_argument("--reload", action="store_true", help="recreate the shop database")
    args = parser.parse_args(argv)

    server = mariadb.running(args.dir.resolve())
    if server is None:
        print(f"==> starting MariaDB on port {args.port} (data in {args.dir})")
        server = mariadb.start(args.dir, args.port)
    admin = server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'shop'")
        (exists,) = cur.fetchone()
    if args.reload or not exists:
        print(f"==> loading the sample shop database ({args.orders} orders)")
        sample_shop.load(admin, orders=args.orders, customers=20_000, products=5_000)
    admin.close()

    config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
    conn = config.connect()
    info = check_source(conn, databases=["shop"])
    print(f"==> source ok: {info.flavor} {info.version_string}")
    for schema in discover_tables(conn, include_databases="shop"):
        started = time.perf_counter()
        chunks = split_table(conn, schema)
        took = time.perf_counter() - started
        print(f"{schema.id}: key {schema.chunk_key}, {len(chunks)} chunks in {took:.2f} s")
        for chunk in chunks[:2] + chunks[-1:] if len(chunks) > 3 else chunks:
            print(f"    {chunk.chunk_id}: [{chunk.start!r}, {chunk.end!r})")
        started, rows = time.perf_counter(), 0
        with ChunkReader(config, schema, server_id=config.server_id.allocate(0)) as reader:
            for done, snapshot in enumerate(reader.read(chunks), start=1):
                rows += snapshot.table.num_rows
                print(f"\r    read {done}/{len(chunks)} chunks, {rows:,} rows", end="", flush=True)
        took = time.perf_counter() - started
        print(f"\r    read {len(chunks)} chunks, {rows:,} rows in {took:.1f} s ({rows / took:,.0f} rows/s), "
              f"high watermark {snapshot.high_watermark}")
    print(f"==> MariaDB keeps running on port {server.port}; stop it with: "
          f".venv/bin/python -m dev.mariadb stop --dir {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
