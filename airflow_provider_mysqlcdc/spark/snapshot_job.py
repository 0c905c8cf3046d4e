"""The PySpark application the snapshot operator submits: read a job's batches (one table's or many
tables', ``engine.snapshot.batch_packs``) into the lake.

Executors read their chunks (watermarks, SELECT into Arrow, binlog fix-up) and write Parquet
themselves, into each batch's partition folder of its table's current-state Delta table; the driver
only gets a ``ChunkResult`` per chunk back, logs progress, and commits each batch: one Delta
transaction replacing the batch's partition, then the batch manifest with the chunks' watermarks.
Arguments, password handling and the distribution of the chunks are every Spark application's
(``spark.application``).

    spark-submit snapshot_job.py --base-uri /lake \\
        --batch '{"tables": {"shop.orders": [[0, 0, 15, 120000]]}, ...}' \\
        --connection '{"host": ..., "user": ...}'
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_batches
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.parallel import each
from airflow_provider_mysqlcdc.spark.application import SparkApplication, TaskChunks, argument_parser

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest, ChunkResult

TASK_PROGRESS_SECONDS = 10.0


def read_chunks(task: TaskChunks, *, attempt: str, progress: tuple[Any, Any] | None = None) -> Iterator[ChunkResult]:
    """Runs on an executor: this task's chunks into one Parquet file of the attempt a batch."""
    started = reported = time.monotonic()
    done = rows = 0
    for record in write_batches(SnapshotStore(task.lake), attempt, task.index, task.config, task.batches,
                                task.server_id):
        done, rows = done + 1, rows + record.rows
        if progress is not None:  # Spark accumulators: chunks and rows done, seen by the driver per task
            progress[0].add(1)
            progress[1].add(record.rows)
        if time.monotonic() - reported >= TASK_PROGRESS_SECONDS:
            # accumulators reach the driver only when a task ends, so each task says how far it is itself:
            # on a local master its output is in the task log, on a cluster in the executor's log
            reported = time.monotonic()
            print(f"snapshot: task {task.index}: {done}/{task.chunk_count} chunks, {rows:,} rows, "
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


COMMIT_THREADS = 8
"""Tables whose batches the driver commits at once (bench/RESULTS.md measured 1 and 8)."""


def commit_pack(app: SparkApplication, attempt: str, records: list[ChunkResult], seconds: float,
                threads: int = COMMIT_THREADS) -> list[BatchManifest]:
    """Commit each batch of the job as a batch is committed (``engine.snapshot.snapshot_batch.commit_batch``:
    one Delta transaction replacing its partition, then its manifest): the batches of one table one after
    another (delta-rs fails a commit that raced another of the same table, even of another partition), up to
    ``threads`` tables at once (a job of a database's small tables is hundreds of tables, each commit
    mostly delta-rs's work without the GIL). A batch's ``seconds`` is its share of the job's, by rows, so
    that the manifests' rows per second stay the job's."""
    results = app.by_batch(records, lambda r: r.chunk)
    rows = sum(r.rows for r in records)
    store = SnapshotStore(app.lake)
    per_table: dict[TableId, list[int]] = {}
    for i, jb in enumerate(app.batches):
        per_table.setdefault(jb.batch.table, []).append(i)

    def commit_table(indexes: list[int]) -> list[BatchManifest]:
        manifests = []
        for i in indexes:
            mine = results[i]
            share = sum(r.rows for r in mine) / rows if rows else len(mine) / len(records)
            manifests.append(commit_batch(store, app.batches[i].batch, attempt, app.batches[i].schema, mine,
                                          seconds * share))
        return manifests

    groups = list(per_table.values())
    committed = dict(zip(itertools.chain(*groups), itertools.chain(*each(commit_table, groups, threads,
                                                                            "snapshot-commit")), strict=True))
    return [committed[i] for i in range(len(app.batches))]


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__).parse_args(argv)
    try:
        app, spark = SparkApplication.start("snapshot", args)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        return 2
    chunks = [jb.plan.chunks_to_read(jb.batch) for jb in app.batches]
    total = sum(len(c) for c in chunks)
    if spark is None:
        return 4
    attempt = uuid.uuid4().hex[:12]
    tables = len(app.job.tables)
    print(f"snapshot: {app.job.label}: {total} chunks of {len(app.batches)} batches"
          f"{f' of {tables} tables' if tables > 1 else ''} in {app.partitions} tasks, attempt {attempt}", flush=True)
    started = time.monotonic()
    stop = threading.Event()
    progress = (spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))
    threading.Thread(target=_report_progress, args=(progress, total, stop, started), daemon=True).start()
    records = app.distribute(spark, chunks, read_chunks, attempt=attempt, progress=progress)
    stop.set()
    seconds = time.monotonic() - started
    if len(records) != total:
        print(f"snapshot: expected {total} chunks, got {len(records)}; not committing", file=sys.stderr)
        spark.stop()
        return 3
    try:
        manifests = commit_pack(app, attempt, records, seconds)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        spark.stop()
        return 3
    committing = time.monotonic() - started - seconds
    rows = sum(m.rows for m in manifests)
    versions = (f"as version {manifests[0].delta_version} of the Delta table" if len(manifests) == 1 else
                f"as {len(manifests)} Delta commits, one a batch, in {committing:.1f} s")
    print(f"snapshot: {app.job.label}: {rows:,} rows in {seconds:.1f} s ({rows / seconds if seconds else 0:,.0f} "
          f"rows/s), committed attempt {attempt} {versions}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
