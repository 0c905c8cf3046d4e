"""The example DAG under Airflow's real components (one deployment and one DAG run shared by the tests,
in this order): the mapped snapshot batches run in parallel without clashing, the UI shows the run
with its labelled batches and the deferred stream, the stream is woken by the real triggerer and
survives the triggerer's ``kill -9``, one cleared batch reruns alone, and the run ends successfully."""

from __future__ import annotations

import re
import signal
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.compute as pc

from airflow_provider_mysqlcdc.lake.handle import table_uri
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from tests.deployment.browser import chromium, png_facts
from tests.deployment.shared_run import DAG_ID, STOP_AFTER_IDLE, SharedRun, Writer, task_log


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def most_at_once(tis: list[dict[str, Any]]) -> int:
    """The largest number of the task instances running at the same moment (from start/end dates)."""
    edges = sorted([(_time(ti["start_date"]), 1) for ti in tis] + [(_time(ti["end_date"]), -1) for ti in tis],
                   key=lambda edge: (edge[0], edge[1]))  # an end before a start at the same instant
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_parallel_snapshot_batches_never_clash(shared_run: SharedRun) -> None:
    tis = shared_run.first_task_instances
    snapshots = [ti for ti in tis if ti["task_id"] == "snapshot"]
    assert len(snapshots) == 6 and len(shared_run.tables) == 3
    assert shared_run.writes > 50, "the writer committed throughout the snapshot"
    for ti in tis:
        if ti["task_id"] != "stream":  # a second try only after Airflow's asset race failed the first
            tries = 2 if ti["task_id"] == "snapshot" and ti["map_index"] in shared_run.raced else 1
            assert (ti["state"], ti["try_number"]) == ("success", tries), ti
    stream = next(ti for ti in tis if ti["task_id"] == "stream")
    assert stream["state"] == "deferred" and stream["try_number"] == 1, stream
    at_once = most_at_once(snapshots)
    print(f"\nsnapshot tasks running at once: {at_once} (of {len(snapshots)}); "
          + ", ".join(f"{ti['rendered_map_index']}: {ti['start_date']} - {ti['end_date']}" for ti in snapshots))
    assert at_once >= 2
    assert shared_run.differences() == []
    # the UI's extra links of a batch, as the API server resolves them from the task's XComs: its table in
    # the lake, and its Spark job's UI (local[*] without a history server: the driver's address, gone now)
    first = next(ti for ti in snapshots if ti["map_index"] == 0)
    links = shared_run.deployment.api(
        "GET", f"dags/{DAG_ID}/dagRuns/{shared_run.run_id}/taskInstances/snapshot/links?map_index=0")["extra_links"]
    table = first["rendered_map_index"].split(" chunks ")[0]
    assert links["Lake table"] == Path(table_uri(shared_run.base_uri, table)).as_uri(), links
    assert re.fullmatch(r"http://[^/:]+:\d+", links["Spark application"] or ""), links


def test_the_ui_shows_the_run_with_labelled_batches_and_the_deferred_stream(shared_run: SharedRun,
                                                                         tmp_path: Path) -> None:
    stream = shared_run.wait_deferred()
    assert stream["state"] == "deferred"
    snapshots = shared_run.task_instances("snapshot")
    labels = sorted(ti["rendered_map_index"] for ti in snapshots)
    expected = sorted(f"{t} chunks {c}-{c}" for t in shared_run.tables for c in range(2))
    assert labels == expected, labels

    url = f"{shared_run.deployment.url}/dags/{DAG_ID}/runs/{quote(shared_run.run_id, safe='')}"
    png = tmp_path / "grid.png"
    chromium(url, f"--screenshot={png}", "--window-size=1600,1000", dump_dom=False)
    dom = chromium(url)[1]
    print(f"\nscreenshot of {url}: {png} ({png.stat().st_size:,} bytes)")
    width, height, colors, busy = png_facts(png.read_bytes())
    assert (width, height) == (1600, 1000)
    assert png.stat().st_size > 20_000 and colors >= 16 and busy > 0.01, (colors, busy)
    # the page rendered the run's task instances with their labels and the deferred stream, not an
    # error or login page
    assert all(label in dom for label in expected) and "Deferred" in dom, dom[:2000]
    # a change, so the stream's idle clock starts again: on a loaded machine the two chromium runs above took
    # most of STOP_AFTER_IDLE since the snapshot's last change, and the stream ended the run before the next
    # test could wake it
    shared_run.write(1, seed=10)


