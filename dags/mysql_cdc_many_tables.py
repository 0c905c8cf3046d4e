"""Many tables from two servers, a few lines: ``mysql_cdc_pipeline`` builds split -> snapshot ->
stream as one task group per call. Runs continuously (``@continuous``): the stream defers while
idle, and if it ever stops, the next run continues from the lake's checkpoint.

Each stream takes the last server id of its connection's ``server_id`` range: two streams on one
server need two connections with different ranges. The streams set ``deferrable=True`` (the operator's
default is Airflow's ``[operators] default_deferrable``, False unless set).
"""

from __future__ import annotations

import os

from airflow.sdk import DAG

from airflow_provider_mysqlcdc.operators.pipeline import mysql_cdc_pipeline

LAKE = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "mysql-cdc-lake")

with DAG(dag_id="mysql_cdc_many_tables", schedule="@continuous", max_active_runs=1, catchup=False,
         tags=["mysql-cdc"]) as dag:
    mysql_cdc_pipeline(group_id="shop", tables=["shop.customers", "shop.products", "shop.orders"],
                       base_uri=f"{LAKE}/shop", stream_kwargs={"deferrable": True})
    mysql_cdc_pipeline(group_id="billing", tables=["billing.invoices", "billing.payments"],
                       base_uri=f"{LAKE}/billing", mysql_cdc_conn_id="mysql_cdc_billing",
                       stream_kwargs={"max_batch_events": 20_000, "deferrable": True})
