"""What recovering a purged binlog position costs, per ``on_position_lost``, against taking the table anew by hand.

    .venv/bin/python -m bench.position_lost_recovery [--rows 1000000] [--changes 200000] [--repeat 3]

Starts a throwaway MariaDB of its own. Each round: the table (``bench.common.server.load_orders``) is
snapshotted without Spark (batch by batch, each batch's chunks in two parts one after the other, what its
Spark job's two tasks do in parallel) and streamed; then, the stream stopped, ``--changes`` row changes are
written (``write_events``: 10,000-row transactions of updates, inserts and deletes), the server's binlog files
are copied to an archive folder (what ``mariadb-binlog --read-from-remote-server --raw`` writes: the same
bytes) and purged to the newest. From copies of that one lost lake, in turns:

- ``archive``: the stream starts with ``on_position_lost='archive'`` and catches up (the lost range from the
  archive, then the server);
- ``resnapshot``: the stream starts with ``on_position_lost='resnapshot'`` and catches up (the table read
  again in the stream task, then the binlog since);
- by hand (the baseline): the lake deleted, the table snapshotted anew as above and the stream started from
  its high watermarks, caught up. Spark's start (about 13 s a job) is left out of it, so the baseline is
  the fastest a by-hand re-snapshot can be.

Each result is checked against the source (rows and the sum of ``amount``). Seconds are medians of the
rounds; the section "A purged position recovered" of RESULTS.md is written with ``--results``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.options.stream_options import (
    PositionLostBehavior,
    StreamOptions,
)
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, group_batches
from airflow_provider_mysqlcdc.lake.handle import table_uri
from bench.common.measure import machine
from bench.common.plain_replica import catch_up, snapshot
from bench.common.results import write_sections
from bench.common.server import load_orders, throwaway_server, write_events

TABLE = TableId("bench", "orders")
WAYS = ["archive", "resnapshot", "by hand"]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000, help="row changes in the purged range")
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--chunks-per-batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=33089)
    parser.add_argument("--results", type=Path, default=None, help="write the section into this RESULTS.md")
    return parser.parse_args(argv)


def stream(config: ConnectionConfig, base_uri: str, lost: PositionLostBehavior = PositionLostBehavior.FAIL,
           archive: str | None = None) -> None:
    """The stream started (recovering as ``lost`` says), caught up and merged."""
    catch_up(config, StreamOptions(base_uri, (TABLE,), writer="bench", on_position_lost=lost,
                                   binlog_archive_uri=archive))


def plan_of(config: ConnectionConfig, chunk_size: int, chunks_per_batch: int) -> Plan:
    control = config.connect()
    try:
        schema = load_table_schema(control, TABLE)
        chunks = split_table(control, schema, chunk_size)
    finally:
        control.close()
    return Plan(schema, chunks, group_batches(TABLE, chunks, chunks_per_batch))


def facts(config: ConnectionConfig) -> tuple[int, str]:
    control = config.connect()
    try:
        with control.cursor() as cur:
            cur.execute("SELECT COUNT(*), SUM(amount) FROM bench.orders")
            count, total = cur.fetchone()
            return int(count), f"{total:.2f}"
    finally:
        control.close()


def lake_facts(base_uri: str) -> tuple[int, str]:
    rows = DeltaTable(table_uri(base_uri, TABLE)).to_pyarrow_table(columns=["amount"])
    return rows.num_rows, f"{pc.sum(rows.column('amount')).as_py():.2f}"


def lose_position(server: Any, admin: Any, changes: int, rows: int, archive: Path) -> None:
    """Changes written while the stream is down, the binlog copied to ``archive``, then purged. The server keeps
    a file a binlog dump still reads (the stream's connection closed a moment ago): the purge is tried again."""
    write_events(server, "orders", rows, changes)
    with admin.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        files = [row[0] for row in cur.fetchall()]
        archive.mkdir()
        for name in files[:-1]:
            shutil.copy(Path(server.data_dir) / name, archive / name)
        for _ in range(100):
            cur.execute("PURGE BINARY LOGS TO %s", (files[-1],))
            cur.execute("SHOW BINARY LOGS")
            if [row[0] for row in cur.fetchall()] == files[-1:]:
                return
            time.sleep(0.1)
    raise RuntimeError(f"the server did not purge its binlog up to {files[-1]}")


def recover(way: str, config: ConnectionConfig, base_uri: str, archive: Path, args: argparse.Namespace) -> None:
    """The lost lake at ``base_uri`` brought to a caught-up replica ``way``'s way."""
    if way == "archive":
        stream(config, base_uri, PositionLostBehavior.ARCHIVE, str(archive))
    elif way == "resnapshot":
        stream(config, base_uri, PositionLostBehavior.RESNAPSHOT)
    else:
        shutil.rmtree(base_uri)
        snapshot(config, plan_of(config, args.chunk_size, args.chunks_per_batch), base_uri)
        stream(config, base_uri)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with throwaway_server(args.port) as server, tempfile.TemporaryDirectory(prefix="recovery-bench-") as scratch:
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            load_orders(cur, args.rows)
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        with admin.cursor() as cur:
            cur.execute("SELECT VERSION()")
            about = machine(f"MariaDB {cur.fetchone()[0]}")
        for round_ in range(args.repeat):
            root = Path(scratch) / f"round-{round_}"
            lost = str(root / "lost")
            snapshot(config, plan_of(config, args.chunk_size, args.chunks_per_batch), lost)
            stream(config, lost)
            lose_position(server, admin, args.changes, args.rows, root / "archive")
            expected = facts(config)

            order = WAYS[round_ % 3:] + WAYS[:round_ % 3]  # each goes first once in three rounds
            for name in order:
                base_uri = str(root / f"lake-{name.replace(' ', '-')}")
                shutil.copytree(lost, base_uri)
                started = time.perf_counter()
                recover(name, config, base_uri, root / "archive", args)
                seconds[name].append(time.perf_counter() - started)
                if lake_facts(base_uri) != expected:
                    print(f"{name}: the lake {lake_facts(base_uri)} is not the source {expected}", file=sys.stderr)
                    return 1
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.1f} s" for n in WAYS), flush=True)
            shutil.rmtree(root)
        admin.close()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    base = medians["by hand"]
    lines = [f"| `{name}` | {medians[name]:.1f} s | {base / medians[name]:.2f}x | "
             f"{', '.join(f'{s:.1f}' for s in seconds[name])} |" for name in seconds]
    section = f"""## A purged position recovered: {args.changes:,} changes lost (bench.position_lost_recovery)

{args.rows:,} rows of `bench.orders` (~160 B a row), {args.changes:,} row changes in the purged range, medians of
{args.repeat} rounds (the order turned each round), each result checked against the source. "By hand": the lake
deleted, the table snapshotted again without Spark (Spark's start, about 13 s a job, left out) and the stream
caught up. Run {time.strftime("%Y-%m-%d")} at {commit}: {about["cores"]} cores, {about["memory"]}, {about["server"]}.

| way back | seconds to a caught-up replica | speed against by hand | each round (s) |
|---|---|---|---|
{chr(10).join(lines)}
"""
    print(section)
    if args.results is not None:
        write_sections(args.results, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
