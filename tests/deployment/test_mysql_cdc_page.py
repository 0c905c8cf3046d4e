"""The provider's "MySQL CDC" page on the real deployment, in headless Chromium: during the shared run's
snapshot (the conftest looks at it while a batch runs) and once the stream has committed (this module
runs after test_example_dag_deployed, whose tests need the run still streaming), with its
figures checked against the lake read here with deltalake; and a user Airflow's auth manager denies
the DAG gets no data of it.

The deployment's api-server runs the simple auth manager with ``simple_auth_manager_all_admins`` (no
login: its middleware makes a request without a token an admin), so the permission test starts a
second api-server over the same metadata database with login on. The simple auth manager grants every
DAG to every role alike (per-DAG access needs another auth manager, or its multi-team mode): it cannot
deny one DAG to a user who may read others. So the user denied is one configured without a role ("no
role, no permission"), logged in through ``/auth/token``; a viewer logged in the same way is the
control and sees the page; a request without a token gets 401.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.lake.handle import Lake, changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from dev.ports import free_port
from dev.processes import stop_group
from tests.deployment.browser import chromium, png_facts
from tests.deployment.shared_run import DAG_ID, DATABASE, SharedRun


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


def margin_document(shared_run: SharedRun) -> dict[str, Any]:
    """The stream's last binlog margin check, read from the lake as JSON without the package's code."""
    document = json.loads((Path(shared_run.base_uri) / "_stream" / "binlog_margin.json").read_text())
    assert document["checked_by"] == "stream", document
    return dict(document)


def page_margin(dom: str) -> dict[str, Any]:
    """The binlog margin beside the lag on the page, by its ``data-`` attributes and its age's words."""
    shown = re.search(r'<span data-field="binlog-margin" data-value="([^"]*)" data-limited-by="([^"]*)" '
                      r'data-below="([^"]*)" data-age-seconds="([^"]*)"[^>]*>([^<]*)</span> <span class="muted" '
                      r'data-field="binlog-margin-age">measured ([^<]*) ago by the stream \(([^)]*)\)', dom)
    assert shown is not None, dom[:3000]
    value, limited_by, below, age, figure, ago, measured_at = shown.groups()
    return {"seconds": None if value == "None" else float(value), "limited_by": limited_by, "below": below,
            "age": float(age), "figure": figure, "ago": ago, "measured_at": measured_at}


def test_the_page_showed_the_snapshot_while_it_ran(shared_run: SharedRun) -> None:
    page = shared_run.page_during_snapshot
    assert page is not None, "the page never showed a snapshot batch running while the snapshot ran"
    assert "error" not in page, page
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
                                                                        artifacts: Path) -> None:
    # idle: deferred, or (after test_example_dag_deployed, which runs first) stopped with the run
    stream = shared_run.deployment.wait(
        lambda: (st if (st := shared_run.stream())["state"] in ("deferred", "success") else None), 180,
        "the stream to be idle")
    before, margin_before = lake_facts(shared_run), margin_document(shared_run)
    png = artifacts / "mysql-cdc-page.png"
    chromium(shared_run.page_url(), f"--screenshot={png}", "--window-size=1400,1000", dump_dom=False)
    dom = chromium(shared_run.page_url())[1]
    after, margin_after = lake_facts(shared_run), margin_document(shared_run)
    print(f"\nscreenshot of {shared_run.page_url()}: {png} ({png.stat().st_size:,} bytes); lake: {after}")
    assert before == after, "the lake moved while the page loaded: the test cannot compare"

    shown = page_facts(dom, shared_run.tables)
    assert shown["tables"] == {t: {"chunks": 2, "done": 2, "rows": f["rows"]} for t, f in after["tables"].items()}
    assert all(f["chunks"] == f["done"] == 2 for f in after["tables"].values())
    assert shown["offset"] == after["offset"] and shown["lag"] == after["lag"]
    # the binlog margin beside the lag: the stream's last check in the lake (a resume may check again while the
    # page loads), with the check's age; the test server purges no binlog (binlog_expire_logs_seconds 0)
    margin = page_margin(dom)
    document = next(d for d in (margin_before, margin_after) if d["measured_at"] == margin["measured_at"])
    assert (margin["seconds"], margin["limited_by"]) == (document["seconds"], document["limited_by"]), margin
    assert margin["below"] == "false" and margin["age"] >= 0 and margin["ago"], margin
    if document["seconds"] is None:
        assert margin["figure"] == "not purged (no retention by age or size)", margin
    data = shared_run.deployment.api("GET", shared_run.page_url(api=True).removeprefix(shared_run.deployment.url))
    carried = data["lakes"][0]["status"]["stream"]["binlog_margin"]
    assert {k: carried[k] for k in ("checked_by", "limited_by", "warn_below_seconds")} == {
        k: margin_after[k] for k in ("checked_by", "limited_by", "warn_below_seconds")}, carried
    assert carried["age_seconds"] >= 0 and not carried["below"], carried
    assert f'data-field="stream-state">{stream["state"]}<' in dom
    # the run does not verify: no table shows a verdict, and the lake has no report
    assert dom.count('data-verdict="none"') == len(shared_run.tables)
    assert 'data-field="chart"' in dom and 'data-field="error"' not in dom
    # a task instance's tab: the tables of that task alone (a snapshot batch's table)
    batch = next(ti for ti in shared_run.task_instances("snapshot") if ti["map_index"] == 0)
    table = batch["rendered_map_index"].split(" chunks ")[0]
    page = shared_run.deployment.api("GET", shared_run.page_url(api=True).removeprefix(shared_run.deployment.url)
                                     + "&task_id=snapshot&map_index=0")
    assert page["tables"] == [table] and [t["table"] for t in page["lakes"][0]["status"]["tables"]] == [table]
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1400, 1000) and colors >= 8 and busy > 0.01, (colors, busy)


