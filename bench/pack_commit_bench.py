"""How long a snapshot job of many small tables spends committing its batches (issue 27): each batch is
its own Delta transaction replacing its partition, then its manifest (``spark.snapshot_job.commit_pack``),
one after another against ``COMMIT_THREADS`` at once, in the same run on the same files. Also the
reading side without Spark: the job's chunks read by one task, table after table (one chunk reader a
table), which is what a pack's task does.

    .venv/bin/python -m bench.pack_commit_bench [--tables 200] [--rows 300]

Starts a throwaway MariaDB of its own and stops it afterwards; the lake is a temporary local folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.splitter import split_table
from airflow_provider_mysqlcdc.engine.batch_packs import BatchPack
from airflow_provider_mysqlcdc.engine.snapshot_batch import write_chunks
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.snapshot import ChunkResult, Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.spark.application import JobBatch, SparkApplication
from airflow_provider_mysqlcdc.spark.snapshot_job import COMMIT_THREADS, commit_pack
from bench.server import throwaway_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--rows", type=int, default=300, help="rows per table")
    parser.add_argument("--port", type=int, default=33092)
    args = parser.parse_args(argv)
    with throwaway_server(args.port) as server, tempfile.TemporaryDirectory(prefix="bench-lake-") as folder:
        with server.admin_connect("bench").cursor() as cur:
            for n in range(args.tables):
                cur.execute(f"CREATE TABLE bench.t{n:05d} (id INT PRIMARY KEY, v VARCHAR(20), w DECIMAL(10,2))")
                cur.execute(f"INSERT INTO bench.t{n:05d} SELECT seq, CONCAT('v', seq), seq / 10 "
                            f"FROM seq_1_to_{args.rows}")
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        tables = [TableId("bench", f"t{n:05d}") for n in range(args.tables)]
        control = config.connect()
        try:
            schemas = load_table_schemas(control, tables)
            plans = [Plan(schemas[t], chunks, group_batches(t, chunks, len(chunks)))
                     for t in tables for chunks in [split_table(control, schemas[t])]]
        finally:
            control.close()
        lake = Lake.at(folder)
        store = SnapshotStore(lake)
        store.write_plans(plans)
        batches = [JobBatch(p.batches[0], p, p.schema) for p in plans]
        pack = BatchPack(tuple(jb.batch for jb in batches), (args.rows,) * len(plans))
        job = SparkApplication("snapshot", lake, pack, tuple(batches), 1, config)

        def read() -> tuple[str, list[ChunkResult], float]:
            """The job's chunks read by one task, table after table, into files of a new attempt."""
            attempt = uuid.uuid4().hex[:12]
            started = time.perf_counter()
            records = [r for jb in batches for r in write_chunks(store, jb.batch, attempt, 0, config, jb.schema,
                                                                  jb.plan.chunks_of(jb.batch), config.server_id.start)]
            return attempt, records, time.perf_counter() - started

        attempt, records, reading = read()
        print(f"one task reads {args.tables} tables ({sum(r.rows for r in records):,} rows), a chunk reader a "
              f"table: {reading:.2f} s, {1000 * reading / args.tables:.1f} ms a table")
        commit_pack(job, attempt, records, reading)  # the tables' first commits create them: not timed
        seconds: dict[int, float] = {}
        for threads in (1, COMMIT_THREADS, 1, COMMIT_THREADS):  # each twice, alternating, each on new files
            attempt, records, reading = read()
            started = time.perf_counter()
            manifests = commit_pack(job, attempt, records, reading, threads=threads)
            took = time.perf_counter() - started
            assert len(manifests) == args.tables
            seconds[threads] = min(seconds.get(threads, took), took)
            print(f"commit of {args.tables} batches, {threads} at once: {took:.2f} s")
        print(f"best of two: one at a time {seconds[1]:.2f} s, {COMMIT_THREADS} at once "
              f"{seconds[COMMIT_THREADS]:.2f} s ({seconds[1] / seconds[COMMIT_THREADS]:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
