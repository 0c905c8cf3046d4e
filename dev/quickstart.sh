#!/usr/bin/env bash
# README's first command: set the machine up, start a local MariaDB (port 33061, data in .local/)
# with the sample shop database, and run the example DAG on the embedded defaults (Airflow on
# SQLite in .local/airflow, Spark local[*], the lake in .local/lake), then read the replica back.
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
export AIRFLOW_HOME="$PWD/.local/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# Airflow's own bookkeeping (task state calls, DAG serialization) at WARNING: the run prints its progress.
# The asset manager at ERROR: each snapshot batch's asset event goes to its table's asset through the alias
# mysql-cdc-replicas, and with no DAG here scheduled on those assets Airflow warns twice per event
export AIRFLOW__LOGGING__NAMESPACE_LEVELS="airflow.api_fastapi=WARNING airflow.serialization=WARNING airflow.dag_processing=WARNING airflow.models=WARNING airflow.assets.manager=ERROR"
mkdir -p "$AIRFLOW_HOME"
exec .venv/bin/python -m dev.quickstart "$@"   # --ui: serve the UI afterwards
