"""A downstream DAG scheduled on a replicated table's asset (``dags/mysql_cdc_downstream.py``, on the
shared run's first table), under the real scheduler and triggerer: the snapshot tasks' events reach
the asset through the alias, and the asset's watcher turns the running stream's commits into events,
each of which schedules a downstream run. Runs on the shared example DAG run, after the other tests of
this folder (its file sorts after theirs): no run of its own, and no wait that would keep their stream
idle past its stop."""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_mysqlcdc.assets import checkpoint_seq, replica_uri
from tests.deployment.conftest import DAG_ID, DATABASE, DOWNSTREAM_DAG_ID, TABLES, SharedRun

TABLE = f"{DATABASE}.{TABLES[0]}"


def asset_events(run: SharedRun, uri: str) -> list[dict[str, Any]]:
    (asset,) = [a for a in run.deployment.api("GET", "assets?limit=100")["assets"] if a["uri"] == uri]
    return list(run.deployment.api("GET", f"assets/events?asset_id={asset['id']}&limit=1000")["asset_events"])


def test_a_downstream_dag_runs_after_the_stream_commits(shared_run: SharedRun) -> None:
    uri = replica_uri(shared_run.base_uri, TABLE)
    deployment = shared_run.deployment

    def stream_event_ran() -> dict[str, Any] | None:
        """A stream commit's event (the watcher's, extra under "payload") whose downstream run succeeded."""
        runs = {r["dag_run_id"]: r for r in deployment.api("GET", f"dags/{DOWNSTREAM_DAG_ID}/dagRuns?limit=100")
                ["dag_runs"]}
        for event in asset_events(shared_run, uri):
            payload = (event["extra"] or {}).get("payload") or {}
            created = [runs.get(r["run_id"], {}).get("state") for r in event["created_dagruns"]]
            if payload.get("source") == "stream" and "success" in created:
                return event
        return None

    event = deployment.wait(stream_event_ran, 120, f"a successful {DOWNSTREAM_DAG_ID} run from a stream commit",
                            interval=2)
    payload = event["extra"]["payload"]
    assert event["extra"]["from_trigger"] is True
    assert payload["table"] == TABLE and payload["rows"] > 0
    assert 1 <= payload["first_seq"] <= payload["seq"] <= checkpoint_seq(shared_run.base_uri)
    assert re.fullmatch(r"[^:]+\.\d+:\d+", payload["offset"]), payload  # binlog file:position

    snapshots = [e for e in asset_events(shared_run, uri) if (e["extra"] or {}).get("source") == "snapshot"]
    assert {e["extra"]["batch"] for e in snapshots} == {0, 1}, snapshots  # (a cleared batch commits again)
    assert {(e["source_dag_id"], e["source_task_id"]) for e in snapshots} == {(DAG_ID, "snapshot")}
    assert all(e["extra"]["rows"] > 0 and re.fullmatch(r"[^:]+\.\d+:\d+", e["extra"]["offset"]) for e in snapshots)
