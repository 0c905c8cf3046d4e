"""Verify the replica against the source, chunk by chunk, without locks, while the stream runs.

Copy this file next to the replication DAG (``mysql_cdc_example``) and run it when you want a proof
(e.g. daily, or after an incident). Its params, overridable per run with ``--conf``:

- ``mysql_cdc_conn_id``: the source; best a connection of its own to the same server, with a
  ``server_id`` range apart from the replication's (its snapshot tasks and stream use theirs)
- ``spark_conn_id``: Spark
- ``tables``, ``base_uri``: what to verify, and the replication's lake
- ``readers_per_batch``: Spark tasks per job (each reads with its own binlog server id)
- ``rows_per_batch``: the rows a job verifies at most; batches of many tables share a job up to it
- ``wait_seconds``: how long a chunk waits for the stream to commit past the point it was read at
- ``fail_on_difference``: fail the run when a chunk differs (the report is in the lake either way)
- ``repair``: read the differing chunks again and MERGE them into the replica instead of failing
  (``MySqlResnapshotOperator``, while the stream keeps running); run the DAG again to see it equal

Each chunk of the snapshot plan is read again from the source, as the snapshot reads it, and compared
with the replica as of that same binlog offset. The report is ``<base_uri>/<db>/<table>/verify/<run>.json``.
"""

from __future__ import annotations

import os

from airflow.sdk import DAG, Param

from airflow_provider_mysqlcdc.operators.resnapshot import MySqlResnapshotOperator
from airflow_provider_mysqlcdc.operators.verify import (
    MySqlVerifyOperator,
    MySqlVerifyPlanOperator,
    MySqlVerifySummaryOperator,
)

DEFAULT_LAKE = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "mysql-cdc-lake")

with DAG(
    dag_id="mysql_cdc_verify",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params={
        "mysql_cdc_conn_id": Param("mysql_cdc_default", type="string"),
        "spark_conn_id": Param("spark_default", type="string"),
        "tables": Param(["shop.customers", "shop.products", "shop.orders"], type="array"),
        "base_uri": Param(DEFAULT_LAKE, type="string"),
        "readers_per_batch": Param(2, type="integer", minimum=1),
        "rows_per_batch": Param(10_000_000, type="integer", minimum=1),
        "wait_seconds": Param(600, type="number", minimum=0),
        "fail_on_difference": Param(True, type="boolean"),
        "repair": Param(False, type="boolean"),
    },
    tags=["mysql-cdc"],
) as dag:
    plan = MySqlVerifyPlanOperator(
        task_id="plan",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        readers_per_batch="{{ params.readers_per_batch }}",
        rows_per_batch="{{ params.rows_per_batch }}",
    )
    verify = MySqlVerifyOperator.partial(
        task_id="verify",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        spark_conn_id="{{ params.spark_conn_id }}",
        base_uri="{{ params.base_uri }}",
        wait_seconds="{{ params.wait_seconds }}",
    ).expand(batch=plan.output)
    summary = MySqlVerifySummaryOperator(
        task_id="summary",
        tables="{{ params.tables }}",
        base_uri="{{ params.base_uri }}",
        fail_on_difference="{{ params.fail_on_difference and not params.repair }}",
    )
    repair = MySqlResnapshotOperator(
        task_id="repair",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        base_uri="{{ params.base_uri }}",
        resnapshot="{{ ti.xcom_pull(task_ids='summary') if params.repair else {} }}",
    )
    verify >> summary >> repair
