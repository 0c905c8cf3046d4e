"""Where a snapshot job of many small tables spends its time without Spark's start (issue 27): its chunks
read by one task (``write_batches``, as a job's task reads its share), and its batches
committed, each its own Delta transaction replacing its partition, then its manifest
(``spark.snapshot_job.commit_job``): one table at a time against ``COMMIT_THREADS`` at once, alternating, each
into a new lake, the first commit (creating each table) and a second one (replacing its partition) timed.

    .venv/bin/python -m bench.snapshot_job_many_tables [--tables 200] [--rows 300]

Starts a throwaway MariaDB of its own and stops it afterwards; the lake is a temporary local folder.
"""

from __future__ import annotations

import sys
import time
import uuid

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schemas
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import BatchChunks, write_batches
from airflow_provider_mysqlcdc.lake.documents.snapshot import ChunkResult, Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.spark.application import JobBatch, SparkApplication
from airflow_provider_mysqlcdc.spark.snapshot_job import COMMIT_THREADS, commit_job
from bench.common.server import many_tables_arguments, small_tables_database


def main(argv: list[str] | None = None) -> int:
    args = many_tables_arguments(__doc__, argv, tables=200, rows=300, port=33092)
    with small_tables_database(args) as (_server, tables, config, folder):
        control = config.connect()
        try:
            schemas = load_table_schemas(control, tables)
            plans = [Plan(schemas[t], chunks, group_batches(t, chunks, len(chunks)))
                     for t in tables for chunks in [split_table(control, schemas[t])]]
        finally:
            control.close()
        for round_, threads in enumerate((1, COMMIT_THREADS, 1, COMMIT_THREADS)):
            lake = Lake.at(f"{folder}/lake-{round_}")
            store = SnapshotStore(lake)
            store.write_plans(plans)
            batches = [JobBatch(p.batches[0], p, p.schema) for p in plans]
            pack = Job(tuple(jb.batch for jb in batches), (args.rows,) * len(plans))
            job = SparkApplication("snapshot", lake, pack, tuple(batches), 1, config)

            def read(store: SnapshotStore = store, batches: list[JobBatch] = batches) -> tuple[
                    str, list[ChunkResult], float]:
                """The job's chunks read by one task into files of a new attempt."""
                attempt = uuid.uuid4().hex[:12]
                started = time.perf_counter()
                records = list(write_batches(store, attempt, 0, config, [
                    BatchChunks(jb.batch, jb.schema, jb.plan.chunks_of(jb.batch)) for jb in batches],
                    config.server_id.start))
                return attempt, records, time.perf_counter() - started

            for kind in ("first (creates each table)", "again (replaces a partition)"):
                attempt, records, reading = read()
                started = time.perf_counter()
                manifests = commit_job(job, attempt, records, reading, threads)
                took = time.perf_counter() - started
                assert len(manifests) == args.tables
                print(f"{threads} table(s) at once, commit {kind} of {args.tables} batches: {took:.2f} s, "
                      f"{1000 * took / args.tables:.1f} ms a batch; reading them {reading:.2f} s, "
                      f"{1000 * reading / args.tables:.1f} ms a table", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
