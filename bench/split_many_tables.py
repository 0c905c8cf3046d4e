"""How long the split task's planning takes for a database of many small tables (issue 27): the first
split (discovery, checks, chunks, plans written) and a second one (every plan read back from the lake),
and how many mapped snapshot tasks and server ids the run needs. In the same run, the baseline of the
discovery: the tables' schemas and row estimates read table by table (two queries and one a table, as
the split did before) against the bulk pass the split makes now.

    .venv/bin/python -m bench.split_many_tables [--tables 1000] [--rows 200]

Starts a throwaway MariaDB of its own and stops it afterwards; the lake is a temporary local folder.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time

from airflow_provider_mysqlcdc.cdc.schema.discovery import approximate_rows, load_table_schema, load_table_schemas
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_plan import plan_snapshot
from bench.common.server import load_small_tables, many_tables_arguments, throwaway_server


def main(argv: list[str] | None = None) -> int:
    args = many_tables_arguments(__doc__, argv, tables=1000, rows=200, port=33091)
    with throwaway_server(args.port) as server:
        started = time.perf_counter()
        with server.admin_connect("bench").cursor() as cur:
            tables = load_small_tables(cur, args.tables, args.rows)
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
                readers = sum(j.readers or 0 for j in jobs)
                print(f"{run}: {seconds:.2f} s, {len(jobs)} mapped snapshot tasks, {readers} binlog readers "
                      f"(+1 for the stream) for {sum(len(j.batches) for j in jobs)} batches")
        conn = config.connect()
        try:
            started = time.perf_counter()
            for table in tables:
                schema = load_table_schema(conn, table)
                split_table(conn, schema)  # reads the table's row estimate itself
            one_by_one = time.perf_counter() - started
            started = time.perf_counter()
            schemas = load_table_schemas(conn, tables)
            estimates = approximate_rows(conn, tables)
            for table in tables:
                split_table(conn, schemas[table], approximate_rows=estimates[table])
            bulk = time.perf_counter() - started
        finally:
            conn.close()
        print(f"discovery and split of {args.tables:,} tables: table by table {one_by_one:.2f} s, in bulk "
              f"{bulk:.2f} s ({one_by_one / bulk:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
