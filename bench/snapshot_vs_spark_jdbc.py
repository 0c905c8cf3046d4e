"""The snapshot of a 2,000,000-row table as a user runs it: the example DAG's split and mapped
SparkSubmit tasks through Airflow's ``dag.test()`` on ``local[*]``, against Spark's own JDBC read of
the same table into Parquet (MariaDB Connector/J), both including Spark's start, in one run.

    .venv/bin/python -m bench.snapshot_vs_spark_jdbc [--rows 2000000] [--rows-per-batch 1000000]

Starts a throwaway MariaDB and a throwaway Airflow home of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.common.example_dag import run_example_dag, run_jdbc_baseline
from bench.common.measure import scratch_dir
from bench.common.server import bench_arguments, load_orders, throwaway_server
from dev.dag_file import start_execution_api

ROOT = Path(__file__).resolve().parents[1]


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
