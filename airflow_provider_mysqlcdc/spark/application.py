"""What the package's PySpark applications share: a job's batches (one table's, or many tables') whose
chunks are spread over Spark tasks.

The snapshot job (``snapshot_job``) and the verify job (``verify_job``) take the same arguments, find
the same plans and columns, refuse the same Spark setting and distribute the same chunks; only what an
executor does with its chunks and what the driver does with the results differ. The CDC user's
password and the lake's storage options (its credentials, from ``lake_conn_id``) come from environment
variables of the driver, never from the arguments or the Spark configuration (both show in process
lists and the Spark UI's environment). The driver hands them to its tasks inside their serialized
closure (the connection and the ``Lake`` handle), so executors on a cluster need no environment of their
own for them (``spark.executorEnv.*`` would be another Spark property on the command line).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.spark.job_error import ERROR_FILE_ARGUMENT

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
    from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
    from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import BatchChunks
    from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, Plan
    from airflow_provider_mysqlcdc.lake.handle import Lake

PASSWORD_ENV = "MYSQL_CDC_PASSWORD"
LAKE_OPTIONS_ENV = "MYSQL_CDC_LAKE_OPTIONS"
"""The driver's environment variable holding the lake's storage options as JSON (absent or ``{}``: none)."""
APPLICATION_LINE = "mysql-cdc spark application "
"""Starts the driver's line with its application (JSON); the operators' "Spark application" link reads it."""
HISTORY_SERVER_ADDRESS = "spark.yarn.historyServer.address"
EVENT_LOG_ENABLED = "spark.eventLog.enabled"
T = TypeVar("T")

# pyspark 4.2 warns at import that it does not fully support pandas 3, in every job's log; our jobs use
# no pandas at all
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def argument_parser(description: str | None) -> argparse.ArgumentParser:
    """The arguments every Spark application of the package takes; the snapshot's or the verification's adds
    its own before parsing."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-uri", required=True, help="the lake's base URI")
    parser.add_argument("--batch", required=True, help="the job's batches as JSON (Job.to_dict)")
    parser.add_argument("--connection", required=True, help="ConnectionConfig.to_dict as JSON (no password)")
    parser.add_argument("--password-env", default=PASSWORD_ENV, help="environment variable holding the password")
    parser.add_argument("--lake-options-env", default=LAKE_OPTIONS_ENV,
                        help="environment variable holding the lake's storage options (JSON)")
    parser.add_argument("--partitions", type=int, default=0,
                        help="Spark tasks; default (0) the job's readers, at most one per chunk")
    parser.add_argument(ERROR_FILE_ARGUMENT, default=None,
                        help="a file the driver writes its error into, for the operator (spark.job_error)")
    return parser


def application_line(context: Any) -> str:
    """The application's id, live UI and history server, as ``operators.links`` reads them."""
    conf = context.getConf()
    return APPLICATION_LINE + json.dumps({
        "id": context.applicationId, "ui": context.uiWebUrl,
        "history_server": conf.get(HISTORY_SERVER_ADDRESS, None),
        "event_log": conf.get(EVENT_LOG_ENABLED, "false").strip().lower() == "true",
    })


def start_session(kind: str, label: str) -> Any:
    """The Spark session of a ``kind`` application for the job ``label``, or None (after saying why, and
    stopping it) when speculation is on: a speculative copy of a task would read the binlog with the task's
    own server id, and the server drops one of the two connections."""
    # pyspark: only in the Spark driver
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"mysql-cdc {kind} {label}").getOrCreate()
    print(application_line(spark.sparkContext), flush=True)
    if spark.sparkContext.getConf().get("spark.speculation", "false").strip().lower() == "true":
        print(f"{kind}: spark.speculation is on: a speculative copy of a task would read the binlog with the same "
              f"server id as the task itself, and the server drops one of them; set spark.speculation=false for "
              f"this job", file=sys.stderr)
        spark.stop()
        return None
    return spark


@dataclass(frozen=True)
class TaskChunks:
    """What one Spark task works on: its chunks of each batch it has chunks of (with the batch, the columns
    and the batch's read group: ``engine.snapshot.snapshot_batch.BatchChunks``), the connection (with the password),
    the lake (with its storage options) and its binlog reader id."""

    lake: Lake
    index: int
    batches: list[BatchChunks]
    config: ConnectionConfig
    server_id: int

    @property
    def chunk_count(self) -> int:
        return sum(len(b.chunks) for b in self.batches)


@dataclass(frozen=True)
class JobBatch:
    """One batch of a Spark application's job, with its table's plan and the columns it reads."""

    batch: Batch
    plan: Plan
    schema: TableSchema


