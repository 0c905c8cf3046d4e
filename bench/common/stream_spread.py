"""The stream over many tables against one table, steady state apart from the start, before against after
(``bench.many_tables --stream-only``, and the stream rows of its full run).

The stream's cost over many tables has two parts that one figure over a short backlog mixes up: the start
(opening the lake, the first checkpoint, the first batch: paid once a run) and the steady streaming (paid
per event). So, per layout (``--tables`` tables with the writes spread over ``--touch`` of them, or all
in one table) and per version of the code (a ``git worktree`` each, in processes of their own, as
``bench.common.two_commits`` runs them):

- start: a fresh lake, the stream opened at a fixed offset (``specific-offset``: no snapshot needed), one
  transaction updating a row of each touched table to stream: the seconds of ``StreamRunner.open`` and
  from there to its first commit; then the seconds of opening that lake again (a restarted task);
- steady: ``--events`` row updates in transactions of 1,000 rows (spread evenly over the touched tables,
  or all in the one table), written while nothing streams, then streamed from that lake's checkpoint.
  Steady row events/s are the updates over the time from the end of ``open`` to the last commit (each
  commit is reported when it is in the lake); the overall figure counts from the call to open.

Every child streams the same binlog (the backlog is written once per layout); versions alternate.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.two_commits import check_tree, run_child

PER_TRANSACTION = 1000
"""Row updates per transaction of the backlog."""


# -- in the child (imports the tree's package) -------------------------------------------------------


class _Commits:
    """A stream observer that notes when each commit was reported and how many binlog events it read."""

    def __init__(self) -> None:
        self.times: list[tuple[float, int]] = []

    def committed(self, commit: Any) -> None:
        self.times.append((time.perf_counter(), commit.events_read))

    def caught_up(self) -> None:
        pass

    def merged(self, merge: Any) -> None:
        pass


def child_stream(spec: dict[str, Any]) -> dict[str, Any]:
    """One stream pass over ``spec``'s lake until caught up: open's seconds and each commit's time and events."""
    from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
    from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner

    config = ConnectionConfig.from_dict(spec["connection"], os.environ["MYSQL_CDC_PASSWORD"])
    options = StreamOptions(spec["lake"], tuple(TableId.parse(t) for t in spec["tables"]), StartupMode.SPECIFIC,
                            startup_offset=spec["start"])
    commits = _Commits()
    runner, control, progress = StreamRunner(options, config, commits), config.connect(), StreamProgress.start()
    try:
        started = time.perf_counter()
        checkpoint = runner.open(control)
        opened = time.perf_counter()
        runner.catch_up(control, checkpoint, progress)
        runner.lease.release()
    finally:
        control.close()
    return {"open_seconds": opened - started, "commits": [(t - started, events) for t, events in commits.times]}


def child_main(spec: dict[str, Any]) -> int:
    check_tree(spec)
    print("RESULT " + json.dumps(child_stream(spec)), flush=True)
    return 0


# -- in the parent ----------------------------------------------------------------------------------


def write_backlog(server: Any, targets: list[str], events: int, mixed: bool) -> int:
    """``events`` row updates in transactions of ``PER_TRANSACTION`` rows: spread evenly over ``targets``
    (``mixed``), or each in one of them in turn; returns the rows updated."""
    written, turn = 0, 0
    with server.admin_connect().cursor() as cur:
        while written < events:
            cur.execute("BEGIN")
            tables = targets if mixed else [targets[turn % len(targets)]]
            rows = PER_TRANSACTION // len(tables) or 1
            for table in tables:
                low = 1 + written % 900
                cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id BETWEEN %s AND %s", (low, low + rows - 1))
                written += rows
            cur.execute("COMMIT")
            turn += 1
    return written


def _probe(server: Any, targets: list[str]) -> None:
    """One transaction updating one row of each target: what the start's first batch commits."""
    with server.admin_connect().cursor() as cur:
        cur.execute("BEGIN")
        for table in targets:
            cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = 1")
        cur.execute("COMMIT")


def _current_offset(server: Any) -> str:
    with server.admin_connect().cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, position = cur.fetchone()[:2]
    return f"{file}:{position}"


def _steady(commits: list[tuple[float, int]], open_seconds: float, written: int) -> dict[str, Any]:
    """Row updates per second streamed once open (to the last commit) and overall (from the call to open)."""
    last = commits[-1][0] if commits else float("nan")
    return {"open_seconds": open_seconds, "commits": len(commits), "events": sum(e for _, e in commits),
            "steady_events_per_second": written / (last - open_seconds), "events_per_second": written / last}


def measure(server: Any, trees: dict[str, Path], layouts: dict[str, tuple[list[str], list[str], bool]], events: int,
            home: str, connection: dict[str, Any], password: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Per layout (its captured tables, the tables it writes to, and whether a transaction spreads over all of
    them) and tree: the start and the steady figures (``results[layout][tree]``)."""

    results: dict[str, dict[str, dict[str, Any]]] = {}
    for layout, (tables, targets, mixed) in layouts.items():
        start = _current_offset(server)
        _probe(server, targets)
        mine: dict[str, dict[str, Any]] = {label: {} for label in trees}
        spec = {"connection": connection, "tables": tables, "start": start}
        for label, tree in _alternating(trees, 0):
            lake = f"{home}/stream-{layout}-{label}"
            first = run_child(tree, {**spec, "lake": lake}, password, script=__file__)
            mine[label]["lake"] = lake
            mine[label]["start_seconds"] = first["commits"][0][0] if first["commits"] else None
            mine[label]["first_open_seconds"] = first["open_seconds"]
        written = write_backlog(server, targets, events, mixed)
        for label, tree in _alternating(trees, 1):
            run = run_child(tree, {**spec, "lake": mine[label]["lake"]}, password, script=__file__)
            mine[label].update(_steady(run["commits"], run["open_seconds"], written), written=written)
            print(f"{layout} {label}: {json.dumps(mine[label])}", flush=True)
        results[layout] = mine
    return results


def _alternating(trees: dict[str, Path], flip: int) -> Iterator[tuple[str, Path]]:
    labels = list(trees)
    yield from ((label, trees[label]) for label in (labels if flip % 2 == 0 else labels[::-1]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child_main(json.loads(sys.argv[2])))
    raise SystemExit("run through bench.many_tables --stream-only")