@pytest.fixture(scope="module")
def login_server(shared_run: SharedRun) -> Iterator[str]:
    """A second api-server over the deployment's metadata database, home and lake, with login on (the
    simple auth manager's users ``viewer`` and ``nobody``, a user without a role): the deployment's own
    api-server makes every request an admin."""
    deployment = shared_run.deployment
    port = free_port()
    env = {**deployment.env, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:viewer,nobody:",
           "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False", "AIRFLOW__API__PORT": str(port)}
    log = Path(deployment.base) / "logs" / "api-server-login.log"
    with log.open("ab") as out:
        process = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "api-server", "--host",
                                    "127.0.0.1", "--port", str(port), "--workers", "1"], env=env,
                                   cwd=deployment.home, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                return get(f"{url}/api/v2/monitor/health", None)[0] == 200
            except OSError:
                return False

        deployment.wait(up, 120, "the api-server with login to answer")
        yield url
    finally:
        stop_group(process.pid, signal.SIGTERM, 30)


def login(server: str, home: str, username: str) -> str:
    """The token ``POST /auth/token`` gives ``username`` with the password the auth manager generated."""
    passwords = json.loads((Path(home) / "simple_auth_manager_passwords.json.generated").read_text())
    request = urllib.request.Request(f"{server}/auth/token", method="POST", headers={
        "Content-Type": "application/json"}, data=json.dumps({"username": username,
                                                             "password": passwords[username]}).encode())
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (loopback only)
        return str(json.loads(response.read())["access_token"])


def get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (loopback only)
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def test_a_user_without_access_to_the_dag_gets_nothing_of_it(shared_run: SharedRun, login_server: str) -> None:
    pages = [shared_run.page_url(), shared_run.page_url(api=True)]
    pages = [p.replace(shared_run.deployment.url, login_server) for p in pages]
    viewer = login(login_server, shared_run.deployment.home, "viewer")
    for url in pages:
        status, body = get(url, viewer)
        assert status == 200 and all(t in body for t in shared_run.tables), (url, status, body[:500])
    assert DAG_ID in get(f"{login_server}/mysql-cdc/", viewer)[1]

    nobody = login(login_server, shared_run.deployment.home, "nobody")
    for token, expected in ((None, 401), (nobody, 403), ("not-a-token", 403)):
        for url in pages:
            status, body = get(url, token)
            assert status == expected, (url, token, status, body[:300])
            assert DATABASE not in body and shared_run.base_uri not in body, body
    for path, empty in (("/mysql-cdc/", "No DAG you may read"), ("/mysql-cdc/api/dags", '{"dag_ids":[]}')):
        status, body = get(f"{login_server}{path}", nobody)
        assert status == 200 and empty in body and DAG_ID not in body, body[:500]


def test_airflow_shows_the_page_in_its_navigation_and_as_a_tab_of_the_run(shared_run: SharedRun,
                                                                        artifacts: Path) -> None:
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
    png = artifacts / "airflow-run-tab.png"
    chromium(tab, f"--screenshot={png}", "--window-size=1600,1000", dump_dom=False)
    print(f"\nthe run's MySQL CDC tab in Airflow's UI: {png}")
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1600, 1000) and colors >= 16 and busy > 0.02, (colors, busy)
