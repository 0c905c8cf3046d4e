"""One real Airflow deployment for the session (``dev/airflow_deployment.py``: api-server, scheduler with
a LocalExecutor of 4 slots, dag-processor, triggerer as separate processes) and one run of the example
DAG that the tests of this folder share.

The run snapshots three tables of two batches each (``rows_per_batch`` 1 with 2 chunks a table, so six
mapped Spark tasks) while a writer commits to every table, then streams; the stream defers after 2 s
idle and stops after ``STOP_AFTER_IDLE`` s idle, which ends the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from dev import airflow_deployment
from dev.airflow_deployment import AirflowDeployment
from tests.deployment.shared_run import (
    ARTIFACTS,
    DAG_ID,
    DATABASE,
    DEFER_AFTER_IDLE,
    DOWNSTREAM_DAG_ID,
    ROWS,
    STOP_AFTER_IDLE,
    TABLES,
    SharedRun,
    Writer,
    connections,
)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def deployment(mariadb_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    base = tmp_path_factory.mktemp("airflow-deployment")
    started = time.monotonic()
    downstream = {"MYSQL_CDC_LAKE": str(base / "lake"), "MYSQL_CDC_DOWNSTREAM_TABLE": f"{DATABASE}.{TABLES[0]}",
                  # the openlineage provider's listener writes each event to <base>/openlineage-<time>.json
                  "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file",
                                                                  "log_file_path": str(base / "openlineage")})}
    deployed = airflow_deployment.start(base, env={**connections(mariadb_server), **downstream}, parallelism=4)
    try:
        deployed.unpause(DAG_ID)  # the other DAGs of dags/ stay paused, but the downstream one
        deployed.unpause(DOWNSTREAM_DAG_ID)
        print(f"\nAirflow deployment at {deployed.url} ready in {time.monotonic() - started:.0f} s "
              f"(logs in {base / 'logs'})")
        yield deployed
    finally:
        airflow_deployment.stop(base)


@pytest.fixture(scope="session")
def shared_run(deployment: AirflowDeployment, mariadb_server: Any, artifacts: Path) -> Iterator[SharedRun]:
    """The example DAG run through the real scheduler: 3 tables x 2 snapshot batches with a writer
    committing from before the trigger until the stream has committed a few batches; returned once
    the stream has deferred and the replica equals the source."""
    admin = mariadb_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"USE {DATABASE}")  # the seq_1_to_n tables of the SEQUENCE engine need one
        for table in TABLES:
            cur.execute(f"CREATE TABLE {DATABASE}.{table} (id INT PRIMARY KEY, v INT, note VARCHAR(40))")
            cur.execute(f"INSERT INTO {DATABASE}.{table} SELECT seq, seq, CONCAT('n', seq) FROM seq_1_to_{ROWS}")
            cur.execute(f"ANALYZE TABLE {DATABASE}.{table}")
            cur.fetchall()
    cdc = mariadb_server.cdc_connect(DATABASE)
    schemas = {f"{DATABASE}.{t}": load_table_schema(cdc, TableId.parse(f"{DATABASE}.{t}")) for t in TABLES}
    cdc.close()
    base_uri = deployment.env["MYSQL_CDC_LAKE"]  # the lake the downstream DAG's asset names
    conf = {"tables": list(schemas), "base_uri": base_uri, "rows_per_batch": 1,
            "stop_after_idle_seconds": STOP_AFTER_IDLE, "defer_after_idle_seconds": DEFER_AFTER_IDLE}
    writer = Writer(mariadb_server, seed=1)
    writer.start()
    try:
        run_id = deployment.trigger(DAG_ID, conf)
        run = SharedRun(deployment, mariadb_server, run_id, base_uri, schemas, 0)

        def stream_committed() -> bool:
            run.clear_asset_race()
            run.look_at_page_during_snapshot(artifacts)
            state = deployment.dag_run(DAG_ID, run_id)["state"]
            if state not in ("queued", "running"):
                raise AssertionError(f"run {run_id} ended {state} during the snapshot: {run.summary()}")
            return run.checkpoint_seq() >= 3

        # two waves of Spark jobs (6 batches, 4 slots): ~30 s a job alone, up to ~270 s each measured on the
        # 2-core machine while other suites ran (load average 20)
        deployment.wait(stream_committed, 900, "the snapshot and the stream's first batches", interval=2)
    finally:
        writer.stop()
    run.writes = writer.count
    run.wait_caught_up()
    run.first_task_instances = run.task_instances()
    print(f"\nshared run {run_id}: {writer.count} transactions written during the snapshot; {run.summary()}")
    yield run
    admin.close()
