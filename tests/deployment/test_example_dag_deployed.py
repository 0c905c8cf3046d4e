"""The example DAG under Airflow's real components (one deployment and one DAG run shared by the tests,
in this order): the mapped snapshot batches run in parallel without clashing, the UI shows the run
with its labelled batches and the deferred stream, the stream is woken by the real triggerer and
survives the triggerer's ``kill -9``, one cleared batch reruns alone, and the run ends successfully."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.deployment.conftest import SharedRun


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
        if ti["task_id"] != "stream":
            assert (ti["state"], ti["try_number"]) == ("success", 1), ti
    stream = next(ti for ti in tis if ti["task_id"] == "stream")
    assert stream["state"] == "deferred" and stream["try_number"] == 1, stream
    at_once = most_at_once(snapshots)
    print(f"\nsnapshot tasks running at once: {at_once} (of {len(snapshots)}); "
          + ", ".join(f"{ti['rendered_map_index']}: {ti['start_date']} - {ti['end_date']}" for ti in snapshots))
    assert at_once >= 2
    assert shared_run.differences() == []
