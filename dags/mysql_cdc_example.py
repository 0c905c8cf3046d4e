"""Replicate MySQL/MariaDB tables into a lake: plan the chunks, snapshot them on Spark, then stream
the binlog (deferrable) from the snapshot's watermarks.

Copy this file and change the defaults of ``params`` (or pass them per run with ``--conf``):

- ``tables``: the tables to capture, as ``database.table``
- ``base_uri``: where the lake lives (a local path, ``s3a://bucket/prefix``, ``hdfs://...``)
- ``rows_per_batch``: about how many rows one Spark job (one mapped task) reads
- ``stop_after_idle_seconds``: the stream stops once caught up and idle that long (null: never)

Connections: ``mysql_cdc_default`` (type MySQL CDC) for the source and ``spark_default`` for Spark
(``{"conn_type": "spark", "host": "local[*]"}`` runs Spark inside the worker).
A second run skips the batches already in the lake.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator

with DAG(
    dag_id="mysql_cdc_example",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    params={
        "tables": Param(["shop.customers", "shop.products", "shop.orders"], type="array"),
        "base_uri": Param(".local/lake", type="string"),
        "rows_per_batch": Param(4_000_000, type="integer", minimum=1),
        "stop_after_idle_seconds": Param(None, type=["null", "number"]),
    },
    tags=["mysql-cdc"],
) as dag:
    split = MySqlChunkSplitOperator(
        task_id="split",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        rows_per_batch="{{ params.rows_per_batch }}",
    )
    snapshot = MySqlSnapshotSparkOperator.partial(task_id="snapshot", base_uri="{{ params.base_uri }}").expand(
        batch=split.output
    )

    @task(trigger_rule="none_failed")
    def summarize(manifests: Any) -> dict[str, Any]:
        """What this run snapshotted (nothing once every table is done); the binlog stream will start
        from these manifests' watermarks."""
        manifests = list(manifests)
        summary = {
            "batches": len(manifests),
            "rows": sum(m["rows"] for m in manifests),
            "chunks": sum(len(m["chunks"]) for m in manifests),
            "bytes": sum(m["bytes"] for m in manifests),
        }
        print(f"snapshot of this run: {summary}")
        return summary

    summary = summarize(snapshot.output)
    stream = MySqlBinlogStreamOperator(
        task_id="stream",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        stop_after_idle_seconds="{{ params.stop_after_idle_seconds }}",
        retries=3,
    )
    summary >> stream
