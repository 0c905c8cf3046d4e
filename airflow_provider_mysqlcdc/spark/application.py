"""What the package's PySpark applications share: one batch of a table's chunks spread over Spark tasks.

The snapshot job (``snapshot_job``) and the verify job (``verify_job``) take the same arguments, find
the same plan and columns, refuse the same Spark setting and distribute the same chunks; only what an
executor does with its chunks and what the driver does with the results differ. The CDC user's
password and the lake's storage options (its credentials, from ``lake_conn_id``) come from environment
variables of the driver, never from the arguments or the Spark configuration (both show in process
lists and the Spark UI's environment). The driver hands them to its tasks inside their serialized
closure (the connection and the ``Lake`` handle), so executors on a cluster need no environment of their
own for them (``spark.executorEnv.*`` would be another Spark property on the command line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.handle import Lake

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.chunks import Chunk
    from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.cdc.schema import TableSchema
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.snapshot import Batch, Plan

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
    """The arguments every Spark application of the package takes; a job adds its own before parsing."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-uri", required=True, help="the lake's base URI")
    parser.add_argument("--batch", required=True, help="the batch as JSON (Batch.to_dict)")
    parser.add_argument("--connection", required=True, help="ConnectionConfig.to_dict as JSON (no password)")
    parser.add_argument("--password-env", default=PASSWORD_ENV, help="environment variable holding the password")
    parser.add_argument("--lake-options-env", default=LAKE_OPTIONS_ENV,
                        help="environment variable holding the lake's storage options (JSON)")
    parser.add_argument("--partitions", type=int, default=0,
                        help="Spark tasks; default (0) the batch's readers, at most one per chunk")
    return parser


def application_line(context: Any) -> str:
    """The application's id, live UI and history server, as ``operators.links`` reads them."""
    conf = context.getConf()
    return APPLICATION_LINE + json.dumps({
        "id": context.applicationId, "ui": context.uiWebUrl,
        "history_server": conf.get(HISTORY_SERVER_ADDRESS, None),
        "event_log": conf.get(EVENT_LOG_ENABLED, "false").strip().lower() == "true",
    })


@dataclass(frozen=True)
class TaskChunks:
    """What one Spark task works on: its chunks, the batch, the columns, the connection (with the password),
    the lake (with its storage options) and its binlog reader id."""

    lake: Lake
    index: int
    chunks: list[Chunk]
    batch: Batch
    schema: TableSchema
    config: ConnectionConfig
    server_id: int


@dataclass(frozen=True)
class SparkApplication:
    """A Spark application's driver side (the snapshot's or the verification's, one ``spark-submit``): the
    snapshot batch it reads, its plan and the columns it reads, found once."""

    kind: str
    """``snapshot`` or ``verify``: the prefix of the job's lines."""
    lake: Lake
    batch: Batch
    plan: Plan
    schema: TableSchema
    partitions: int
    config: ConnectionConfig

    @classmethod
    def open(cls, kind: str, args: argparse.Namespace) -> SparkApplication:
        """Raises a ``MySqlCdcError`` saying what is wrong: no plan, too many tasks, a changed chunk key."""
        # the engine and the lake (pyarrow): not when an operator imports this module at DAG-parse time
        from airflow_provider_mysqlcdc.engine.batch_readers import batch_tasks
        from airflow_provider_mysqlcdc.engine.snapshot_batch import batch_schema
        from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore

        batch = Batch.from_dict(json.loads(args.batch))
        partitions = batch_tasks(batch, args.partitions)
        lake = Lake.at(args.base_uri, json.loads(os.environ.get(args.lake_options_env) or "{}"))
        plan = SnapshotStore(lake).read_plan(batch.table)
        if plan is None:
            raise SnapshotStateError(f"no snapshot plan for {batch.table} under {args.base_uri}: run the split "
                                     f"task first")
        config = ConnectionConfig.from_dict(json.loads(args.connection), os.environ.get(args.password_env, ""))
        schema = batch_schema(plan.schema, config, lake)
        return cls(kind, lake, batch, plan, schema, partitions, config)

    def session(self) -> Any:
        """The Spark session, or None (after saying why, and stopping it) when speculation is on: a
        speculative copy of a task would read the binlog with the task's own server id, and the server
        drops one of the two connections."""
        # pyspark: only in the Spark driver
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"mysql-cdc {self.kind} {self.batch.label}").getOrCreate()
        print(application_line(spark.sparkContext), flush=True)
        if spark.sparkContext.getConf().get("spark.speculation", "false").strip().lower() == "true":
            print(f"{self.kind}: spark.speculation is on: a speculative copy of a task would read the binlog with "
                  f"the same server id as the task itself, and the server drops one of them; set "
                  f"spark.speculation=false for this job", file=sys.stderr)
            spark.stop()
            return None
        return spark

    def distribute(
        self, spark: Any, chunks: list[Chunk], work: Callable[..., Iterator[T]], **settings: Any
    ) -> list[T]:
        """``work(TaskChunks, **settings)`` on every Spark task, over contiguous shares of ``chunks``; its
        results, collected. The chunks, the batch, the columns and the connection travel as the objects they
        are (pickled by Spark, the package being importable on every executor), and so do ``settings``; the
        password only inside the task's closure. Task ``index`` reads with the server id the split (or the
        verify plan) gave this batch's task ``index`` among all batches of the run."""
        from airflow_provider_mysqlcdc.engine.batch_readers import batch_server_id  # see open()

        lake, batch, schema, config = self.lake, self.batch, self.schema, self.config

        def run(index: int, items: Iterable[Chunk]) -> Iterator[T]:
            task = TaskChunks(lake, index, list(items), batch, schema, config,
                              batch_server_id(batch, config.server_id, index))
            return work(task, **settings)

        return list(spark.sparkContext.parallelize(chunks, self.partitions).mapPartitionsWithIndex(run).collect())
