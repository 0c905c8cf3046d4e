"""How long splitting a 2,000,000-row table takes: even split (dense integer key) against the index
walk of the uneven split (sparse key, the baseline every key type can fall back to), in one run.

    .venv/bin/python -m bench.even_split_vs_index_walk [--rows 2000000] [--chunk-size 8096]

Starts a throwaway MariaDB of its own and stops it afterwards.
"""

from __future__ import annotations

import sys
import time

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from bench.common.server import bench_arguments, throwaway_server


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv, port=33081)
    with throwaway_server(args.port) as server:
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            cur.execute("USE bench")
            started = time.perf_counter()
            cur.execute("CREATE TABLE dense (id BIGINT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO dense SELECT seq, seq FROM seq_1_to_{args.rows}")
            cur.execute("CREATE TABLE sparse (id BIGINT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO sparse SELECT seq * 5000, seq FROM seq_1_to_{args.rows}")
            cur.execute("ANALYZE TABLE dense, sparse")
            cur.fetchall()
            print(f"loaded 2 x {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        conn = server.cdc_connect("bench")
        results = {}
        for table in ("dense", "sparse"):
            schema = load_table_schema(conn, TableId("bench", table))
            started = time.perf_counter()
            chunks = split_table(conn, schema, args.chunk_size)
            results[table] = time.perf_counter() - started
            print(f"{table:6}: {len(chunks):5} chunks in {results[table]:.3f} s")
        print(f"uneven (index walk) / even split time: {results['sparse'] / results['dense']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
