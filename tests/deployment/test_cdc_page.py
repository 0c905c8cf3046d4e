"""The provider's "MySQL CDC" page on the real deployment, in headless Chromium: during the shared run's
snapshot (the conftest looks at it while a batch runs) and once the stream has committed, with its
figures checked against the lake read here with deltalake; and a user Airflow's auth manager denies
the DAG gets no data of it.

The deployment's simple auth manager runs with ``simple_auth_manager_all_admins`` (no login: a request
without a token is made an admin by its middleware), and the simple auth manager grants every DAG to
every role alike: it cannot deny one DAG to a user who may read others. So the user denied here is
one without a role (the auth manager's own token for it: "no role, no permission"), and the control
is a viewer with a token of the same auth manager, who sees the page.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.lake.handle import Lake, changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.stream_store import StreamStore
from tests.deployment.browser import chromium, png_facts
from tests.deployment.conftest import DAG_ID, DATABASE, SharedRun


def delta_rows(uri: str) -> int:
    return int(pc.sum(pa.table(DeltaTable(uri).get_add_actions(flatten=True)).column("num_records")).as_py() or 0)


def last_commit_lag(shared_run: SharedRun) -> float:
    """The stream's lag at its last checkpointed batch, from the changelogs: the batch's latest Delta commit
    time minus the newest source commit time (``_op_ts``) of its rows."""
    checkpoint = StreamStore(Lake.at(shared_run.base_uri)).read_checkpoint()
    assert checkpoint is not None
    seq = checkpoint.visible[0]
    commits: dict[int, int] = {}
    for table in shared_run.tables:
        for commit in DeltaTable(changelog_uri(shared_run.base_uri, table)).history():
            if commit.get("stream_seq") is not None and "note" not in commit and int(commit["stream_seq"]) <= seq:
                key = int(commit["stream_seq"])
                commits[key] = max(commits.get(key, 0), int(commit["timestamp"]))
    last = max(commits)
    newest = max(
        (pc.max(DeltaTable(changelog_uri(shared_run.base_uri, t)).to_pyarrow_dataset().to_table(
            columns=["_op_ts"], filter=pc.field("_stream_seq") == last).column("_op_ts")).as_py() or 0)
        for t in shared_run.tables)
    return round(max(0, commits[last] - newest) / 1000, 1)


def lake_facts(shared_run: SharedRun) -> dict[str, Any]:
    """What the page must show, read from the lake without the package's page code."""
    lake = Lake.at(shared_run.base_uri)
    checkpoint = StreamStore(lake).read_checkpoint()
    assert checkpoint is not None
    tables = {}
    for table in shared_run.tables:
        places = lake.table(table)
        plan = json.loads(Path(places.plan).read_text())
        manifests = lake.fs.get_file_info(pafs.FileSelector(places.snapshot_dir, recursive=True))
        tables[table] = {
            "chunks": len(plan["chunks"]),
            "done": sum(len(json.loads(Path(f.path).read_text())["chunks"]) for f in manifests
                        if f.base_name == "_manifest.json"),
            "rows": (delta_rows(table_uri(shared_run.base_uri, table)),
                     delta_rows(changelog_uri(shared_run.base_uri, table))),
        }
    offset = checkpoint.visible[1]
    return {"tables": tables, "offset": f"{offset.file}:{offset.position}", "lag": last_commit_lag(shared_run)}


def page_facts(dom: str, tables: list[str]) -> dict[str, Any]:
    """The same figures from the page's DOM, by their ``data-`` attributes."""
    found = {}
    for table in tables:
        row = re.search(rf'<tr data-table="{re.escape(table)}" data-chunks="(\d+)" data-chunks-done="(\d+)">(.*?)</tr>',
                        dom, re.S)
        assert row is not None, f"no row of {table} on the page"
        rows = [int(n) for n in re.findall(r'data-rows="(\d+)"', row.group(3))]
        found[table] = {"chunks": int(row.group(1)), "done": int(row.group(2)), "rows": tuple(rows)}
    offset = re.search(r'<code data-field="offset">([^<]*)</code>', dom)
    lag = re.search(r'data-field="lag-seconds" data-value="([^"]*)"', dom)
    assert offset is not None and lag is not None, dom[:3000]
    return {"tables": found, "offset": offset.group(1), "lag": float(lag.group(1))}


