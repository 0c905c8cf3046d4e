"""The PySpark application the snapshot operator submits: read one batch of chunks into the lake.

Executors read their chunks (watermarks, SELECT into Arrow, binlog fix-up) and write Parquet
themselves, into the batch's partition folder of the table's current-state Delta table; the driver
only gets a ``ChunkResult`` per chunk back, logs progress, and commits the batch: one Delta
transaction replacing the batch's partition, then the batch manifest with the chunks' watermarks.
Arguments, password handling and the distribution of the chunks are every Spark application's
(``spark.application``).

    spark-submit snapshot_job.py --base-uri /lake --batch '{"table": "shop.orders", ...}' \\
        --connection '{"host": ..., "user": ...}'
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.engine.snapshot_batch import commit_batch, write_chunks
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError
from airflow_provider_mysqlcdc.lake.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.spark.application import SparkApplication, TaskChunks, argument_parser

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.snapshot import ChunkResult

TASK_PROGRESS_SECONDS = 10.0


def read_chunks(task: TaskChunks, *, attempt: str, progress: tuple[Any, Any] | None = None) -> Iterator[ChunkResult]:
    """Runs on an executor: this task's chunks into one Parquet file of the attempt."""
    started = reported = time.monotonic()
    done = rows = 0
    for record in write_chunks(SnapshotStore(task.lake), task.batch, attempt, task.index, task.config,
                               task.schema, task.chunks, task.server_id):
        done, rows = done + 1, rows + record.rows
        if progress is not None:  # Spark accumulators: chunks and rows done, seen by the driver per task
            progress[0].add(1)
            progress[1].add(record.rows)
        if time.monotonic() - reported >= TASK_PROGRESS_SECONDS:
            # accumulators reach the driver only when a task ends, so each task says how far it is itself:
            # on a local master its output is in the task log, on a cluster in the executor's log
            reported = time.monotonic()
            print(f"snapshot: task {task.index}: {done}/{len(task.chunks)} chunks, {rows:,} rows, "
                  f"{rows / (reported - started):,.0f} rows/s", file=sys.stderr, flush=True)
        yield record


def _report_progress(progress: tuple[Any, Any], total: int, stop: threading.Event, started: float) -> None:
    """The driver's view: the chunks of finished tasks (accumulators arrive with them), when it moves."""
    said = 0
    while not stop.wait(5):
        chunks, rows = progress[0].value, progress[1].value
        if chunks == said:
            continue
        said, elapsed = chunks, time.monotonic() - started
        print(f"snapshot: {chunks}/{total} chunks, {rows:,} rows, {rows / elapsed:,.0f} rows/s after {elapsed:.0f} s",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__).parse_args(argv)
    try:
        job = SparkApplication.open("snapshot", args)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        return 2
    chunks = job.plan.chunks_to_read(job.batch)
    spark = job.session()
    if spark is None:
        return 4
    attempt = uuid.uuid4().hex[:12]
    print(f"snapshot: {job.batch.label}: {len(chunks)} chunks in {job.partitions} tasks, attempt {attempt}",
          flush=True)
    started = time.monotonic()
    stop = threading.Event()
    progress = (spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))
    threading.Thread(target=_report_progress, args=(progress, len(chunks), stop, started), daemon=True).start()
    records = job.distribute(spark, chunks, read_chunks, attempt=attempt, progress=progress)
    stop.set()
    seconds = time.monotonic() - started
    if len(records) != len(chunks):
        print(f"snapshot: expected {len(chunks)} chunks, got {len(records)}; not committing", file=sys.stderr)
        spark.stop()
        return 3
    try:
        manifest = commit_batch(SnapshotStore(job.lake), job.batch, attempt, job.schema, records, seconds)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        spark.stop()
        return 3
    print(f"snapshot: {job.batch.label}: {manifest.rows:,} rows in {seconds:.1f} s "
          f"({manifest.rows_per_second or 0:,} rows/s), committed attempt {attempt} as version "
          f"{manifest.delta_version} of the Delta table", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
