"""A long-running stream's cost per table and batch, against the Delta checkpoint interval of its tables.

The other stream benchmarks start from fresh lakes, whose changelogs hold a commit or two; a stream that has
run for a while commits to changelogs with many log entries since their last Delta checkpoint. delta-rs
reads every entry since that checkpoint again whenever it loads a version: the stream's refresh before each
commit (``StreamStore._changelog``), the application's transaction version (``TableVersion.applied``), the
commit's own conflict check and the MERGE's load of the current table. So a table's cost per batch grows
with its commits since the checkpoint, up to ``MaintenancePolicy.checkpoint_interval`` of them, and a stream
over many tables pays that for each table a batch touches. A checkpoint has a cost of its own, which grows with
the table: it holds every file and every tombstone kept (``delta.deletedFileRetentionDuration``, eight days by
the policy), and compaction leaves a tombstone for each small file the stream appended. So the second part
measures writing a checkpoint of a table with ``--tombstones`` tombstones.

No server: like ``bench.stream_commit_spread``, each run builds a lake of ``--tables`` captured tables (8
columns) and drives it as the stream runner does, through the engine's own parts: ``--batches`` batches of
``--rows`` inserts spread over every table, each ``StreamStore.commit`` followed by ``TableUpkeep`` (its
compaction, vacuum and checkpoints, with the policy of the interval measured), and every ``--merge-every``
batches a MERGE round (``StateMerger.merge``) with the upkeep of the current tables. Each interval of
``--intervals`` runs ``--repeat`` times in a child process of its own, the intervals alternating. Figures: per
table and batch, the commit (with its upkeep) over the last half of the batches (steady), the MERGE round per
table over the same half, and the whole run's wall time. Writes the section "A long-running stream: the
checkpoint interval" of ``bench/RESULTS.md``.

    .venv/bin/python -m bench.checkpoint_interval [--tables 10] [--batches 200] [--intervals 100,20] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.lake_batches import captured_schemas, insert_changes, offset_at, timed_commit
from bench.common.measure import machine, scratch_dir
from bench.common.results import write_sections
from bench.common.two_commits import alternate, run_child

ROOT = Path(__file__).resolve().parents[1]
SECTION = "A long-running stream: the checkpoint interval"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=10, help="captured tables, every batch touches all")
    parser.add_argument("--batches", type=int, default=200, help="stream batches of a run")
    parser.add_argument("--rows", type=int, default=200, help="inserts a batch, spread over the tables")
    parser.add_argument("--merge-every", type=int, default=10, help="batches between two MERGE rounds")
    parser.add_argument("--intervals", default="100,20", help="checkpoint intervals to compare")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each interval")
    parser.add_argument("--tombstones", default="1000,10000", help="tombstones of the checkpoint-cost tables")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def child_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One run: the lake driven as the stream runner drives it, with the interval's maintenance policy."""
    from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
    from airflow_provider_mysqlcdc.engine.stream.table_upkeep import TableUpkeep
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.maintenance import MaintenancePolicy
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    lake = Lake.at(spec["lake"])
    schemas = captured_schemas(spec["tables"])
    tables = list(schemas)
    store, merger = StreamStore(lake), StateMerger(lake, None)  # integer keys: no server for their order
    upkeep = TableUpkeep(lake, MaintenancePolicy(checkpoint_interval=spec["interval"]))
    checkpoint = Checkpoint(0, offset_at(0), schemas)
    store.commit(checkpoint, {})
    commits, merges = [], []
    started = time.perf_counter()
    for batch in range(1, spec["batches"] + 1):
        changes = insert_changes(schemas, tables, spec["rows"], batch)
        began = time.perf_counter()
        timed_commit(store, checkpoint, changes)
        upkeep.changelogs_committed(tables)
        commits.append(time.perf_counter() - began)
        if batch % spec["merge_every"] == 0:
            began, before = time.perf_counter(), checkpoint.merged_seq
            merged = merger.merge(checkpoint)
            if checkpoint.merged_seq != before:  # as the runner does: the checkpoint says what was merged
                store.commit(checkpoint, {})
            upkeep.current_committed(merged)
            merges.append((batch, time.perf_counter() - began))
    wall = time.perf_counter() - started
    half = spec["batches"] // 2
    return {"commit_ms": statistics.mean(commits[half:]) * 1000 / len(tables),
            "merge_ms": statistics.mean(s for b, s in merges if b > half) * 1000 / len(tables),
            "wall_s": wall}


