"""A stream batch over many tables, per table: the first batch (every table's changelog created) and the
batches after it (appends to existing changelogs), the code on main (``--old``) against this branch
(``--new``), in one run (issue 27).

    .venv/bin/python -m bench.stream_batch_per_changelog [--old main] [--new HEAD] [--tables 1000] [--repeat 3]
        [--old-what "..."] [--new-what "..."]

No server: as in ``bench.stream_commit_spread`` (the same lake and change rows, ``bench.common.lake_batches``),
each child process captures ``--tables`` tables of 8 columns and commits through ``StreamStore.commit`` a
first batch and ``--batches`` more, each of ``--rows`` inserts spread evenly over every table (rows made by
``lake.changelog.changes_table`` before the commit, so the figures are the Delta commits and the checkpoint:
a stream makes its rows on the same pool). Timed per batch: ``StreamStore.commit``'s wall time and the
process's CPU time, per table. Each version runs in a subprocess importing its own tree; old and new
alternate, the order flipping every round. Writes the section "Stream batches over many changelogs" of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.lake_batches import captured_schemas, insert_changes, offset_at, timed_commit
from bench.common.two_commits import (
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
SECTION = "Stream batches over many changelogs"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = old_new_parser(__doc__)
    parser.add_argument("--tables", type=int, default=1000, help="captured tables, every one in every batch")
    parser.add_argument("--rows", type=int, default=20000, help="change rows of a batch")
    parser.add_argument("--batches", type=int, default=3, help="batches after the first")
    parser.add_argument("--old-what", default="the code before", help="what the old commit does, for the report")
    parser.add_argument("--new-what", default="this branch", help="what the new commit does, for the report")
    return parser.parse_args(argv)


def child_main(spec: dict[str, Any]) -> int:
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    check_tree(spec)
    schemas = captured_schemas(spec["tables"])
    tables = list(schemas)
    store = StreamStore(Lake.at(spec["lake"]))
    checkpoint = Checkpoint(0, offset_at(0), schemas)
    store.commit(checkpoint, {})
    batches = []
    for _ in range(1 + spec["batches"]):
        changes = insert_changes(schemas, tables, spec["rows"], checkpoint.seq + 1)
        cpu = time.process_time()
        wall = timed_commit(store, checkpoint, changes)
        cpu = time.process_time() - cpu
        batches.append({"wall_ms": wall * 1000 / len(tables), "cpu_ms": cpu * 1000 / len(tables)})
    print("RESULT " + json.dumps(batches), flush=True)
    return 0


def measure(args: argparse.Namespace) -> tuple[dict[str, list[list[dict[str, float]]]], dict[str, str]]:
    commits = {"old": short_commit(args.old), "new": short_commit(args.new)}
    runs: dict[str, list[list[dict[str, float]]]] = {}
    with worktrees(commits) as trees, tempfile.TemporaryDirectory(prefix="bench-stream-changelogs-") as home:
        for attempt, label, tree in alternate(trees, args.repeat):
            spec = {"tables": args.tables, "rows": args.rows, "batches": args.batches,
                    "lake": f"{home}/{label}-{attempt}"}
            batches = run_child(tree, spec, "", __file__)
            runs.setdefault(label, []).append(batches)
            print(f"{label} run {attempt + 1}: " + ", ".join(f"{b['wall_ms']:.2f}/{b['cpu_ms']:.2f}" for b in batches)
                  + " ms a table (wall/CPU)", flush=True)
    return runs, commits


def report(runs: dict[str, list[list[dict[str, float]]]], commits: dict[str, str], args: argparse.Namespace,
           load: tuple[float, float]) -> str:
    def median(label: str, key: str, first: bool) -> float:
        return statistics.median(b[key] for run in runs[label] for b in (run[:1] if first else run[1:]))

    lines = [
        *old_new_heading(SECTION, "bench.stream_batch_per_changelog", args.repeat,
                         f"{commits['old']} ({args.old_what})", f"{commits['new']} ({args.new_what})", load),
        f"{args.tables:,} captured tables, every batch {args.rows:,} inserts (8 columns) spread evenly over all of "
        f"them: the first batch creates every changelog, the {args.batches} after it append to them. "
        f"`StreamStore.commit` per table (its wall time over the tables, the process's CPU time over the tables), "
        f"the median over the runs (and over the batches after the first):", "",
        "| batch | old wall, ms | new wall, ms | old / new | old CPU, ms | new CPU, ms | old / new |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, first in (("first (creates)", True), ("after it (appends)", False)):
        wall = median("old", "wall_ms", first), median("new", "wall_ms", first)
        cpu = median("old", "cpu_ms", first), median("new", "cpu_ms", first)
        lines.append(f"| {name} | {wall[0]:.2f} | {wall[1]:.2f} | {wall[0] / wall[1]:.2f}x | {cpu[0]:.2f} | "
                     f"{cpu[1]:.2f} | {cpu[0] / cpu[1]:.2f}x |")
    lines += ["", "Per run, wall/CPU ms a table of each batch: " + "; ".join(
        f"{label}: " + ", ".join(" ".join(f"{b['wall_ms']:.2f}/{b['cpu_ms']:.2f}" for b in run) for run in rs)
        for label, rs in runs.items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return old_against_new(arguments(argv), child_main, measure, report)


if __name__ == "__main__":
    sys.exit(main())
