"""What moving the lake to Delta Lake cost the stream and the snapshot: the code before the move (the
Parquet + JSON layout, ``--old``, default commit 1b5b3a3) against the code after it (``--new``, default
HEAD), on the same data and the same server, in one run. The issue asks for no more than 10% less
throughput; this measures the baseline in the same run rather than quoting an older figure.

    .venv/bin/python -m bench.delta_vs_parquet_layout [--events 400000] [--rows 1000000] [--repeat 5]

- stream: ``--events`` row events (updates of 10,000-row transactions, one in ten an insert, one in ten
  a delete: ``bench.common.server.write_events``) streamed from a checkpoint at their start to the binlog's end
  into a fresh lake, through the stream runner's catch-up path (``StreamRunner.open`` + ``catch_up``,
  default batch limits): old, one Parquet file per table and batch plus the checkpoint JSON; new, one
  Delta append per table and batch plus the checkpoint, and the table maintenance the runner calls after
  its commits (``engine/stream/table_upkeep.py``). Timed: ``catch_up``; the time inside ``StreamStore.commit``
  and (new) ``maintain`` is taken apart by wrapping them.
- snapshot: a ``--rows``-row table (~160 B a row, ``bench.common.server.load_orders``) cut by the split's
  ``split_table`` (the same code in both) into chunks and ``group_batches`` into batches of
  ``--rows-per-batch`` rows; each batch's chunks go, in two contiguous parts as the Spark job's two
  tasks would get them (here one after the other, in one process, without Spark), through that
  version's ``engine/snapshot/snapshot_batch.write_chunks`` (read from the server, Parquet file per part), then
  ``commit_batch`` (old: the manifest JSON; new: one Delta transaction replacing the batch's partition,
  then the manifest). Timed per batch: the writes (the chunk reads included), the time inside the
  Parquet writer (each chunk's ``write_seconds``), and the commit.

Each version runs in a subprocess of its own with ``PYTHONPATH`` set to a ``git worktree`` of its
commit (made in a temporary directory and removed at the end), so it imports its own package. Old and
new alternate (the order flips every round) ``--repeat`` times each; the report gives medians and the
ratio new/old of the medians. Starts a throwaway MariaDB (binlog on); about 6 minutes on 2 cores.
Writes the section "Delta lake: throughput before/after" of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.two_commits import PASSWORD_ENV, alternate, check_tree, run_child, short_commit, worktrees

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Delta lake: throughput before/after"
EVENTS_TABLE_ROWS = 200_000
READERS_PER_BATCH = 2


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default="1b5b3a3", help="the commit before the Delta lake")
    parser.add_argument("--new", default="HEAD", help="the commit with the Delta lake")
    parser.add_argument("--events", type=int, default=400_000, help="row events for the stream")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the snapshot table")
    parser.add_argument("--rows-per-batch", type=int, default=260_000,
                        help="rows of a snapshot batch (chunks of --chunk-size rows: 32 chunks)")
    parser.add_argument("--chunk-size", type=int, default=8096, help="rows of a snapshot chunk")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each version, each part")
    parser.add_argument("--only", default="stream,snapshot", help="comma-separated: stream, snapshot")
    parser.add_argument("--port", type=int, default=33094)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    return parser.parse_args(argv)


# -- in the child process, importing one version's package ------------------------------------------


def _timed(owner: Any, name: str, spent: dict[str, float], key: str) -> None:
    """Wrap ``owner.name`` so that the seconds spent in it add up in ``spent[key]``."""
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - started

    setattr(owner, name, wrapper)


def child_stream(spec: dict[str, Any], config: Any) -> dict[str, Any]:
    """The stream runner's catch-up from ``spec["start"]`` to the binlog's end into ``spec["lake"]``."""
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
    from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
    from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
    from airflow_provider_mysqlcdc.lake.write import stream_commit

    spent = {"commit": 0.0, "maintain": 0.0}
    _timed(stream_commit.StreamStore, "commit", spent, "commit")
    with contextlib.suppress(ImportError):  # the table maintenance exists in the Delta version only
        from airflow_provider_mysqlcdc.engine.stream import table_upkeep

        _timed(table_upkeep, "maintain", spent, "maintain")
    offset = BinlogOffset.from_dict(spec["start"])
    options = StreamOptions(spec["lake"], (TableId.parse(spec["table"]),), StartupMode.SPECIFIC,
                            startup_offset=f"{offset.file}:{offset.position}")
    runner, control, progress = StreamRunner(options, config), config.connect(), StreamProgress.start()
    try:
        started = time.perf_counter()
        checkpoint = runner.open(control)
        opened = time.perf_counter()
        runner.catch_up(control, checkpoint, progress)
        seconds = time.perf_counter() - opened
        merge_seconds = None
        with contextlib.suppress(ImportError):  # the Delta version merges into the current state at stop
            from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
            from airflow_provider_mysqlcdc.lake.handle import Lake

            merging = time.perf_counter()
            StateMerger(Lake.at(spec["lake"]), control).merge(checkpoint)
            merge_seconds = time.perf_counter() - merging
    finally:
        control.close()
    return {"seconds": seconds, "open_seconds": opened - started, "change_rows": progress.rows,
            "batches": progress.batches, "merge_seconds": merge_seconds,
            **{f"{k}_seconds": v for k, v in spent.items()}}


def _field(result: Any, name: str) -> Any:
    """A chunk's result: a dict in the old version, a ``ChunkResult`` in the new one."""
    return result[name] if isinstance(result, dict) else getattr(result, name)


