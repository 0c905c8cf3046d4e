"""The deployment tests' shared run: the example DAG's tables and connections, the writer that commits to them
during the run, ``SharedRun`` (what the tests look at the run with) and a task's log; the fixtures that start
the deployment and the run are in this folder's ``conftest.py``."""
from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from dev import airflow_deployment
from dev.airflow_deployment import AirflowDeployment
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.deployment.browser import chromium
from tests.writers import TransactionWriter

DAG_ID = "mysql_cdc_example"


ASSET_RACE = ("UNIQUE constraint failed: asset.name, asset.uri",
              "UNIQUE constraint failed: asset_alias_asset.alias_id, asset_alias_asset.asset_id")
"""Airflow 3.3.2's API server creates an asset named through an alias, and the alias's link to it, when a
task that emitted its first event finishes, unguarded: two snapshot batches of one table finishing in the
same instant both insert them, and the loser's task instance is failed after its batch committed. Seen
about once in five runs on a loaded machine (the link's variant once, 2026-11-27); a cleared batch
replaces its own output."""


DOWNSTREAM_DAG_ID = "mysql_cdc_downstream"  # scheduled on the first table's asset (dags/mysql_cdc_downstream.py)


DATABASE = "t_deployment"


TABLES = ("a", "b", "c")


ROWS = 12_000  # two chunks of the default 8096 rows: with rows_per_batch 1, two batches a table


STOP_AFTER_IDLE = 40  # the stream ends the run after this long without a change


DEFER_AFTER_IDLE = 2


def connections(server: Any) -> dict[str, str]:
    """The components' connections: the test MariaDB (a wide server-id range: parallel readers take
    distinct ids) and Spark on ``local[2]``."""
    return {
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps({
            "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": server.cdc_password, "extra": {"server_id": "5700-5799"},
        }),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "deployment"
"""Screenshots the tests take, kept after the run (gitignored; pytest's own temporary folders are pruned)."""


class Writer(TransactionWriter):
    """Commits transactions that insert, update and delete rows of every table until stopped."""

    pause = 0.01

    def __init__(self, server: Any, seed: int) -> None:
        super().__init__(server, DATABASE, seed=seed)

    def write(self, cur: Any, rnd: random.Random) -> None:
        commit(cur, rnd)


def commit(cur: Any, rnd: random.Random) -> None:
    """One transaction over the three tables: an upsert (sometimes past the snapshot's key range), an
    update and a delete in each."""
    cur.execute("BEGIN")
    for table in TABLES:
        key = rnd.randint(-100, ROWS + 2000)
        cur.execute(f"INSERT INTO {table} VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1", (key, key, "w"))
        cur.execute(f"UPDATE {table} SET note = %s WHERE id = %s", (f"u{rnd.random():.6f}", rnd.randint(1, ROWS)))
        cur.execute(f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1, ROWS),))
    cur.execute("COMMIT")


