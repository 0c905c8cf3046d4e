"""The PySpark application the snapshot operator submits: read a job's batches (one table's or many
tables', ``engine.snapshot.jobs``) into the lake.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_batches
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError, SchemaChangeError, SnapshotJobError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, ChunkResult, SnapshotStore
from airflow_provider_mysqlcdc.lake.parallel import each
from airflow_provider_mysqlcdc.spark.application import SparkApplication, TaskChunks, argument_parser
from airflow_provider_mysqlcdc.spark.job_error import report_error

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest

TASK_PROGRESS_SECONDS = 10.0


@dataclass(frozen=True)
class TaskFailure:
    """A task's ``MySqlCdcError``, handed to the driver as the task's last result: Spark gives the driver a
    failed task's exception as text only, and ends the job's other tasks. The driver raises it again as it
    is, or reads the task's batches again after a schema change (``read_job``)."""

    batches: tuple[Batch, ...]
    error: MySqlCdcError


def read_chunks(task: TaskChunks, *, attempt: str,
                progress: tuple[Any, Any] | None = None) -> Iterator[ChunkResult | TaskFailure]:
    """Runs on an executor: this task's chunks into one Parquet file of the attempt a batch; its error, if any,
    as a ``TaskFailure`` after the chunks it wrote."""
    started = reported = time.monotonic()
    done = rows = 0
    try:
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
    except MySqlCdcError as error:
        print(f"snapshot: task {task.index}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        yield TaskFailure(tuple(b.batch for b in task.batches), error)


SCHEMA_CHANGE_ROUNDS = 3
"""Times ``read_job`` reads a batch whose table keeps changing while it is read before it gives up."""

Reader = Callable[["SparkApplication", Sequence[Sequence["Chunk"]]], list[ChunkResult | TaskFailure]]
"""Reads the given chunks of each of the application's batches (``chunks[i]``: batch ``i``'s; none: not read)."""


def read_job(app: SparkApplication, read: Reader) -> tuple[SparkApplication, list[ChunkResult]]:
    """Every chunk of the job's batches read (``read``), each batch's with one schema, and the application
    with the columns they were read with.

    A DDL of a table while a task reads it stops the task (``SchemaChangeError``: a batch has one schema,
    and the chunk reader never mixes two). Every batch that task read is then read again whole, by all the
    tasks, with its table's columns as they are now: the columns at the new chunks' high watermarks, past
    the DDL. The batches the DDL did not reach keep what they read (their chunks' high watermarks lie before
    it); the stream applies the DDL at its offset to them later, as to every row it holds, and the batch
    commit gives a column whose type the DDL widened the wider type (``lake.write.snapshot_commit``). Up
    to ``SCHEMA_CHANGE_ROUNDS`` reads; any other error of a task is raised as it is."""
    todo = set(range(len(app.batches)))
    kept: list[ChunkResult] = []
    for _ in range(SCHEMA_CHANGE_ROUNDS):
        records = read(app, [jb.plan.chunks_to_read(jb.batch) if i in todo else []
                             for i, jb in enumerate(app.batches)])
        failures = [r for r in records if isinstance(r, TaskFailure)]
        for failure in failures:
            if not isinstance(failure.error, SchemaChangeError):
                raise failure.error
        stale = {i for i, jb in enumerate(app.batches) for f in failures if jb.batch in f.batches}
        results = app.by_batch([r for r in records if isinstance(r, ChunkResult)], lambda r: r.chunk)
        kept += [r for i in todo - stale for r in results[i]]
        if not stale:
            return app, kept
        print(f"snapshot: {failures[0].error}; reading {len(stale)} of the job's batches again with their tables' "
              f"current columns", flush=True)
        todo = stale
        app = app.with_current_columns(stale)
    raise SchemaChangeError(
        f"the tables of {app.job.label} changed while they were read, {SCHEMA_CHANGE_ROUNDS} times in a row "
        f"(the last: {failures[0].error}); nothing of the batches they stopped is committed: retry the task once "
        f"the schema changes are done"
    )


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


def commit_job(app: SparkApplication, attempt: str, records: list[ChunkResult], seconds: float,
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
        report_error("snapshot", args.error_file, error)
        return 2
    if spark is None:
        return 4
    try:
        _snapshot(app, spark)
    except MySqlCdcError as error:
        report_error("snapshot", args.error_file, error)
        return 3
    finally:
        spark.stop()
    return 0


def _snapshot(app: SparkApplication, spark: Any) -> None:
    """The job read (``read_job``) and committed (``commit_job``)."""
    attempt = uuid.uuid4().hex[:12]
    tables = len(app.job.tables)
    total = sum(len(jb.plan.chunks_of(jb.batch)) for jb in app.batches)
    print(f"snapshot: {app.job.label}: {total} chunks of {len(app.batches)} batches"
          f"{f' of {tables} tables' if tables > 1 else ''} in {app.partitions} tasks, attempt {attempt}", flush=True)
    started = time.monotonic()

    def read(app: SparkApplication, chunks: Sequence[Sequence[Chunk]]) -> list[ChunkResult | TaskFailure]:
        stop = threading.Event()
        progress = (spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))
        threading.Thread(target=_report_progress, args=(progress, sum(map(len, chunks)), stop, time.monotonic()),
                         daemon=True).start()
        try:
            return app.distribute(spark, chunks, read_chunks, attempt=attempt, progress=progress)
        finally:
            stop.set()

    app, records = read_job(app, read)
    seconds = time.monotonic() - started
    if len(records) != total:
        raise SnapshotJobError(f"{app.job.label}: expected {total} chunks, got {len(records)}; not committing")
    manifests = commit_job(app, attempt, records, seconds)
    committing = time.monotonic() - started - seconds
    rows = sum(m.rows for m in manifests)
    versions = (f"as version {manifests[0].delta_version} of the Delta table" if len(manifests) == 1 else
                f"as {len(manifests)} Delta commits, one a batch, in {committing:.1f} s")
    print(f"snapshot: {app.job.label}: {rows:,} rows in {seconds:.1f} s ({rows / seconds if seconds else 0:,.0f} "
          f"rows/s), committed attempt {attempt} {versions}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
