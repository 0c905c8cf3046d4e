"""Verification throughput against the snapshot's, on the same table in the same run.

    .venv/bin/python -m bench.verify_vs_snapshot [--rows 1000000] [--chunk-size 8096] [--repeat 3]

Starts a throwaway MariaDB of its own. The table (``bench.common.server.load_orders``) is snapshotted without
Spark, batch by batch, each batch's chunks in two contiguous parts one after the other (what its Spark
job's two tasks do in parallel): ``write_chunks`` then ``commit_batch``. The stream then catches up and
merges, and each batch is verified the same way (``verify_batch_locally``: two parts, each reading its
chunks from the source as the snapshot does, then the replica as of each chunk's high watermark, then
comparing). Snapshot and verification alternate ``--repeat`` times (each snapshot into a fresh lake);
rows/s are medians. Spark's start (~10-30 s a job) is the same for both and left out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.engine.verification.verify import verify_batch_locally
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake
from bench.common.plain_replica import PARTS, catch_up, snapshot
from bench.common.server import load_orders, throwaway_server


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--chunks-per-batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=33087)
    return parser.parse_args(argv)


def verify(config: ConnectionConfig, plan: Plan, base_uri: str, run: str) -> tuple[float, int, bool]:
    """Every batch verified; the seconds, the rows compared, and whether all were equal."""
    started, rows, equal = time.perf_counter(), 0, True
    for batch in plan.batches:
        report = verify_batch_locally(Lake.at(base_uri), config, batch, run, PARTS,
                                      wait_seconds=30)
        rows += report.rows
        equal = equal and report.equal
    return time.perf_counter() - started, rows, equal


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    with throwaway_server(args.port) as server, tempfile.TemporaryDirectory(prefix="verify-bench-") as lakes:
        with server.admin_connect("bench").cursor() as cur:
            load_orders(cur, args.rows)
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        control = config.connect()
        schema = load_table_schema(control, TableId("bench", "orders"))
        chunks = split_table(control, schema, args.chunk_size)
        control.close()
        plan = Plan(schema, chunks, group_batches(schema.id, chunks, args.chunks_per_batch))
        snapshot_rates, verify_rates = [], []
        for round_ in range(args.repeat):
            base_uri = f"{lakes}/lake-{round_}"
            seconds = snapshot(config, plan, base_uri)
            snapshot_rates.append(args.rows / seconds)
            catch_up(config, StreamOptions(base_uri, (schema.id,), writer="bench"))
            seconds, rows, equal = verify(config, plan, base_uri, f"bench-{round_}")
            if not equal or rows != args.rows:
                print(f"verification found differences or {rows} rows instead of {args.rows}", file=sys.stderr)
                return 1
            verify_rates.append(rows / seconds)
            print(f"round {round_ + 1}: snapshot {snapshot_rates[-1]:,.0f} rows/s, verify {verify_rates[-1]:,.0f} "
                  f"rows/s", flush=True)
        snap, ver = statistics.median(snapshot_rates), statistics.median(verify_rates)
        print(f"{args.rows:,} rows, {len(chunks)} chunks in {len(plan.batches)} batches, {PARTS} parts each; "
              f"medians of {args.repeat} rounds")
        print(f"snapshot (write_chunks + commit_batch)  {snap:>10,.0f} rows/s  per round: "
              f"{', '.join(f'{r:,.0f}' for r in snapshot_rates)}")
        print(f"verify (verify_batch_locally)           {ver:>10,.0f} rows/s  per round: "
              f"{', '.join(f'{r:,.0f}' for r in verify_rates)}")
        print(f"verify / snapshot: {ver / snap:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