def test_the_page_showed_the_snapshot_while_it_ran(shared_run: SharedRun) -> None:
    page = shared_run.page_during_snapshot
    assert page is not None, "the page never showed a snapshot batch running while the snapshot ran"
    (lake,) = page["lakes"]
    assert lake["lake"]["base_uri"] == shared_run.base_uri and page["run_id"] == shared_run.run_id
    tables = {t["table"]: t for t in lake["status"]["tables"]}
    assert sorted(tables) == sorted(shared_run.tables)
    states = [c["state"] for t in tables.values() for c in t["chunks"]]
    assert all(t["batches"] == 2 and len(t["chunks"]) == 2 for t in tables.values()), tables
    assert "running" in states and states.count("done") < len(states), states
    png = shared_run.screenshot_during_snapshot
    assert png is not None and png.exists()
    print(f"\nthe page during the snapshot ({states}): {png}")
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1400, 900) and colors >= 8 and busy > 0.01, (colors, busy)


def test_the_page_shows_the_replica_and_the_stream_as_the_lake_has_them(shared_run: SharedRun,
                                                                        tmp_path: Path) -> None:
    stream = shared_run.wait_deferred(settle=3)
    before = lake_facts(shared_run)
    png = tmp_path / "mysql-cdc-page.png"
    chromium(shared_run.page_url(), f"--screenshot={png}", "--window-size=1400,1000", dump_dom=False)
    dom = chromium(shared_run.page_url())[1]
    after = lake_facts(shared_run)
    print(f"\nscreenshot of {shared_run.page_url()}: {png} ({png.stat().st_size:,} bytes); lake: {after}")
    assert before == after, "the lake moved while the page loaded: the test cannot compare"

    shown = page_facts(dom, shared_run.tables)
    assert shown["tables"] == {t: {"chunks": 2, "done": 2, "rows": f["rows"]} for t, f in after["tables"].items()}
    assert all(f["chunks"] == f["done"] == 2 for f in after["tables"].values())
    assert shown["offset"] == after["offset"] and shown["lag"] == after["lag"]
    assert f'data-field="stream-state">{stream["state"]}<' in dom
    # the run does not verify: no table shows a verdict, and the lake has no report
    assert dom.count('data-verdict="none"') == len(shared_run.tables)
    assert 'data-field="chart"' in dom and 'data-field="error"' not in dom
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1400, 1000) and colors >= 8 and busy > 0.01, (colors, busy)


def auth_token(shared_run: SharedRun, username: str, role: str | None) -> str:
    """A token the deployment's auth manager signs for a user of ``role`` (None: a user without any role)."""
    code = ("from airflow.api_fastapi.app import create_auth_manager\n"
            "from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser\n"
            f"print(create_auth_manager().generate_jwt(SimpleAuthManagerUser(username={username!r}, role={role!r})))")
    done = subprocess.run([sys.executable, "-c", code], env=shared_run.deployment.env, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def get(url: str, token: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (loopback only)
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def test_a_user_without_access_to_the_dag_gets_nothing_of_it(shared_run: SharedRun) -> None:
    base = f"{shared_run.deployment.url}/mysql-cdc"
    pages = [shared_run.page_url(), shared_run.page_url(api=True)]
    viewer = auth_token(shared_run, "viewer", "VIEWER")
    for url in pages:
        status, body = get(url, viewer)
        assert status == 200 and all(t in body for t in shared_run.tables), (url, status, body[:500])
    assert DAG_ID in get(f"{base}/", viewer)[1]

    denied = auth_token(shared_run, "nobody", None)
    for token in (denied, "not-a-token"):
        for url in pages:
            status, body = get(url, token)
            assert status in (401, 403), (url, status)
            assert DATABASE not in body and shared_run.base_uri not in body, body
    status, body = get(f"{base}/", denied)
    assert status == 200 and DAG_ID not in body, body[:500]
    status, body = get(f"{base}/api/dags", denied)
    assert status == 200 and json.loads(body) == {"dag_ids": []}


def test_airflow_shows_the_page_in_its_navigation_and_as_a_tab_of_the_run(shared_run: SharedRun,
                                                                        tmp_path: Path) -> None:
    """Airflow's own UI frames the page: the nav entry, and the run's "MySQL CDC" tab at that run."""
    url = shared_run.deployment.url
    run = quote(shared_run.run_id, safe="")
    tab = f"{url}/dags/{DAG_ID}/runs/{run}/plugin/mysql-cdc-run"
    frames = {
        f"{url}/plugin/mysql-cdc": "/mysql-cdc/",
        tab: f"/mysql-cdc/dags/{DAG_ID}?run_id={run}",
    }
    for page, src in frames.items():
        dom = chromium(page)[1]
        found = re.findall(r'<iframe[^>]* src="([^"]*)" title="MySQL CDC"', dom)
        assert found == [src.replace("&", "&amp;")], (page, found, dom[:2000])
    png = tmp_path / "airflow-run-tab.png"
    chromium(tab, f"--screenshot={png}", "--window-size=1600,1000", dump_dom=False)
    print(f"\nthe run's MySQL CDC tab in Airflow's UI: {png}")
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1600, 1000) and colors >= 16 and busy > 0.02, (colors, busy)
