"""One MERGE round over many small changed tables (``StateMerger.merge``, what the stream runs every
``merge_interval_seconds`` and as it stops), the code on main (``--old``) against this branch (``--new``),
in one run (issue 27).

    .venv/bin/python -m bench.merge_round [--old main] [--new HEAD] [--tables 300] [--repeat 3] [--port 33217]

A throwaway MariaDB with ``--tables`` tables of 1,000-20,000 rows (``bench.many_tables``'s table), each
snapshotted without Spark by ``tests.replica`` (the engine functions the Spark job runs), then per table 18
single-row updates, an insert and a delete streamed into the changelogs, not merged: ~38 changelog rows a
table. That lake is written once, by this checkout; each child process copies it and times one
``StateMerger.merge`` over it: its wall time and the process's CPU time, per table. Each version runs in a
subprocess importing its own tree; old and new alternate, the order flipping every round. Writes the section
"MERGE round over many small tables" of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.server import LOAD_ANYWHERE, TABLE_ANYWHERE, throwaway_server
from bench.common.two_commits import (
    PASSWORD_ENV,
    alternate,
    check_tree,
    old_against_new,
    old_new_heading,
    old_new_parser,
    run_child,
    short_commit,
    worktrees,
)

ROOT = Path(__file__).resolve().parents[1]
SECTION = "MERGE round over many small tables"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = old_new_parser(__doc__)
    parser.add_argument("--tables", type=int, default=300, help="tables, every one changed")
    parser.add_argument("--port", type=int, default=33217)
    return parser.parse_args(argv)


def child_main(spec: dict[str, Any]) -> int:
    import os

    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    check_tree(spec)
    shutil.copytree(spec["source"], spec["lake"])
    lake = Lake.at(spec["lake"])
    checkpoint = StreamStore(lake).read_checkpoint()
    assert checkpoint is not None
    control = ConnectionConfig.from_dict(spec["connection"], os.environ[PASSWORD_ENV]).connect()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        merged = StateMerger(lake, control).merge(checkpoint)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        control.close()
    tables = max(1, len(merged))
    print("RESULT " + json.dumps({"tables": len(merged), "changes": sum(merged.values()),
                                  "wall_ms": wall * 1000 / tables, "cpu_ms": cpu * 1000 / tables}), flush=True)
    return 0


def _lake(server: Any, base: str, count: int) -> tuple[dict[str, Any], str]:
    """The tables loaded, snapshotted and their changes streamed into ``base``; the connection (its dict)."""
    from dev.fixture_lakes import config_of
    from tests import replica

    rnd = random.Random(7)
    tables = [f"many.t_{i:04d}" for i in range(count)]
    with server.admin_connect().cursor() as cur:
        cur.execute("CREATE DATABASE many")
        cur.execute("USE bench")  # the sequence engine's seq_1_to_N tables resolve in any database
        for table in tables:
            cur.execute(TABLE_ANYWHERE.format(table=table))
            cur.execute(LOAD_ANYWHERE.format(table=table, rows=rnd.randint(1_000, 20_000)))
    config = config_of(server)
    for table in tables:
        replica.snapshot(config, base, table, 8096, 2, parts=1)
    replica.stream(config, base, tables, merge=False)  # the stream's checkpoint, nothing to stream yet
    with server.admin_connect().cursor() as cur:
        cur.execute("SET autocommit = 1")
        for table in tables:
            for _ in range(18):
                cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = %s", (rnd.randint(1, 1_000),))
            cur.execute(f"INSERT INTO {table} (customer, sku, amount, created, updated) "
                        "VALUES (1, 'x', 1, NOW(), NOW())")
            cur.execute(f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1_001, 1_500),))
    replica.stream(config, base, tables, merge=False)
    return config.to_dict(), server.cdc_password


def measure(args: argparse.Namespace) -> tuple[dict[str, list[dict[str, float]]], dict[str, str]]:
    commits = {"old": short_commit(args.old), "new": short_commit(args.new)}
    runs: dict[str, list[dict[str, float]]] = {}
    with (worktrees(commits) as trees, tempfile.TemporaryDirectory(prefix="bench-merge-round-") as home,
          throwaway_server(args.port) as server):
        connection, password = _lake(server, f"{home}/source", args.tables)
        for attempt, label, tree in alternate(trees, args.repeat):
            spec = {"connection": connection, "source": f"{home}/source", "lake": f"{home}/{label}-{attempt}"}
            run = run_child(tree, spec, password, __file__)
            runs.setdefault(label, []).append(run)
            print(f"{label} run {attempt + 1}: {run['wall_ms']:.1f}/{run['cpu_ms']:.1f} ms a table (wall/CPU) over "
                  f"{run['tables']} tables, {run['changes']} changes", flush=True)
    return runs, commits


def report(runs: dict[str, list[dict[str, float]]], commits: dict[str, str], args: argparse.Namespace,
           load: tuple[float, float]) -> str:
    def median(label: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[label])

    changes = runs["new"][0]["changes"]
    lines = [
        *old_new_heading(SECTION, "bench.merge_round", args.repeat, f"{commits['old']} (main)",
                         f"{commits['new']} (this branch)", load),
        f"{args.tables:,} tables of 1,000-20,000 rows snapshotted without Spark, {changes:,} changelog rows "
        f"streamed into them (18 updates, an insert and a delete a table), then one `StateMerger.merge` over the "
        f"lake's copy: its wall time over the tables and the process's CPU time over the tables, the median over "
        f"the runs:", "",
        "| | old, ms a table | new, ms a table | old / new | each run, old; new |",
        "|---|---|---|---|---|",
    ]
    for name, key in (("wall", "wall_ms"), ("CPU", "cpu_ms")):
        old, new = median("old", key), median("new", key)
        each = "; ".join(", ".join(f"{run[key]:.1f}" for run in runs[label]) for label in ("old", "new"))
        lines.append(f"| {name} | {old:.1f} | {new:.1f} | {old / new:.2f}x | {each} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return old_against_new(arguments(argv), child_main, measure, report)


if __name__ == "__main__":
    sys.exit(main())
