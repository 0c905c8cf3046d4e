"""The one-call pipeline and the example DAGs, as Airflow parses them (no server, no I/O)."""

from __future__ import annotations

import pytest
from airflow.sdk import DAG

from airflow_provider_mysqlcdc.operators.pipeline import mysql_cdc_pipeline
from dev.dag_file import load_dag


def test_pipeline_wires_split_snapshot_stream() -> None:
    with DAG(dag_id="pipeline_test", schedule=None) as dag:
        mysql_cdc_pipeline(group_id="crm", tables=["crm.accounts"], base_uri="s3a://lake/crm",
                           mysql_cdc_conn_id="crm_db", spark_conn_id="spark_yarn", on_position_lost="archive",
                           binlog_archive_uri="s3://backups/crm-binlog/",
                           stream_kwargs={"max_batch_events": 5_000, "retries": 5})
    split, snapshot, stream = (dag.task_dict[f"crm.{t}"] for t in ("split", "snapshot", "stream"))
    assert snapshot.upstream_task_ids == {"crm.split"} and stream.upstream_task_ids == {"crm.snapshot"}
    assert stream.trigger_rule == "none_failed" and stream.retries == 5 and stream.max_batch_events == 5_000
    assert split.mysql_cdc_conn_id == stream.mysql_cdc_conn_id == "crm_db"
    assert (stream.on_position_lost, stream.binlog_archive_uri) == ("archive", "s3://backups/crm-binlog/")
    assert snapshot.partial_kwargs["spark_conn_id"] == "spark_yarn" and snapshot.partial_kwargs["base_uri"] == "s3a://lake/crm"


@pytest.mark.parametrize("name", ["mysql_cdc_example", "mysql_cdc_many_tables"])
def test_example_dags_parse(name: str) -> None:
    dag = load_dag(name)
    assert dag.dag_id == name and len(dag.task_dict) >= 3