def child_snapshot(spec: dict[str, Any], config: Any) -> dict[str, Any]:
    """Every batch of the table's plan through ``write_chunks`` (two parts) and ``commit_batch``."""
    from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
    from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_chunks
    from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, SnapshotStore, group_batches
    from airflow_provider_mysqlcdc.lake.handle import Lake

    control = config.connect()
    try:
        schema = load_table_schema(control, TableId.parse(spec["table"]))
        chunks = split_table(control, schema, spec["chunk_size"])
    finally:
        control.close()
    plan = Plan(schema, chunks, group_batches(schema.id, chunks, max(1, spec["rows_per_batch"] // spec["chunk_size"])))
    store = SnapshotStore(Lake.at(spec["lake"]))
    store.write_plan(plan)
    batches = []
    for batch in plan.batches:
        mine = plan.chunks_of(batch)
        parts = [mine[len(mine) * k // READERS_PER_BATCH: len(mine) * (k + 1) // READERS_PER_BATCH]
                 for k in range(READERS_PER_BATCH)]  # contiguous slices, as Spark's parallelize cuts them
        attempt = uuid.uuid4().hex[:12]
        started = time.perf_counter()
        results = [r for part, part_chunks in enumerate(parts)
                   for r in write_chunks(store, batch, attempt, part, config, schema, part_chunks,
                                         config.server_id.allocate(part))]
        written = time.perf_counter()
        commit_batch(store, batch, attempt, schema, results, written - started)
        committed = time.perf_counter()
        batches.append({"rows": sum(_field(r, "rows") for r in results), "chunks": len(results),
                        "write_seconds": written - started, "commit_seconds": committed - written,
                        "parquet_seconds": sum(_field(r, "write_seconds") for r in results)})
    return {"chunks": len(chunks), "batches": batches, "rows": sum(b["rows"] for b in batches),
            "seconds": sum(b["write_seconds"] + b["commit_seconds"] for b in batches)}


def child_main(spec: dict[str, Any]) -> int:
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig

    check_tree(spec)
    config = ConnectionConfig.from_dict(spec["connection"], os.environ[PASSWORD_ENV])
    result = (child_stream if spec["part"] == "stream" else child_snapshot)(spec, config)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# -- in the parent ----------------------------------------------------------------------------------


def stream_part(trees: dict[str, Path], spec: dict[str, Any], events: int, repeat: int, password: str,
                home: str) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for attempt, label, tree in alternate(trees, repeat):
        result = run_child(tree, {**spec, "part": "stream", "lake": f"{home}/stream-{label}-{attempt}"}, password,
                           __file__)
        result["events"] = events
        result["events_per_second"] = events / result["seconds"]
        runs[label].append(result)
        merge = "-" if result["merge_seconds"] is None else f"{result['merge_seconds']:.1f} s"
        print(f"stream {label} run {attempt + 1}: {result['events_per_second']:,.0f} row events/s "
              f"({result['seconds']:.1f} s, {result['batches']} batches, commit {result['commit_seconds']:.1f} s, "
              f"maintain {result['maintain_seconds']:.1f} s, merge at stop {merge})", flush=True)
    return runs


def snapshot_part(trees: dict[str, Path], spec: dict[str, Any], repeat: int, password: str,
                  home: str) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for attempt, label, tree in alternate(trees, repeat):
        result = run_child(tree, {**spec, "part": "snapshot", "lake": f"{home}/snapshot-{label}-{attempt}"},
                           password, __file__)
        result["rows_per_second"] = result["rows"] / result["seconds"]
        runs[label].append(result)
        commits = ", ".join(f"{b['commit_seconds'] * 1000:.0f}" for b in result["batches"])
        print(f"snapshot {label} run {attempt + 1}: {result['rows_per_second']:,.0f} rows/s "
              f"({result['seconds']:.1f} s; commits {commits} ms)", flush=True)
    return runs


# -- the report --------------------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(value(r) for r in runs)


def _row(label: str, runs: dict[str, list[dict[str, Any]]], value: Callable[[dict[str, Any]], float],
         fmt: str) -> str:
    old, new = _median(runs["old"], value), _median(runs["new"], value)
    return f"| {label} | {old:{fmt}} | {new:{fmt}} | {new / old:.2f} |"


def _per_run(runs: dict[str, list[dict[str, Any]]], value: Callable[[dict[str, Any]], float], fmt: str) -> str:
    return "; ".join(f"{label} " + ", ".join(f"{value(r):{fmt}}" for r in rs) for label, rs in runs.items())


def report(results: dict[str, Any], args: argparse.Namespace, facts: dict[str, Any], commits: dict[str, str],
           load: tuple[float, float]) -> str:
    machine = ", ".join(f"{k} {v}" for k, v in facts.items())
    lines = [
        f"## {SECTION}", "",
        f"Written by `.venv/bin/python -m bench.delta_vs_parquet_layout` (not by `bench.peers`). "
        f"{dt.date.today().isoformat()}, "
        f"{args.repeat} runs of each version, alternating (the order flips every round); {machine}. Old: "
        f"{commits['old']} (Parquet files + JSON manifests and checkpoint); new: {commits['new']} (Delta tables). "
        f"Each version in its own process importing its own tree (a `git worktree` of its commit), on the same "
        f"server and data. Other jobs shared the 2 cores during the run (load average {load[0]:.1f} at its start, "
        f"{load[1]:.1f} at its end); alternating spreads that over both versions, but single runs vary.",
        "",
        "| what | old | new | new / old |", "|---|---|---|---|",
    ]
    stream, snapshot = results.get("stream"), results.get("snapshot")
    if stream:
        lines += [
            _row(f"stream: row events/s ({stream['new'][0]['events']:,} row events; median)", stream,
                 lambda r: r["events_per_second"], ",.0f"),
            _row("stream: seconds of catch-up", stream, lambda r: r["seconds"], ".1f"),
            _row("stream: of which in `StreamStore.commit` (changes + checkpoint), s", stream,
                 lambda r: r["commit_seconds"], ".2f"),
            _row("stream: commit per batch, ms", stream, lambda r: 1000 * r["commit_seconds"] / r["batches"], ",.0f"),
            f"| stream: of which in `maintain` (table upkeep), s | - | "
            f"{_median(stream['new'], lambda r: r['maintain_seconds']):.2f} | |",
            f"| stream, new only: the MERGE into the current state at stop (not in the figures above), s | - | "
            f"{_median(stream['new'], lambda r: r['merge_seconds']):.2f} | |",
            _row("stream: row events/s counting that MERGE too", stream,
                 lambda r: r["events"] / (r["seconds"] + (r["merge_seconds"] or 0.0)), ",.0f"),
        ]
    if snapshot:
        def batch_values(key: str) -> Callable[[dict[str, Any]], float]:
            return lambda r: statistics.median(b[key] for b in r["batches"])

        lines += [
            _row(f"snapshot: rows/s, write + commit ({args.rows:,} rows; median)", snapshot,
                 lambda r: r["rows_per_second"], ",.0f"),
            _row("snapshot: seconds in all", snapshot, lambda r: r["seconds"], ".1f"),
            _row("snapshot: time in the Parquet writer (all chunks), s", snapshot,
                 lambda r: sum(b["parquet_seconds"] for b in r["batches"]), ".2f"),
            _row("snapshot: `write_chunks` per batch (reads included), s", snapshot, batch_values("write_seconds"),
                 ".2f"),
            _row("snapshot: `commit_batch` per batch (median of the batches), ms", snapshot,
                 lambda r: 1000 * statistics.median(b["commit_seconds"] for b in r["batches"]), ",.0f"),
            _row("snapshot: `commit_batch` of the first batch (new: creates the Delta table), ms", snapshot,
                 lambda r: 1000 * r["batches"][0]["commit_seconds"], ",.0f"),
        ]
    lines.append("")
    if stream:
        first = stream["new"][0]
        lines += [
            f"Stream: `bench.common.server.write_events` ({first['events']:,} row events: updates in 10,000-row "
            f"transactions, "
            f"one in ten an insert, one in ten a delete, on a {EVENTS_TABLE_ROWS:,}-row table), then each run the "
            f"stream runner's `open` + `catch_up` from a checkpoint at their start to the binlog's end (`startup_mode` "
            f"specific-offset), default batch limits, into a fresh lake: {first['batches']} batches, "
            f"{first['change_rows']:,} change rows. Timed: `catch_up`; `StreamStore.commit` and `maintain` are timed "
            f"by wrapping them. Per run, row events/s: {_per_run(stream, lambda r: r['events_per_second'], ',.0f')}. "
            f"`maintain` is called after every changelog commit but looks at a table only every "
            f"`MaintenancePolicy.check_every_commits` commits (10): with {first['batches']} batches it did not "
            f"compact or vacuum here (`bench.maintenance_file_counts` measures it under many commits). The MERGE at "
            f"stop is what "
            f"the stream operator does when it stops or defers, and every `merge_interval_seconds` (300) while it "
            f"runs: here all {first['change_rows']:,} change rows at once, into a current-state table it creates "
            f"(this table has no snapshot); the old layout had no such step (readers applied the changes). It is "
            f"paid per stop and per merge interval, not per event: a short catch-up that stops pays it whole, as "
            f"in the last row; `bench.merge_partitioning` measures a MERGE into a large current state.",
            "",
        ]
    if snapshot:
        first = snapshot["new"][0]
        lines += [
            f"Snapshot, without Spark: a {args.rows:,}-row table (~160 B a row, `bench.common.server.load_orders`) "
            f"split by "
            f"`split_table` (the same code in both) into {first['chunks']} chunks of {args.chunk_size:,} rows and "
            f"{len(first['batches'])} batches of {max(1, args.rows_per_batch // args.chunk_size)} chunks (the last one "
            f"smaller); each batch's chunks in two contiguous "
            f"parts (the Spark job's two tasks, here one after the other) through that version's `write_chunks` "
            f"(chunk reads from the server included: the same work in both), then its `commit_batch` (old: the "
            f"manifest JSON; new: one Delta transaction replacing the batch's partition, then the manifest). "
            f"Comparable as they stand except the files: old writes the source types, new the stored types "
            f"(`for_delta`, a cast of unsigned, duration and wide decimal columns, none of which this table has). "
            f"Per run, rows/s: {_per_run(snapshot, lambda r: r['rows_per_second'], ',.0f')}.",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    parts = [p for p in args.only.split(",") if p]
    if set(parts) - {"stream", "snapshot"}:
        raise SystemExit("--only takes stream, snapshot")
    from bench.common.measure import machine
    from bench.common.results import write_sections
    from bench.common.server import load_orders, throwaway_server, write_events

    commits = {"old": short_commit(args.old), "new": short_commit(args.new)}
    load_start = os.getloadavg()[0]
    results: dict[str, Any] = {}
    with worktrees(commits) as trees, throwaway_server(args.port) as server, \
            tempfile.TemporaryDirectory(prefix="bench-delta-lakes-") as home:
        from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
        from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
        from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo

        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        spec = {"connection": config.to_dict(), "chunk_size": args.chunk_size, "rows_per_batch": args.rows_per_batch}
        with server.admin_connect("bench").cursor() as cur:
            cur.execute("SELECT VERSION()")
            facts = machine(f"MariaDB {cur.fetchone()[0]}")
            if "snapshot" in parts:
                load_orders(cur, args.rows)
            if "stream" in parts:
                load_orders(cur, EVENTS_TABLE_ROWS, table="events")
        facts["deltalake"] = _version("deltalake")
        if "stream" in parts:
            control = config.connect()
            start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
            control.close()
            events = write_events(server, "events", EVENTS_TABLE_ROWS, args.events)
            print(f"stream: wrote {events:,} row events", flush=True)
            results["stream"] = stream_part(trees, {**spec, "table": "bench.events", "start": start.to_dict()},
                                            events, args.repeat, config.password, home)
        if "snapshot" in parts:
            results["snapshot"] = snapshot_part(trees, {**spec, "table": "bench.orders"}, args.repeat,
                                                config.password, home)
    text = report(results, args, facts, commits, (load_start, os.getloadavg()[0]))
    write_sections(args.results, text)  # the other sections stay
    print(text)
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        del sys.path[0]  # this file's folder: the package from the tree alone (``run_child``)
        sys.exit(child_main(json.loads(sys.argv[2])))
    sys.exit(main())
