"""The PySpark application the verify operator submits: verify one batch of a table's chunks.

Executors verify their contiguous share of the batch's chunks (``engine.verify.verify_chunks``: the
source's chunks read as the snapshot reads them, the stream awaited past their high watermarks, the
replica read as of them) and return one verdict per chunk; the driver writes the batch's report into
the lake (``<db>/<table>/verify/<run>/batch=<n>.json``), which the operator returns and the summary
task combines. Differences do not fail the job: the summary decides. Arguments and the password are
the snapshot job's (``spark.snapshot_job.parse_args``: the password from an environment variable of
the driver, handed to the tasks in their closure), plus the run's name and how long to wait for the
stream.

    spark-submit verify_job.py --run <run> --base-uri /lake --batch '{"table": "shop.orders", ...}' \\
        --connection '{"host": ..., "user": ...}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from airflow_provider_mysqlcdc.spark import snapshot_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--run", required=True, help="the verification run's name (its report's file name)")
    own.add_argument("--wait-seconds", type=float, required=True,
                     help="how long a task waits for the stream to commit past its chunks' high watermarks")
    mine, rest = own.parse_known_args(argv)
    return argparse.Namespace(**vars(snapshot_job.parse_args(rest)), **vars(mine))


def verify_partition(
    index: int,
    chunk_dicts: Iterable[dict[str, Any]],
    *,
    base_uri: str,
    batch_dict: dict[str, Any],
    schema_dict: dict[str, Any],
    config_dict: dict[str, Any],
    password: str,
    wait_seconds: float,
) -> Iterator[dict[str, Any]]:
    """Runs on an executor: this partition's chunks, one verdict (``ChunkVerdict.to_dict``) each."""
    from airflow_provider_mysqlcdc.cdc.chunks import Chunk
    from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.cdc.schema import TableSchema
    from airflow_provider_mysqlcdc.engine.verify import verify_chunks
    from airflow_provider_mysqlcdc.exceptions import VerifyError
    from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore

    config = ConnectionConfig.from_dict(config_dict, password)
    batch = Batch.from_dict(batch_dict)
    plan = SnapshotStore(base_uri).read_plan(batch.table)
    if plan is None:
        raise VerifyError(f"no snapshot plan for {batch.table} under {base_uri} (seen from an executor)")
    for verdict in verify_chunks(base_uri, config, TableSchema.from_dict(schema_dict), plan.chunks, batch,
                                 [Chunk.from_dict(c) for c in chunk_dicts], batch.server_id(config.server_id, index),
                                 wait_seconds):
        yield verdict.to_dict()


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.engine.snapshot_batch import batch_schema
    from airflow_provider_mysqlcdc.engine.verify import ChunkVerdict, VerifyReport, VerifyStore
    from airflow_provider_mysqlcdc.exceptions import MySqlCdcError
    from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore
    from airflow_provider_mysqlcdc.spark.job_checks import speculation_refusal

    args = parse_args(argv)
    batch = Batch.from_dict(json.loads(args.batch))
    config = json.loads(args.connection)
    password = os.environ.get(args.password_env, "")
    try:
        partitions = batch.spark_tasks(args.partitions)
        plan = SnapshotStore(args.base_uri).read_plan(batch.table)
        if plan is None:
            print(f"verify: no snapshot plan for {batch.table} under {args.base_uri}: snapshot it first",
                  file=sys.stderr)
            return 2
        schema = batch_schema(plan.schema, ConnectionConfig.from_dict(config, password), args.base_uri)
    except MySqlCdcError as error:
        print(f"verify: {error}", file=sys.stderr)
        return 2
    chunks = plan.chunks_of(batch)
    spark = SparkSession.builder.appName(f"mysql-cdc verify {batch.label}").getOrCreate()
    refusal = speculation_refusal(spark, "verify")
    if refusal:
        print(refusal, file=sys.stderr)
        spark.stop()
        return 4
    print(f"verify: {batch.label}: {len(chunks)} chunks in {partitions} tasks, run {args.run}", flush=True)
    settings = {
        "base_uri": args.base_uri, "batch_dict": batch.to_dict(), "schema_dict": schema.to_dict(),
        "config_dict": config, "password": password,  # in the pickled closure only
        "wait_seconds": args.wait_seconds,
    }
    started = time.monotonic()
    verdicts = (
        spark.sparkContext.parallelize([c.to_dict() for c in chunks], partitions)
        .mapPartitionsWithIndex(lambda index, items: verify_partition(index, items, **settings))
        .collect()
    )
    seconds = time.monotonic() - started
    spark.stop()
    if len(verdicts) != len(chunks):
        print(f"verify: expected {len(chunks)} chunk verdicts, got {len(verdicts)}; no report", file=sys.stderr)
        return 3
    report = VerifyReport(batch.table, args.run, tuple(ChunkVerdict.from_dict(v) for v in verdicts), seconds,
                          (batch.number,))
    VerifyStore(args.base_uri).write_batch(report)
    print(report.summary(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
