"""How long the split task's planning takes for a database of many small tables (issue 27): the first
split (discovery, checks, chunks, plans written) and a second one (every plan read back from the lake),
and how many mapped snapshot tasks and server ids the run needs.

    .venv/bin/python -m bench.many_tables_split [--tables 1000] [--rows 200]

Starts a throwaway MariaDB of its own and stops it afterwards; the lake is a temporary local folder.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.server_id import ServerIdRange
from airflow_provider_mysqlcdc.engine.snapshot_plan import plan_snapshot
from airflow_provider_mysqlcdc.engine.split_options import SplitOptions
from bench.server import throwaway_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=200, help="rows per table")
    parser.add_argument("--port", type=int, default=33091)
    args = parser.parse_args(argv)
    with throwaway_server(args.port) as server:
        admin = server.admin_connect("bench")
        started = time.perf_counter()
        with admin.cursor() as cur:
            cur.execute("USE bench")
            for n in range(args.tables):
                cur.execute(f"CREATE TABLE t{n:05d} (id INT PRIMARY KEY, v VARCHAR(20), w DECIMAL(10,2))")
                cur.execute(f"INSERT INTO t{n:05d} SELECT seq, CONCAT('v', seq), seq / 10 FROM seq_1_to_{args.rows}")
            cur.execute("ANALYZE TABLE " + ", ".join(f"t{n:05d}" for n in range(args.tables)))
            cur.fetchall()
        print(f"made {args.tables:,} tables of {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port,
                                  server_id=ServerIdRange.parse("5400-9999"))
        log = logging.getLogger("bench")
        with tempfile.TemporaryDirectory(prefix="bench-lake-") as lake:
            options = SplitOptions(base_uri=lake, include_databases="bench")
            for run in ("first split", "second split"):
                started = time.perf_counter()
                jobs = plan_snapshot(config, options, "bench", log)
                seconds = time.perf_counter() - started
                print(f"{run}: {seconds:.2f} s, {len(jobs)} mapped snapshot tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