@dataclass
class SharedRun:
    """The shared DAG run, and what the tests need to look at it."""

    deployment: AirflowDeployment
    server: Any
    run_id: str
    base_uri: str
    schemas: dict[str, TableSchema]
    writes: int
    # the task instances as they were when the stream first deferred (before any test cleared one)
    first_task_instances: list[dict[str, Any]] = field(default_factory=list)
    # snapshot batches (map indexes) whose first try Airflow failed after it committed (ASSET_RACE)
    raced: set[int] = field(default_factory=set)
    # the MySQL CDC page's JSON, and its screenshot, at the first moment it showed a snapshot batch running
    page_during_snapshot: dict[str, Any] | None = None
    screenshot_during_snapshot: Path | None = None

    @property
    def tables(self) -> list[str]:
        return list(self.schemas)

    def task_instances(self, task_id: str | None = None) -> list[dict[str, Any]]:
        tis = self.deployment.task_instances(DAG_ID, self.run_id)
        return [ti for ti in tis if task_id is None or ti["task_id"] == task_id]

    def stream(self) -> dict[str, Any]:
        return dict(self.deployment.api("GET", f"dags/{DAG_ID}/dagRuns/{self.run_id}/taskInstances/stream"))

    def page_url(self, api: bool = False) -> str:
        """The MySQL CDC page of the run (its JSON with ``api``)."""
        return f"{self.deployment.url}/mysql-cdc/{'api/' if api else ''}dags/{DAG_ID}?run_id={quote(self.run_id)}"

    def look_at_page_during_snapshot(self, artifacts: Path) -> None:
        """Once the page shows a snapshot batch running: keep its JSON and a screenshot."""
        if self.page_during_snapshot is not None:
            return
        try:
            page = self.deployment.api("GET", self.page_url(api=True).removeprefix(self.deployment.url))
        except airflow_deployment.AirflowApiError as err:  # the page's own test fails on it, not the shared run
            self.page_during_snapshot = {"error": str(err)}
            return
        chunks = [c for lake in page["lakes"] for t in (lake["status"] or {}).get("tables", []) for c in t["chunks"]]
        if any(c["state"] == "running" for c in chunks):
            self.page_during_snapshot = page
            self.screenshot_during_snapshot = artifacts / "mysql-cdc-page-during-snapshot.png"
            try:
                chromium(self.page_url(), f"--screenshot={self.screenshot_during_snapshot}", "--window-size=1400,900",
                         dump_dom=False)
            except (AssertionError, subprocess.TimeoutExpired) as err:  # the page's test fails on it
                self.page_during_snapshot = {"error": f"chromium: {err}"}

    def checkpoint_seq(self) -> int:
        checkpoint = StreamStore(Lake.at(self.base_uri)).read_checkpoint()
        return checkpoint.seq if checkpoint is not None else -1

    def differences(self) -> list[str]:
        """The tables whose replica differs from the source (empty when all are equal)."""
        conn = self.server.cdc_connect(DATABASE)
        try:
            return [t for t, schema in self.schemas.items()
                    if canonical_rows(read_table(self.base_uri, t)) != table_rows(conn, schema)]
        finally:
            conn.close()

    def write(self, transactions: int, seed: int) -> None:
        conn = self.server.admin_connect(DATABASE)
        rnd = random.Random(seed)
        with conn.cursor() as cur:
            for _ in range(transactions):
                commit(cur, rnd)
        conn.close()

    def wait_deferred(self, timeout: float = 120, settle: float = 0) -> dict[str, Any]:
        """Until the stream task instance is deferred, and has waited on the same trigger for ``settle``
        seconds (fails at once if the run ended). A change that wakes the stream within ~5 s of its
        deferral can meet Airflow 3.3.2's defer/resume race (the deferred workload's late "finished"
        event marks the resumed try up_for_retry; see the README): tests that assert the stream kept its
        try let it settle first."""
        seen: dict[str, Any] = {}

        def deferred() -> dict[str, Any] | None:
            if self.deployment.dag_run(DAG_ID, self.run_id)["state"] != "running":
                raise AssertionError(f"the run ended while waiting for the stream to defer: {self.summary()}")
            stream = self.stream()
            trigger = (stream.get("trigger") or {}).get("id") if stream["state"] == "deferred" else None
            if trigger is None or seen.get("trigger") != trigger:
                seen.update(trigger=trigger, since=time.monotonic())
            return stream if trigger is not None and time.monotonic() - seen["since"] >= settle else None

        return dict(self.deployment.wait(deferred, timeout, "the stream to defer", interval=0.5))

    def wait_caught_up(self, timeout: float = 120) -> None:
        """Until the stream is deferred (idle: it has read the binlog to its end) and the replica equals
        the source; on timeout the tables that differ are named."""

        def settled() -> bool:
            if self.deployment.dag_run(DAG_ID, self.run_id)["state"] != "running":
                raise AssertionError(f"the run ended while waiting for the stream to catch up: {self.summary()}")
            return self.stream()["state"] == "deferred" and not self.differences()

        try:
            self.deployment.wait(settled, timeout, "the deferred stream's replica to equal the source", interval=2)
        except TimeoutError:
            raise AssertionError(f"replica differs from the source for {self.differences()} "
                                 f"after {timeout} s: {self.summary()}") from None

    def clear_asset_race(self) -> None:
        """Clear, once each, the snapshot batches that Airflow 3.3.2's API server failed after they
        committed (``ASSET_RACE``), as a user would; any other failure is left for the caller to see."""
        failed = [ti for ti in self.task_instances("snapshot")
                  if ti["state"] == "failed" and ti["map_index"] not in self.raced]
        log = self.deployment.log_file("api-server").read_text(errors="replace")
        if not failed or not any(race in log for race in ASSET_RACE):
            return
        for ti in failed:
            self.raced.add(ti["map_index"])
            print(f"\nsnapshot batch {ti['map_index']} failed by Airflow's asset race; cleared")
            self.deployment.api("POST", f"dags/{DAG_ID}/clearTaskInstances", {
                "dag_run_id": self.run_id, "task_ids": [["snapshot", ti["map_index"]]], "include_downstream": True,
                "dry_run": False, "only_failed": False})

    def summary(self) -> str:
        return ", ".join(f"{ti['task_id']}[{ti['map_index']}] {ti['state']} try {ti['try_number']}"
                         for ti in self.task_instances())


def task_log(deployment: AirflowDeployment, ti: dict[str, Any]) -> str:
    """The task instance's log lines (for failure messages)."""
    path = (f"dags/{DAG_ID}/dagRuns/{ti['dag_run_id']}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}"
            f"?map_index={ti['map_index']}")
    try:
        content = deployment.api("GET", path)["content"]
    except airflow_deployment.AirflowApiError as err:
        return str(err)
    return "\n".join(str(line.get("event", line)) if isinstance(line, dict) else str(line) for line in content)
