"""The PySpark application the snapshot operator submits: read one batch of chunks into the lake.

Executors read their chunks (watermarks, SELECT into Arrow, binlog fix-up) and write Parquet
themselves, into the batch's partition folder of the table's current-state Delta table; the driver
only gets a ``ChunkResult`` per chunk back, logs progress, and commits the batch: one Delta
transaction replacing the batch's partition, then the batch manifest with the chunks' watermarks.
The CDC user's password comes from an environment variable of the driver, never from the arguments
or the Spark configuration (both show in process lists and the Spark UI's environment). The driver
hands it to its tasks inside their serialized closure, so executors on a cluster need no environment
of their own for it (``spark.executorEnv.*`` would be another Spark property on the command line).

    spark-submit snapshot_job.py --base-uri /lake --batch '{"table": "shop.orders", ...}' \\
        --connection '{"host": ..., "user": ...}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.snapshot import ChunkResult

PASSWORD_ENV = "MYSQL_CDC_PASSWORD"
TASK_PROGRESS_SECONDS = 10.0
APPLICATION_LINE = "snapshot: spark application "
"""Starts the driver's line with its application (JSON); the operator's "Spark application" link reads it."""
HISTORY_SERVER_ADDRESS = "spark.yarn.historyServer.address"
EVENT_LOG_ENABLED = "spark.eventLog.enabled"


def application_line(context: Any) -> str:
    """The application's id, live UI and history server, as ``operators.links.SparkApplication`` reads them."""
    conf = context.getConf()
    return APPLICATION_LINE + json.dumps({
        "id": context.applicationId, "ui": context.uiWebUrl,
        "history_server": conf.get(HISTORY_SERVER_ADDRESS, None),
        "event_log": conf.get(EVENT_LOG_ENABLED, "false").strip().lower() == "true",
    })


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-uri", required=True, help="the lake's base URI")
    parser.add_argument("--batch", required=True, help="the batch as JSON (Batch.to_dict)")
    parser.add_argument("--connection", required=True, help="ConnectionConfig.to_dict as JSON (no password)")
    parser.add_argument("--password-env", default=PASSWORD_ENV, help="environment variable holding the password")
    parser.add_argument("--partitions", type=int, default=0,
                        help="Spark tasks; default (0) the batch's readers, at most one per chunk")
    return parser.parse_args(argv)


def read_partition(
    index: int,
    chunk_dicts: Iterable[dict[str, Any]],
    *,
    base_uri: str,
    batch_dict: dict[str, Any],
    schema_dict: dict[str, Any],
    attempt: str,
    config_dict: dict[str, Any],
    password: str,
    progress: tuple[Any, Any] | None = None,
) -> Iterator[ChunkResult]:
    """Runs on an executor: this partition's chunks into one Parquet file of the attempt."""
    from airflow_provider_mysqlcdc.cdc.chunks import Chunk
    from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.cdc.schema import TableSchema
    from airflow_provider_mysqlcdc.engine.snapshot_batch import write_chunks
    from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore

    config = ConnectionConfig.from_dict(config_dict, password)
    batch = Batch.from_dict(batch_dict)
    # the split gave this batch its own run of ids among all batches of the DAG run (first_reader, readers)
    server_id = batch.server_id(config.server_id, index)
    chunks = [Chunk.from_dict(c) for c in chunk_dicts]
    started = reported = time.monotonic()
    done = rows = 0
    for record in write_chunks(
        SnapshotStore(base_uri), batch, attempt, index, config, TableSchema.from_dict(schema_dict), chunks, server_id,
    ):
        done, rows = done + 1, rows + record.rows
        if progress is not None:  # Spark accumulators: chunks and rows done, seen by the driver per task
            progress[0].add(1)
            progress[1].add(record.rows)
        if time.monotonic() - reported >= TASK_PROGRESS_SECONDS:
            # accumulators reach the driver only when a task ends, so each task says how far it is itself:
            # on a local master its output is in the task log, on a cluster in the executor's log
            reported = time.monotonic()
            print(f"snapshot: task {index}: {done}/{len(chunks)} chunks, {rows:,} rows, "
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
    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.engine.snapshot_batch import batch_schema, commit_batch
    from airflow_provider_mysqlcdc.exceptions import MySqlCdcError
    from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore

    args = parse_args(argv)
    batch = Batch.from_dict(json.loads(args.batch))
    try:
        partitions = batch.spark_tasks(args.partitions)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        return 2
    store = SnapshotStore(args.base_uri)
    plan = store.read_plan(batch.table)
    if plan is None:
        print(f"no snapshot plan for {batch.table} under {args.base_uri}: run the split task first", file=sys.stderr)
        return 2
    chunks = plan.chunks_to_read(batch)
    config = json.loads(args.connection)
    password = os.environ.get(args.password_env, "")
    try:
        schema = batch_schema(plan.schema, ConnectionConfig.from_dict(config, password), args.base_uri)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        return 2
    spark = SparkSession.builder.appName(f"mysql-cdc snapshot {batch.label}").getOrCreate()
    print(application_line(spark.sparkContext), flush=True)
    if spark.sparkContext.getConf().get("spark.speculation", "false").strip().lower() == "true":
        print("snapshot: spark.speculation is on: a speculative copy of a task would read the binlog with the "
              "same server id as the task itself, and the server drops one of them; set spark.speculation=false "
              "for this job", file=sys.stderr)
        spark.stop()
        return 4
    attempt = uuid.uuid4().hex[:12]
    print(f"snapshot: {batch.label}: {len(chunks)} chunks in {partitions} tasks, attempt {attempt}", flush=True)

    started = time.monotonic()
    stop = threading.Event()
    progress = (spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))
    threading.Thread(target=_report_progress, args=(progress, len(chunks), stop, started), daemon=True).start()
    settings = {
        "base_uri": args.base_uri, "batch_dict": batch.to_dict(), "schema_dict": schema.to_dict(),
        "attempt": attempt, "config_dict": config, "password": password,  # in the pickled closure only
        "progress": progress,
    }
    records = (
        spark.sparkContext.parallelize([c.to_dict() for c in chunks], partitions)
        .mapPartitionsWithIndex(lambda index, items: read_partition(index, items, **settings))
        .collect()
    )
    stop.set()
    seconds = time.monotonic() - started
    if len(records) != len(chunks):
        print(f"snapshot: expected {len(chunks)} chunks, got {len(records)}; not committing", file=sys.stderr)
        return 3
    try:
        manifest = commit_batch(store, batch, attempt, schema, records, seconds)
    except MySqlCdcError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        spark.stop()
        return 3
    print(f"snapshot: {batch.label}: {manifest.rows:,} rows in {seconds:.1f} s "
          f"({manifest.rows_per_second or 0:,} rows/s), committed attempt {attempt} as version "
          f"{manifest.delta_version} of the Delta table", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
