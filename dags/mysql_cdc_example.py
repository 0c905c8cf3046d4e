"""Replicate MySQL/MariaDB tables into a lake: plan the chunks, snapshot them on Spark, then stream
the binlog (deferrable) from the snapshot's watermarks.

Copy this file and change the defaults of ``params`` (or pass them per run with ``--conf``):

- ``mysql_cdc_conn_id``: the source, a connection of type MySQL CDC
- ``spark_conn_id``: Spark (``{"conn_type": "spark", "host": "local[*]"}`` runs it inside the worker)
- ``tables``: the tables to capture, as ``database.table``
- ``base_uri``: where the lake lives (a local path, ``s3a://bucket/prefix``, ``hdfs://...``)
- ``lake_conn_id``: the lake's credentials, an ``aws`` connection; ``None``: the environment's (the
  standard AWS variables, the instance's role)
- ``rows_per_batch``: about how many rows one Spark job (one mapped task) reads
- ``chunk_key_columns``: ``{"db.table": "column"}``, the column a table is split on (default: its key's first)
- ``chunk_max_bytes``: at most about this many bytes a chunk (fewer rows a chunk for wide rows): what bounds
  a Spark executor's memory
- ``stop_after_idle_seconds``: the stream stops once caught up and idle that long (null: never)
- ``defer_after_idle_seconds``: how long the caught-up stream polls in the worker before it hands the
  wait to the triggerer (low latency while changes keep coming; no worker slot held while idle)
- ``on_position_lost``: what the stream does when the server purged the binlog of its checkpoint:
  ``fail``, ``resnapshot`` (read the tables again) or ``archive`` (read the lost range from
  ``binlog_archive_uri``, archived copies of the server's binlog files)

The argument names are the operators' (``mysql_cdc_conn_id``, ``spark_conn_id``, ...). The stream sets
``deferrable=True`` itself, whatever Airflow's ``[operators] default_deferrable`` says.

A second run skips the finished snapshot and streams on from the lake's checkpoint.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_mysqlcdc.assets import replica_alias
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator

DEFAULT_LAKE = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "mysql-cdc-lake")

with DAG(
    dag_id="mysql_cdc_example",
    schedule=None,
    catchup=False,
    max_active_runs=1,  # one stream writes a lake at a time (a second one fails on the lake's lease)
    render_template_as_native_obj=True,
    params={
        "mysql_cdc_conn_id": Param("mysql_cdc_default", type="string"),
        "spark_conn_id": Param("spark_default", type="string"),
        "tables": Param(["shop.customers", "shop.products", "shop.orders"], type="array"),
        "base_uri": Param(DEFAULT_LAKE, type="string"),
        "lake_conn_id": Param(None, type=["null", "string"]),
        "rows_per_batch": Param(10_000_000, type="integer", minimum=1),
        "chunk_key_columns": Param({}, type="object"),
        "chunk_max_bytes": Param(64 * 1024 * 1024, type="integer", minimum=1),
        "stop_after_idle_seconds": Param(None, type=["null", "number"]),
        "defer_after_idle_seconds": Param(60, type="number", minimum=0),
        "on_position_lost": Param("fail", type="string", enum=["fail", "resnapshot", "archive"]),
        "binlog_archive_uri": Param(None, type=["null", "string"]),
    },
    tags=["mysql-cdc"],
) as dag:
    split = MySqlChunkSplitOperator(
        task_id="split",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        lake_conn_id="{{ params.lake_conn_id }}",
        rows_per_batch="{{ params.rows_per_batch }}",
        chunk_key_columns="{{ params.chunk_key_columns }}",
        chunk_max_bytes="{{ params.chunk_max_bytes }}",
    )
    snapshot = MySqlSnapshotSparkOperator.partial(
        task_id="snapshot",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        spark_conn_id="{{ params.spark_conn_id }}",
        base_uri="{{ params.base_uri }}",
        lake_conn_id="{{ params.lake_conn_id }}",
        outlets=[replica_alias()],  # each batch's event goes to its table's asset; declared here for the UI
    ).expand(batch=split.output)

    @task(trigger_rule="none_failed")
    def summarize(outcomes: Any) -> dict[str, Any]:
        """What this run snapshotted (nothing once every table is done); the stream starts from the
        committed batches' watermarks."""
        outcomes = outcomes[:]  # one read of the mapped XComs (list() probes past the end, logging an error)
        summary = {
            "jobs": len(outcomes),
            "batches": sum(len(o["batches"]) for o in outcomes),
            "tables": len({b["table"] for o in outcomes for b in o["batches"]}),
            "rows": sum(o["rows"] for o in outcomes),
            "chunks": sum(o["chunks"] for o in outcomes),
            "bytes": sum(o["bytes"] for o in outcomes),
        }
        print(f"snapshot of this run: {summary}")
        return summary

    stream = MySqlBinlogStreamOperator(
        task_id="stream",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        lake_conn_id="{{ params.lake_conn_id }}",
        stop_after_idle_seconds="{{ params.stop_after_idle_seconds }}",
        defer_after_idle_seconds="{{ params.defer_after_idle_seconds }}",
        on_position_lost="{{ params.on_position_lost }}",
        binlog_archive_uri="{{ params.binlog_archive_uri }}",
        # explicit: the operator's default is Airflow's [operators] default_deferrable (False unless set),
        # and this DAG hands an idle stream's wait to the triggerer whatever the deployment's setting
        deferrable=True,
        # a retry continues from the checkpoint: Airflow 3.3.2 can mark a task resumed right after it
        # deferred up_for_retry, so retry soon rather than after the default 5 minutes
        retries=3,
        retry_delay=timedelta(seconds=10),
    )
    summarize(snapshot.output) >> stream