@dataclass(frozen=True)
class SparkApplication:
    """A Spark application's driver side (the snapshot's or the verification's, one ``spark-submit``): the
    job it runs (the batches it reads, ``engine.snapshot.jobs``), their plans and the columns they read, found
    once."""

    kind: str
    """``snapshot`` or ``verify``: the prefix of the job's lines."""
    lake: Lake
    job: Job
    batches: tuple[JobBatch, ...]
    partitions: int
    config: ConnectionConfig

    @classmethod
    def start(cls, kind: str, args: argparse.Namespace) -> tuple[SparkApplication, Any]:
        """The application (``open``) and its Spark session (``start_session``) at once: ``open`` (the
        driver's imports of the engine and pyarrow, the plans, the source's columns) runs in a thread while
        this one waits for the JVM to start the Spark context, which takes seconds. Raises what ``open``
        raises, after stopping the session."""
        with ThreadPoolExecutor(1, thread_name_prefix=f"{kind}-open") as pool:
            opening = pool.submit(cls.open, kind, args)
            # the context in the main thread: pyspark handles SIGINT there only
            spark = start_session(kind, json.loads(args.batch).get("label", ""))
            try:
                return opening.result(), spark
            except BaseException:
                if spark is not None:
                    spark.stop()
                raise

    @classmethod
    def open(cls, kind: str, args: argparse.Namespace) -> SparkApplication:
        """Raises a ``MySqlCdcError`` saying what is wrong: no plan, too many tasks, a changed chunk key."""
        # the engine and the lake (pyarrow): not when an operator imports this module at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import job_tasks
        from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
        from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import batch_schemas
        from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore

        job = Job.from_dict(json.loads(args.batch))
        partitions = job_tasks(job, args.partitions)
        lake = Lake.at(args.base_uri, json.loads(os.environ.get(args.lake_options_env) or "{}"))
        plans = SnapshotStore(lake).read_plans(job.tables)
        missing = [str(table) for table, plan in plans.items() if plan is None]
        if missing:
            raise SnapshotStateError(f"no snapshot plan for {', '.join(missing)} under {args.base_uri}: run the "
                                     f"split task first")
        config = ConnectionConfig.from_dict(json.loads(args.connection), os.environ.get(args.password_env, ""))
        found = {table: plan for table, plan in plans.items() if plan is not None}
        schemas = batch_schemas([plan.schema for plan in found.values()], config, lake)
        batches = tuple(JobBatch(b, found[b.table], schemas[b.table]) for b in job.batches)
        return cls(kind, lake, job, batches, partitions, config)

    def with_current_columns(self, indexes: Collection[int]) -> SparkApplication:
        """The application with the columns of its batches ``indexes`` read from the source again
        (``batch_schemas``): their tables changed while they were read."""
        from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import batch_schemas  # see open()

        planned = {self.batches[i].batch.table: self.batches[i].plan.schema for i in indexes}
        schemas = batch_schemas(list(planned.values()), self.config, self.lake)
        return replace(self, batches=tuple(replace(jb, schema=schemas[jb.batch.table]) if i in indexes else jb
                                           for i, jb in enumerate(self.batches)))

    def by_batch(self, results: Iterable[T], chunk_of: Callable[[T], Chunk]) -> list[list[T]]:
        """``results`` (one a chunk, from ``distribute``) grouped by the job's batch their chunk is of,
        in the job's order of batches."""
        owner = {(jb.batch.table, index): i for i, jb in enumerate(self.batches)
                 for index in range(jb.batch.first_chunk, jb.batch.last_chunk + 1)}
        groups: list[list[T]] = [[] for _ in self.batches]
        for result in results:
            chunk = chunk_of(result)
            groups[owner[(chunk.table, chunk.index)]].append(result)
        return groups

    def distribute(
        self, spark: Any, chunks: Sequence[Sequence[Chunk]], work: Callable[..., Iterator[T]], **settings: Any
    ) -> list[T]:
        """``work(TaskChunks, **settings)`` on every Spark task, once, with its share of the batches' chunks;
        the results, collected. ``chunks[i]`` are the chunks of the job's batch ``i`` to work on, spread over
        the tasks by ``engine.snapshot.jobs.spread_chunks``. The chunks, the batches, the columns and the
        connection travel as the objects they are (pickled by Spark, the package being importable on every
        executor), and so do ``settings``; the password only inside the task's closure. Task ``index``
        reads with the server id the split (or the verify plan) gave this job's task ``index`` among all
        jobs of the run."""
        from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import job_server_id
        from airflow_provider_mysqlcdc.engine.snapshot.jobs import spread_chunks  # see open()
        from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import BatchChunks

        lake, job, config = self.lake, self.job, self.config
        parts = [(b.batch, b.schema, group) for b, group in zip(self.batches, job.read_groups, strict=True)]
        shares = spread_chunks(job, chunks, self.partitions)

        def run(index: int, items: Iterable[list[tuple[int, Chunk]]]) -> Iterator[T]:
            server_id = job_server_id(job, config.server_id, index)
            for share in items:  # one share: this task's (batch index, chunk) pairs, batch by batch
                batches = []
                for number, group in itertools.groupby(share, key=lambda item: item[0]):
                    batch, schema, read_group = parts[number]
                    batches.append(BatchChunks(batch, schema, [c for _, c in group], read_group))
                yield from work(TaskChunks(lake, index, batches, config, server_id), **settings)

        return list(spark.sparkContext.parallelize(shares, len(shares)).mapPartitionsWithIndex(run).collect())
