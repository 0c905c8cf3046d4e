"""An as-of read's snapshot commit time on a long-lived current table: its one log entry read alone
(``ReplicaTable.commit``) against the table's whole history scanned for it (``ReplicaTable.history()``, what
``as_of._commit_ms`` did before), in the same run, on a local lake and on an S3 lake (moto's server, started as
the tests start it).

- a current table of ``--commits`` one-row appends (delta-rs's; ``--s3-commits`` on S3, where moto takes about half
  a second a commit), whose first version stands for the snapshot's commit: the oldest entry, as in a table
  merged every few minutes for weeks (~8,600 entries over the default 30-day log retention);
- each way ``ROUNDS`` times, alternating; medians and their ratio.

    .venv/bin/python -m bench.as_of_commit_time [--commits 1000] [--s3-commits 100]

Writes its section of bench/RESULTS.md. Needs no MariaDB; the lakes are temporary folders and a bucket of moto's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable
from airflow_provider_mysqlcdc.lake.handle import Lake
from bench.common.measure import machine, scratch_dir
from bench.common.results import write_sections

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5


def _current(base_uri: str, commits: int) -> ReplicaTable:
    """The current table of ``bench.t`` in the lake at ``base_uri``, made of ``commits`` appends."""
    from deltalake import write_deltalake

    current = Lake.at(base_uri).table(TableId("bench", "t")).current
    for n in range(commits):
        write_deltalake(current.uri, pa.table({"n": [n]}), mode="append")
    return current


def _scan(current: ReplicaTable) -> int:
    """The first version's commit time as read before: the whole history, newest first, searched for it."""
    return next(c.timestamp_ms for c in current.history() or [] if c.version == 0)


def _one(current: ReplicaTable) -> int:
    commit = current.commit(0)
    assert commit is not None
    return commit.timestamp_ms


def _medians(current: ReplicaTable) -> tuple[float, float]:
    """The median seconds of each way over ``ROUNDS`` alternating rounds (both give the same time)."""
    times: dict[Callable[[ReplicaTable], int], list[float]] = {_scan: [], _one: []}
    for _ in range(ROUNDS):
        for way, seconds in times.items():
            started = time.perf_counter()
            way(current)
            seconds.append(time.perf_counter() - started)
    if _scan(current) != _one(current):
        raise SystemExit("the two ways read different commit times")
    return statistics.median(times[_scan]), statistics.median(times[_one])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000, help="commits of the local table")
    parser.add_argument("--s3-commits", type=int, default=100, help="commits of the table on moto's S3")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = parser.parse_args(argv)
    from tests import s3_server  # moto's server, as the S3 tests run it

    rows = [("local", args.commits, *_medians(_current(scratch_dir("commit-read-"), args.commits)))]
    server = s3_server.start(Path(scratch_dir("commit-read-moto-")) / "moto.log")
    try:
        os.environ.update(server.variables())
        rows.append(("S3 (moto's server)", args.s3_commits,
                     *_medians(_current(f"s3://{server.bucket}/lake", args.s3_commits))))
    finally:
        s3_server.stop(server)
    for lake, commits, scan, one in rows:
        print(f"{lake}, {commits} commits: whole history {scan:.4f} s, one entry {one:.4f} s", flush=True)
    write_sections(args.results, _report(rows, args))
    return 0


def _report(rows: list[tuple[str, int, float, float]], args: argparse.Namespace) -> str:
    facts = machine("no MariaDB")
    table = "\n".join(f"| {lake} | {commits:,} | {scan * 1000:.1f} | {one * 1000:.2f} | {scan / one:,.0f}x |"
                      for lake, commits, scan, one in rows)
    return f"""## As-of reads: the snapshot's commit time on a long-lived current table

{dt.date.today()}, `.venv/bin/python -m bench.as_of_commit_time --commits {args.commits} --s3-commits \
{args.s3_commits}`; {facts['cores']} cores, pyarrow {facts['pyarrow']}, airflow-provider-mysqlcdc \
{facts['airflow-provider-mysqlcdc']}. A current table of one-row appends; an as-of read wants the commit time of the
snapshot's version (here the first, the oldest entry). Before: the table's whole history scanned for it (every entry
read; on S3 delta-rs loads the table and reads every commit). After: that version's log entry alone. Medians of
{ROUNDS} alternating rounds.

| lake | commits | whole history (ms) | one log entry (ms) | ratio |
|---|---|---|---|---|
{table}

The history's cost grows with the table's commits (a table merged every 5 minutes keeps ~8,600 entries over the
default 30-day log retention); the one entry's does not.
"""


if __name__ == "__main__":
    sys.exit(main())
