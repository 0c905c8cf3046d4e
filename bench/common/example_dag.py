"""The snapshot of ``bench.orders`` as a user runs it, the example DAG through ``dag.test()``, and its baseline,
Spark's own JDBC read of the same table into Parquet (``spark_jdbc_read.py``, MariaDB Connector/J), both
including Spark's start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dev.dag_file import load_dag

JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


def run_example_dag(base_uri: str, rows_per_batch: int) -> tuple[float, Any]:
    """The example DAG's run of ``bench.orders`` into ``base_uri``: its seconds and its summary task's result."""
    dag = load_dag("mysql_cdc_example")
    started = time.perf_counter()
    run = dag.test(run_conf={"tables": ["bench.orders"], "base_uri": base_uri, "rows_per_batch": rows_per_batch,
                             "stop_after_idle_seconds": 0})
    seconds = time.perf_counter() - started
    if run.state != "success":
        raise SystemExit(f"the example DAG ended {run.state}")
    (summary,) = [ti for ti in run.get_task_instances() if ti.task_id == "summarize"]
    return seconds, summary.xcom_pull(task_ids="summarize")


def run_jdbc_baseline(host: str, port: int, user: str, password: str, out: str) -> tuple[float, float]:
    """Spark's JDBC read of ``bench.orders`` into Parquet at ``out``: the spark-submit's wall seconds and the
    seconds of its read and write alone."""
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    env = {**os.environ, "MYSQL_CDC_PASSWORD": password, "PYSPARK_PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    result = subprocess.run(
        [spark_submit, "--master", "local[*]", "--jars", JDBC_JAR, str(Path(__file__).with_name("spark_jdbc_read.py")),
         "--url", f"jdbc:mysql://{host}:{port}/bench", "--table", "orders", "--user", user, "--out", out],
        env=env, capture_output=True, text=True, check=True,
    )
    wall = time.perf_counter() - started
    line = next(x for x in result.stdout.splitlines() if x.startswith("JDBC_BASELINE"))
    return wall, float(line.split("seconds=")[1])
