"""The snapshot of a 2,000,000-row table as a user runs it: the example DAG's split and mapped
SparkSubmit tasks through Airflow's ``dag.test()`` on ``local[*]``, against Spark's own JDBC read of
the same table into Parquet (MariaDB Connector/J), both including Spark's start, in one run.

    .venv/bin/python -m bench.snapshot_bench [--rows 2000000] [--rows-per-batch 1000000]

Starts a throwaway MariaDB and a throwaway Airflow home of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import scratch_dir
from bench.server import bench_arguments, load_orders, throwaway_server
from dev.dag_file import load_dag, start_execution_api

ROOT = Path(__file__).resolve().parents[1]
JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


def run_example_dag(base_uri: str, rows_per_batch: int) -> tuple[float, dict]:
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
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    env = {**os.environ, "MYSQL_CDC_PASSWORD": password, "PYSPARK_PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    result = subprocess.run(
        [spark_submit, "--master", "local[*]", "--jars", JDBC_JAR, str(ROOT / "bench" / "spark_jdbc_read.py"),
         "--url", f"jdbc:mysql://{host}:{port}/bench", "--table", "orders", "--user", user, "--out", out],
        env=env, capture_output=True, text=True, check=True,
    )
    wall = time.perf_counter() - started
    line = next(x for x in result.stdout.splitlines() if x.startswith("JDBC_BASELINE"))
    return wall, float(line.split("seconds=")[1])


def main(argv: list[str] | None = None) -> int:
    home = scratch_dir("bench-airflow-")  # before anything imports Airflow
    os.environ.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                       "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags")})
    args = bench_arguments(__doc__, argv, port=33087, rows_per_batch=True)
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True, capture_output=True)
    with throwaway_server(args.port) as server:
        with server.admin_connect("bench").cursor() as cur:
            load_orders(cur, args.rows)
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[*]"})
        os.environ["AIRFLOW_CONN_MYSQL_CDC_DEFAULT"] = json.dumps({
            "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": server.cdc_password})
        start_execution_api()
        ours, summary = run_example_dag(f"{home}/lake", args.rows_per_batch)
        jdbc_wall, jdbc_read = run_jdbc_baseline(server.host, server.port, server.cdc_user, server.cdc_password,
                                                 f"{home}/jdbc")
    rows = summary["rows"]
    print(f"table: {rows:,} rows; our snapshot: {summary['batches']} batches, {summary['chunks']} chunks")
    print(f"{'our DAG (split + mapped spark-submit), wall':48} {ours:7.1f} s {rows / ours:>10,.0f} rows/s")
    print(f"{'Spark JDBC -> Parquet, spark-submit wall':48} {jdbc_wall:7.1f} s {rows / jdbc_wall:>10,.0f} rows/s")
    print(f"{'Spark JDBC -> Parquet, read+write only':48} {jdbc_read:7.1f} s {rows / jdbc_read:>10,.0f} rows/s")
    print(f"ours / Spark JDBC (wall): {jdbc_wall / ours:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
