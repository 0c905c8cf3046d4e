"""What the shared run told the rest of Airflow. A downstream DAG scheduled on a replicated table's
asset (``dags/mysql_cdc_downstream.py``, on the shared run's first table), under the real scheduler and
triggerer: the snapshot tasks' events reach the asset through the alias, and the asset's watcher turns
the running stream's commits into events, each of which schedules a downstream run. And the
OpenLineage events the ``openlineage`` provider's real listener wrote (file transport) for the run's
tasks, with our operators' facets. Runs on the shared example DAG run, after the other tests of
this folder (its file sorts after theirs): no run of its own, and no wait that would keep their stream
idle past its stop."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.assets import replica_uri
from airflow_provider_mysqlcdc.lake import changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.stream_commits import checkpoint_seq
from tests.deployment.shared_run import DAG_ID, DATABASE, DOWNSTREAM_DAG_ID, TABLES, SharedRun

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
    assert 1 <= payload["first_seq"] <= payload["seq"] <= checkpoint_seq(Lake.at(shared_run.base_uri))
    assert re.fullmatch(r"[^:]+\.\d+:\d+", payload["offset"]), payload  # binlog file:position

    snapshots = [e for e in asset_events(shared_run, uri) if (e["extra"] or {}).get("source") == "snapshot"]
    assert {e["extra"]["batch"] for e in snapshots} == {0, 1}, snapshots  # (a cleared batch commits again)
    assert {(e["source_dag_id"], e["source_task_id"]) for e in snapshots} == {(DAG_ID, "snapshot")}
    assert all(e["extra"]["rows"] > 0 and re.fullmatch(r"[^:]+\.\d+:\d+", e["extra"]["offset"]) for e in snapshots)


def test_openlineage_events_name_the_source_tables_and_the_lake_tables(shared_run: SharedRun) -> None:
    """The run has ended (the tests before this one waited for it): every task's COMPLETE event is written."""
    complete: dict[str, list[dict[str, Any]]] = {}
    for path in Path(shared_run.deployment.base).glob("openlineage-*.json"):
        event = json.loads(path.read_text())
        if event.get("eventType") == "COMPLETE":  # the shared run is the example DAG's only run
            complete.setdefault(event["job"]["name"], []).append(event)
    assert {f"{DAG_ID}.{t}" for t in ("split", "snapshot", "stream")} <= set(complete), sorted(complete)
    source = f"mysql://{shared_run.server.host}:{shared_run.server.port}"
    columns = [("id", "int(11)"), ("v", "int(11)"), ("note", "varchar(40)")]

    def inputs(event: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, str]]]]:
        return [(i["namespace"], i["name"], [(f["name"], f["type"]) for f in i["facets"]["schema"]["fields"]])
                for i in event["inputs"]]

    (split,) = complete[f"{DAG_ID}.split"]
    assert sorted(inputs(split)) == [(source, t, columns) for t in shared_run.tables] and split["outputs"] == []

    snapshots = complete[f"{DAG_ID}.snapshot"]
    assert len(snapshots) >= 6  # one per batch (and the batch a test cleared and reran)
    for event in snapshots:
        ((namespace, name, read),) = inputs(event)
        (output,) = event["outputs"]
        assert (namespace, read) == (source, columns) and output["namespace"] == "file"
        assert output["name"] == table_uri(shared_run.base_uri, name)
        assert output["outputFacets"]["outputStatistics"]["rowCount"] > 0
        assert [f["name"] for f in output["facets"]["schema"]["fields"]][:3] == ["id", "v", "note"]

    stream = complete[f"{DAG_ID}.stream"][-1]
    assert sorted(inputs(stream)) == [(source, t, columns) for t in shared_run.tables]
    written = {o["name"]: o.get("outputFacets", {}).get("outputStatistics", {}).get("rowCount")
               for o in stream["outputs"]}
    assert set(written) == {u(shared_run.base_uri, t) for t in shared_run.tables for u in (changelog_uri, table_uri)}
    assert sum(written[changelog_uri(shared_run.base_uri, t)] for t in shared_run.tables) > 0, written
