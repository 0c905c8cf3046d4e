"""The Spark provider's private attributes our operators rely on, because it offers no public way to do
what they do: each test names one and fails when a release of apache-airflow-providers-apache-spark
changes it, before a snapshot or verify task breaks in a deployment.

- ``SparkSubmitOperator._conn_id``: the base class keeps ``conn_id`` untemplated there and builds its hook
  from it; ``SparkApplicationOperator.prepare`` puts the rendered ``spark_conn_id`` there. ``_deploy_mode``: the
  ``deploy_mode`` argument, which ``prepare`` reads to know where the driver runs.
- ``SparkSubmitHook._connection``: the master and deploy mode the provider resolves from a connection
  (``operators.spark_submit.spark_master``).
- ``SparkSubmitOperator._get_hook`` and ``_hook``: the snapshot operator follows the hook's
  ``spark-submit`` output for the Spark application link (``MySqlSnapshotSparkOperator._get_hook``).
- ``SparkSubmitHook._process_spark_submit_log``, ``_yarn_application_id``, ``_kubernetes_application_id``:
  the output lines and the application ids the link is made of (``operators.links.SparkApplicationWatch``).
"""

from __future__ import annotations

import inspect
import json

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.spark_submit import spark_master

LOCAL = json.dumps({"conn_type": "spark", "host": "local[2]"})
STANDALONE = json.dumps({"conn_type": "spark", "host": "spark://master.example", "port": 7077,
                         "extra": {"deploy-mode": "cluster"}})


@pytest.fixture(autouse=True)
def spark_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", LOCAL)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", STANDALONE)


def test_the_operator_builds_its_hook_from_conn_id_kept_as_conn_id() -> None:
    operator = SparkSubmitOperator(task_id="submit", conn_id="spark_local", deploy_mode="client")
    assert (operator._conn_id, operator._deploy_mode) == ("spark_local", "client")
    operator._conn_id = "spark_standalone"  # what SparkApplicationOperator.prepare does with the rendered id
    hook = operator._get_hook()
    assert isinstance(hook, SparkSubmitHook) and hook._conn_id == "spark_standalone"
    assert (hook._connection["master"], hook._connection["deploy_mode"]) == ("spark://master.example:7077", "client")
    defaulted = SparkSubmitOperator(task_id="submit", default_args={"deploy_mode": "cluster"})
    assert defaulted._deploy_mode == "cluster"


def test_the_hook_resolves_master_and_deploy_mode_into_connection() -> None:
    assert spark_master("spark_local", None) == ("local[2]", None)
    assert spark_master("spark_standalone", None) == ("spark://master.example:7077", "cluster")
    assert spark_master("spark_standalone", "client") == ("spark://master.example:7077", "client")
    assert spark_master("no_such_spark_connection", None) == ("yarn", None)  # the provider's fallback


def test_execute_takes_the_hook_from_get_hook_and_keeps_it_as_hook() -> None:
    names = set(inspect.unwrap(SparkSubmitOperator.execute).__code__.co_names)  # under Airflow's wrapper
    assert {"_hook", "_get_hook"} <= names, "SparkSubmitOperator.execute no longer uses _get_hook()/_hook"
    operator = MySqlSnapshotSparkOperator(task_id="snapshot", batch={}, base_uri="/lake", spark_conn_id="spark_local")
    assert operator._hook is None  # the base class's slot, filled by execute


def test_the_hook_reads_spark_submit_output_through_process_spark_submit_log() -> None:
    assert "_process_spark_submit_log" in SparkSubmitHook.submit.__code__.co_names
    hook = SparkSubmitHook(conn_id="spark_local")
    assert (hook._yarn_application_id, hook._kubernetes_application_id) == (None, None)
    hook._process_spark_submit_log(iter(["Submitted application application_1700000000000_0001"]))
