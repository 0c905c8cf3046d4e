"""The PySpark application the verify operator submits: verify a job's batches (the verify plan puts
the batches of many tables in one job, as the split does).

Executors verify their share of the batches' chunks (``engine.verification.verify.verify_chunks``: the
source's chunks read as the snapshot reads them, the stream awaited past their high watermarks, the
replica read as of them) and return one verdict per chunk; the driver writes each batch's report into
the lake (``<db>/<table>/verify/<run>/batch=<n>.json``), which the operator returns and the summary
task combines. Differences do not fail the job: the summary decides. Arguments, password handling and
the distribution of the chunks are every Spark application's (``spark.application``), plus the run's
name and how long to wait for the stream.

    spark-submit verify_job.py --run <run> --base-uri /lake \\
        --batch '{"tables": {"shop.orders": [[0, 0, 15, 120000]]}, ...}' \\
        --connection '{"host": ..., "user": ...}'
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
from airflow_provider_mysqlcdc.engine.verification.verify import VerifyReport, VerifyStore, verify_chunks
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError
from airflow_provider_mysqlcdc.spark.application import SparkApplication, TaskChunks, argument_parser
from airflow_provider_mysqlcdc.spark.job_error import report_error

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
    from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.verification.verify import ChunkVerdict


def verify_task(task: TaskChunks, *, plan_chunks: dict[TableId, list[Chunk]],
                wait_seconds: float) -> Iterator[ChunkVerdict]:
    """Runs on an executor: this task's chunks of each batch, one verdict each (``plan_chunks``: all of each
    table's, which place a key in its batch's partition of the replica)."""
    with SourceSession(task.config) as session:  # one for all the task's batches
        for part in task.batches:
            yield from verify_chunks(task.lake, task.config, part.schema, plan_chunks[part.batch.table], part.batch,
                                     part.chunks, task.server_id, wait_seconds, session=session)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--run", required=True, help="the verification run's name (its report's file name)")
    parser.add_argument("--wait-seconds", type=float, required=True,
                        help="how long a task waits for the stream to commit past its chunks' high watermarks")
    args = parser.parse_args(argv)
    try:
        app, spark = SparkApplication.start("verify", args)
    except MySqlCdcError as error:
        report_error("verify", args.error_file, error)
        return 2
    chunks = [jb.plan.chunks_of(jb.batch) for jb in app.batches]
    total = sum(len(c) for c in chunks)
    if spark is None:
        return 4
    print(f"verify: {app.job.label}: {total} chunks in {app.partitions} tasks, run {args.run}", flush=True)
    started = time.monotonic()
    verdicts = app.distribute(spark, chunks, verify_task, plan_chunks={jb.batch.table: jb.plan.chunks
                                                                       for jb in app.batches},
                              wait_seconds=args.wait_seconds)
    seconds = time.monotonic() - started
    spark.stop()
    if len(verdicts) != total:
        print(f"verify: expected {total} chunk verdicts, got {len(verdicts)}; no report", file=sys.stderr)
        return 3
    store = VerifyStore(app.lake)
    for jb, part in zip(app.batches, app.by_batch(verdicts, lambda v: v.chunk), strict=True):
        report = VerifyReport(jb.batch.table, args.run, tuple(part), seconds * len(part) / total, (jb.batch.number,))
        store.write_batch(report)
        print(report.summary(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