def checkpoint_cost(path: str, tombstones: int) -> dict[str, float]:
    """Seconds to write a checkpoint of a table whose log holds ``tombstones`` removed files (appended 100 a
    commit, then compacted into one), and to load the table from it."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction

    rows = pa.table({"id": pa.array(range(5), pa.int64())})
    write_deltalake(path, rows, mode="overwrite", configuration={"delta.checkpointInterval": "1000000"})
    table = DeltaTable(path)
    for _ in range(tombstones // 100):
        adds = []
        for _ in range(100):
            name = f"part-{uuid.uuid4()}.parquet"
            pq.write_table(rows, f"{path}/{name}")
            adds.append(AddAction(name, os.path.getsize(f"{path}/{name}"), {}, int(time.time() * 1000), True, None))
        table.create_write_transaction(adds, mode="append", schema=table.schema())
        table.update_incremental()
    table.optimize.compact()
    table.update_incremental()
    began = time.perf_counter()
    table.create_checkpoint()
    written = time.perf_counter() - began
    began = time.perf_counter()
    DeltaTable(path)
    return {"checkpoint_ms": written * 1000, "load_ms": (time.perf_counter() - began) * 1000}


def measure(args: argparse.Namespace) -> dict[int, list[dict[str, Any]]]:
    intervals = [int(i) for i in args.intervals.split(",")]
    home = scratch_dir("bench-long-stream-")
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in intervals}
    for round_, _, interval in alternate({str(i): i for i in intervals}, args.repeat):
        spec = {"lake": f"{home}/lake-{interval}-{round_}", "tables": args.tables, "batches": args.batches,
                "rows": args.rows, "merge_every": args.merge_every, "interval": interval}
        result = run_child(ROOT, spec, "", script=__file__)  # no server: no password
        print(f"interval {interval}: {result}", flush=True)
        runs[interval].append(result)
    return runs


def report(runs: dict[int, list[dict[str, Any]]], costs: dict[int, dict[str, float]], args: argparse.Namespace,
           load: tuple[float, float]) -> str:
    facts = ", ".join(f"{k} {v}" for k, v in machine("none").items() if k != "server")
    base = next(iter(runs))

    def median(interval: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[interval])

    lines = [f"## {SECTION}", "",
             f"Written by `.venv/bin/python -m bench.checkpoint_interval --tables {args.tables} --batches "
             f"{args.batches} --rows {args.rows} --intervals {args.intervals} --repeat {args.repeat}` (not by "
             f"`bench.peers`). {time.strftime('%Y-%m-%d')}; {facts}. Load average {load[0]:.1f} at the start, "
             f"{load[1]:.1f} at the end. No server: {args.tables} tables, {args.batches} stream batches each "
             f"touching every table ({args.rows} inserts a batch), each commit followed by the stream's upkeep, a "
             f"MERGE round every {args.merge_every} batches; the intervals alternate, each run a process of its own.",
             "",
             "| checkpoint interval | commit and upkeep, ms a table and batch | MERGE round, ms a table | run, s "
             f"| against {base} |",
             "|---|---|---|---|---|"]
    for interval in runs:
        lines.append(f"| {interval} | {median(interval, 'commit_ms'):.2f} | {median(interval, 'merge_ms'):.2f} | "
                     f"{median(interval, 'wall_s'):.1f} | {median(base, 'wall_s') / median(interval, 'wall_s'):.2f}x |")
    lines += ["", "Medians over the runs of the last half of each run's batches; each run: " + "; ".join(
        f"{i}: " + ", ".join(f"{r['commit_ms']:.2f}/{r['merge_ms']:.2f} ms, {r['wall_s']:.1f} s" for r in rs)
        for i, rs in runs.items()) + ".",
        "", "A checkpoint's cost against the tombstones it holds (one table, each count once), and what it adds to "
        "each commit at each interval measured:", "",
        "| tombstones | checkpoint write, ms | table load from it, ms | "
        + " | ".join(f"per commit at {i}, ms" for i in runs) + " |",
        "|---|---|---|" + "---|" * len(runs)]
    for count, cost in costs.items():
        lines.append(f"| {count:,} | {cost['checkpoint_ms']:.0f} | {cost['load_ms']:.0f} | "
                     + " | ".join(f"{cost['checkpoint_ms'] / i:.1f}" for i in runs) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.child:
        print("RESULT " + json.dumps(child_run(json.loads(args.child))), flush=True)
        return 0
    start_load = os.getloadavg()[0]
    runs = measure(args)
    home = scratch_dir("bench-tombstones-")
    costs = {n: checkpoint_cost(f"{home}/t{n}", n) for n in (int(t) for t in args.tombstones.split(","))}
    text = report(runs, costs, args, (start_load, os.getloadavg()[0]))
    print(text)
    write_sections(ROOT / "bench" / "RESULTS.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
