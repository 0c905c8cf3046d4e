"""A stream batch's commit with its changes spread over 1, 20 and 200 tables: the code on main
(``--old``, one Delta commit after another, every schema in the checkpoint, a MERGE that opens every
table) against this branch (``--new``, the commits at once on a bounded pool, schemas as documents, a
MERGE of the changed tables only), in one run (issue 27).

    .venv/bin/python -m bench.stream_commit_spread [--old main] [--new HEAD] [--repeat 3]

No server: each child process builds a lake of ``--tables`` captured tables (8 columns each) without
MariaDB, through ``StreamStore.commit`` as the stream calls it (change rows made by
``lake.changelog.changes_table``): a first checkpoint, one batch touching every table (creates the
changelogs) and a MERGE (creates the current tables). Then, for each spread (1, 20, 200 tables), it
times ``--batches`` batches of ``--rows`` change rows spread evenly over that many tables (the time of
``StreamStore.commit``: the Delta commits and the checkpoint), then one MERGE (``StateMerger.merge``, as
the stream's MERGE interval calls it). Separately, the checkpoint's size and a batch touching one table
with ``--wide`` tables captured (no MERGE there).

Each version runs in a subprocess importing its own tree (a ``git worktree`` of its commit, made in a
temporary directory: ``bench.common.two_commits.worktrees``); old and new alternate, the order flipping every
round. The new version runs also with 4 and 16 commit threads (its default is 8). Writes the section
"Stream commits across many tables" of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
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
SECTION = "Stream commits across many tables"
SPREADS = (1, 20, 200)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = old_new_parser(__doc__)
    parser.add_argument("--tables", type=int, default=200, help="captured tables of the spread runs")
    parser.add_argument("--wide", type=int, default=1000, help="captured tables of the checkpoint-size run")
    parser.add_argument("--rows", type=int, default=4000, help="change rows of a batch")
    parser.add_argument("--batches", type=int, default=5, help="timed batches per spread")
    return parser.parse_args(argv)


# -- in the child (imports the tree's package) -------------------------------------------------------


def _store(lake: Any, threads: int | None) -> Any:
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    return StreamStore(lake) if threads is None else StreamStore(lake, threads=threads)


def child_spread(spec: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.handle import Lake

    lake = Lake.at(spec["lake"])
    schemas = captured_schemas(spec["tables"])
    tables = list(schemas)
    store, merger = _store(lake, spec["threads"]), StateMerger(lake, None)  # integer keys: no server for their order
    checkpoint = Checkpoint(0, offset_at(0), schemas)
    store.commit(checkpoint, {})
    timed_commit(store, checkpoint, insert_changes(schemas, tables, len(tables), 1))  # every changelog created
    merger.merge(checkpoint)  # every current table created
    result: dict[str, Any] = {}
    for spread in spec["spreads"]:
        commits = [timed_commit(store, checkpoint,
                                insert_changes(schemas, tables[:spread], spec["rows"], checkpoint.seq + 1))
                   for _ in range(spec["batches"])]
        started = time.perf_counter()
        merger.merge(checkpoint)
        result[str(spread)] = {"commit_ms": [c * 1000 for c in commits],
                               "merge_s": time.perf_counter() - started}
    return result


def child_wide(spec: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.handle import Lake

    lake = Lake.at(spec["lake"])
    schemas = captured_schemas(spec["tables"])
    store = _store(lake, spec["threads"])
    checkpoint = Checkpoint(0, offset_at(0), schemas)
    store.commit(checkpoint, {})
    one = list(schemas)[:1]
    timed_commit(store, checkpoint, insert_changes(schemas, one, spec["rows"], 1))  # the changelog created
    commits = [timed_commit(store, checkpoint, insert_changes(schemas, one, spec["rows"], checkpoint.seq + 1))
               for _ in range(spec["batches"])]
    return {"commit_ms": [c * 1000 for c in commits], "checkpoint_bytes": os.path.getsize(lake.checkpoint)}


def child_main(spec: dict[str, Any]) -> int:
    check_tree(spec)
    result = (child_spread if spec["part"] == "spread" else child_wide)(spec)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# -- in the parent ----------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    commits = {"old": short_commit(args.old), "new": short_commit(args.new)}
    runs: dict[str, list[dict[str, Any]]] = {}
    base = {"rows": args.rows, "batches": args.batches}
    with worktrees(commits) as trees, tempfile.TemporaryDirectory(prefix="bench-stream-commits-") as home:
        for attempt, label, tree in alternate(trees, args.repeat):
            variants: list[tuple[str, int | None]] = [(label, None)]
            if label == "new":
                variants += [("new, 4 threads", 4), ("new, 16 threads", 16)]
            for name, threads in variants:
                where = f"{home}/{name.replace(' ', '').replace(',', '-')}-{attempt}"
                spread = run_child(tree, {**base, "part": "spread", "tables": args.tables, "spreads": list(SPREADS),
                                          "threads": threads, "lake": where + "-spread"}, "", __file__)
                wide = run_child(tree, {**base, "part": "wide", "tables": args.wide, "threads": threads,
                                        "lake": where + "-wide"}, "", __file__)
                runs.setdefault(name, []).append({"spread": spread, "wide": wide})
                print(f"{name} run {attempt + 1}: " + ", ".join(
                    f"{s} tables {statistics.median(spread[str(s)]['commit_ms']):.0f} ms" for s in SPREADS), flush=True)
    return runs, commits


def report(runs: dict[str, list[dict[str, Any]]], commits: dict[str, str], args: argparse.Namespace,
           load: tuple[float, float]) -> str:
    def commit_ms(name: str, spread: int) -> float:
        return statistics.median(statistics.median(r["spread"][str(spread)]["commit_ms"]) for r in runs[name])

    def merge_s(name: str, spread: int) -> float:
        return statistics.median(r["spread"][str(spread)]["merge_s"] for r in runs[name])

    def wide(name: str, key: str) -> float:
        return statistics.median(statistics.median(v) if isinstance(v := r["wide"][key], list) else v
                                 for r in runs[name])

    lines = [
        *old_new_heading(SECTION, "bench.stream_commit_spread", args.repeat,
                         f"{commits['old']} (main: one Delta commit after another, every schema in the checkpoint, "
                         f"every table opened by a MERGE)",
                         f"{commits['new']} (commits at once on 8 threads, schemas as documents named by the "
                         f"checkpoint, a MERGE of the changed tables only)", load),
        f"A batch of {args.rows:,} change rows (inserts, 8 columns) spread evenly over 1, 20 or 200 of "
        f"{args.tables} captured tables whose changelogs and current tables exist; the median over "
        f"{args.batches} batches per run of `StreamStore.commit` (the Delta commits and the checkpoint), then "
        f"the MERGE after those batches (`StateMerger.merge`, as each `merge_interval_seconds`).", "",
        "| batch spread over | old commit, ms | new commit, ms | old / new | old MERGE, s | new MERGE, s | old / new |",
        "|---|---|---|---|---|---|---|",
    ]
    for spread in SPREADS:
        old_c, new_c, old_m, new_m = commit_ms("old", spread), commit_ms("new", spread), merge_s("old", spread), \
            merge_s("new", spread)
        lines.append(f"| {spread} {'table' if spread == 1 else 'tables'} | {old_c:,.0f} | {new_c:,.0f} | "
                     f"{old_c / new_c:.2f}x | {old_m:.2f} | {new_m:.2f} | {old_m / new_m:.2f}x |")
    lines += ["", "The new version's commit threads (its default is 8), same batches:", "",
              "| threads | 1 table, ms | 20 tables, ms | 200 tables, ms |", "|---|---|---|---|"]
    for name, threads in (("new, 4 threads", 4), ("new", 8), ("new, 16 threads", 16)):
        lines.append(f"| {threads} | " + " | ".join(f"{commit_ms(name, s):,.0f}" for s in SPREADS) + " |")
    lines += ["", f"{args.wide:,} captured tables, a batch of {args.rows:,} rows of one of them:", "",
              "| | old | new | old / new |", "|---|---|---|---|"]
    for label, key, fmt in (("checkpoint, bytes", "checkpoint_bytes", ",.0f"), ("commit, ms", "commit_ms", ",.0f")):
        old_v, new_v = wide("old", key), wide("new", key)
        lines.append(f"| {label} | {old_v:{fmt}} | {new_v:{fmt}} | {old_v / new_v:.2f}x |")
    per_run = "; ".join(f"{name}: " + ", ".join(
        "/".join(f"{statistics.median(r['spread'][str(s)]['commit_ms']):.0f}" for s in SPREADS) for r in rs)
        for name, rs in runs.items())
    lines += ["", f"Per run, median commit ms at 1/20/200 tables: {per_run}.", "",
              "Where the time goes: the old checkpoint holds every captured table's schema, so each batch wrote all "
              "of them (the one-table rows: the checkpoint is most of the old commit, and grows with the tables "
              "captured); the old MERGE opened every table's current and changelog Delta tables, changed or not. "
              "A table's Delta commit (its log loaded, a Parquet file, a log entry) is work in delta-rs without the "
              "GIL, so the commits of a batch overlap on the pool, as far as the cores (shared with other jobs "
              "here) and, on an object store, the round trips allow. A MERGE of a table with changes costs the same in "
              "both."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return old_against_new(arguments(argv), child_main, measure, report)


if __name__ == "__main__":
    sys.exit(main())