def test_the_stream_wakes_under_the_real_triggerer_and_survives_its_kill(shared_run: SharedRun) -> None:
    stream = shared_run.wait_deferred(settle=8)
    tries = stream["try_number"]

    # a change wakes the deferred stream through the triggerer; it resumes from its checkpoint
    seq = shared_run.checkpoint_seq()
    shared_run.write(20, seed=11)
    shared_run.deployment.wait(lambda: shared_run.checkpoint_seq() > seq, 60, "the triggerer to wake the stream")
    shared_run.wait_caught_up()

    # kill -9 the triggerer (its whole process group) while the stream waits in it; changes meanwhile
    deployment = shared_run.deployment
    deployment.kill_component("triggerer", signal.SIGKILL)
    assert shared_run.stream()["state"] == "deferred"
    seq = shared_run.checkpoint_seq()
    shared_run.write(20, seed=12)
    deployment.start_component("triggerer")
    deployment.wait_healthy(60, ("triggerer",))
    # the new triggerer takes over the orphaned trigger, which wakes the stream
    deployment.wait(lambda: shared_run.checkpoint_seq() > seq, 90, "the restarted triggerer to wake the stream")
    shared_run.wait_caught_up()
    stream = shared_run.stream()
    assert stream["try_number"] == tries, "the stream continued in the same try: no retry was needed"
    assert_no_change_twice(shared_run)


def assert_no_change_twice(shared_run: SharedRun) -> None:
    """No binlog change is in the lake twice (the changelog holds the stream's changes only)."""
    for table in shared_run.tables:
        changes = read_changes(shared_run.base_uri, table)
        assert pc.min(changes.column("_op_ts")).as_py() > 0, f"{table}: a snapshot row in the changelog"
        keys = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_row_seq")),
                        strict=True))
        assert keys and len(keys) == len(set(keys)), f"{table}: a change was written twice"


def test_clearing_one_batch_reruns_it_alone_while_the_stream_runs(shared_run: SharedRun) -> None:
    shared_run.wait_deferred()
    before = {ti["map_index"]: ti["try_number"] for ti in shared_run.task_instances("snapshot")}
    stream_try = shared_run.stream()["try_number"]
    cleared = shared_run.deployment.api("POST", f"dags/{DAG_ID}/clearTaskInstances", {
        "dag_run_id": shared_run.run_id, "task_ids": [["snapshot", 1]], "include_downstream": True,
        "dry_run": False, "only_failed": False,
    })
    # the batch and what depends on it (summarize, and the stream, which must continue from its checkpoint)
    assert sorted((ti["task_id"], ti["map_index"]) for ti in cleared["task_instances"]) == [
        ("snapshot", 1), ("stream", -1), ("summarize", -1)]
    writer = Writer(shared_run.server, seed=13)  # the batch is read again while the source changes
    writer.start()
    try:
        def rerun_done() -> bool:
            (ti,) = [ti for ti in shared_run.task_instances("snapshot") if ti["map_index"] == 1]
            if ti["state"] in ("failed", "upstream_failed"):
                raise AssertionError(f"the cleared batch failed: {task_log(shared_run.deployment, ti)[-3000:]}")
            return ti["state"] == "success" and ti["try_number"] == before[1] + 1

        shared_run.deployment.wait(rerun_done, 180, "the cleared batch to run again")
        shared_run.deployment.wait(lambda: shared_run.stream()["try_number"] > stream_try, 120,
                                   "the cleared stream to start again")
    finally:
        writer.stop()
    after = {ti["map_index"]: ti["try_number"] for ti in shared_run.task_instances("snapshot")}
    assert after == {**before, 1: before[1] + 1}, (before, after)
    shared_run.wait_caught_up()
    assert_no_change_twice(shared_run)


def test_the_run_ends_successfully(shared_run: SharedRun) -> None:
    run = shared_run.deployment.wait_for_run(DAG_ID, shared_run.run_id, STOP_AFTER_IDLE + 180)
    assert run["state"] == "success", shared_run.summary()
    assert {ti["state"] for ti in shared_run.task_instances()} == {"success"}
    summary = shared_run.deployment.api(
        "GET", f"dags/{DAG_ID}/dagRuns/{shared_run.run_id}/taskInstances/stream/xcomEntries/return_value")["value"]
    assert summary["stopped"] == f"idle for {STOP_AFTER_IDLE} s" and summary["deferrals"] >= 1, summary
    assert shared_run.differences() == []
    assert_no_change_twice(shared_run)
