"""Whether ``lake.write.maintenance`` keeps a Delta table small: file and log counts of a changelog under many
small stream commits, and the cost of reading a current state after many MERGEs.

    .venv/bin/python -m bench.maintenance_file_counts [--commits 10000] [--rows-per-commit 20]

Part 1 appends ``--commits`` commits of 20 changelog rows, calling ``maintain`` after each as the stream
runner does (default policy, except retentions of 0 so that vacuum and log cleanup show within the run),
and samples the referenced data files, the Parquet files on disk and the log files. Part 2 merges
``--merges`` change sets into a 1,000,000-row current state (100 batches), then times ``to_pyarrow_table``
against a freshly written table of the same rows, before and after ``maintain``. Writes its section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from datetime import date
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.maintenance import MaintenancePolicy, maintain
from airflow_provider_mysqlcdc.lake.write.merge import merge_changes
from bench.common.delta_rows import change_set, rows_table
from bench.common.results import write_sections

ROOT = Path(__file__).resolve().parents[1]


def counts(uri: str) -> tuple[int, int, int]:
    """Referenced data files, Parquet files on disk, files in ``_delta_log``."""
    referenced = len(DeltaTable(uri).file_uris())
    on_disk = sum(1 for name in os.listdir(uri) if name.endswith(".parquet"))
    return referenced, on_disk, len(os.listdir(os.path.join(uri, "_delta_log")))


def stream_commits(uri: str, commits: int, rows: int, policy: MaintenancePolicy) -> tuple[list[str], float, float]:
    rng = np.random.default_rng(5)
    since, maintenance, peak = 0, 0.0, (0, 0, 0)
    samples: list[str] = []
    started = time.perf_counter()
    for i in range(commits):
        batch = rows_table(rng.integers(0, 10**9, rows), 10**7, rng, op="+U", pos=i).append_column(
            "_stream_seq", pa.array(np.full(rows, i, np.int64), pa.int64()))
        write_deltalake(uri, batch, mode="append")
        since += 1
        t = time.perf_counter()
        if maintain(DeltaLocation(uri), policy, since).checked:
            since = 0
        maintenance += time.perf_counter() - t
        if (i + 1) % 10 == 0:
            peak = tuple(max(a, b) for a, b in zip(peak, counts(uri), strict=True))  # type: ignore[assignment]
        if (i + 1) % (commits // 5) == 0:
            referenced, on_disk, log = counts(uri)
            samples.append(f"| {i + 1:,} | {referenced} | {on_disk} | {log} | {peak[0]} / {peak[1]} / {peak[2]} |")
    seconds = time.perf_counter() - started
    assert DeltaTable(uri).count() == commits * rows
    return samples, seconds, maintenance


def read_seconds(uri: str, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        DeltaTable(uri).to_pyarrow_table()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def merged_current(tmp: str, rows: int, merges: int, changes: int) -> tuple[list[str], int]:
    uri, fresh = os.path.join(tmp, "current"), os.path.join(tmp, "fresh")
    write_deltalake(uri, rows_table(np.arange(rows), rows // 100, np.random.default_rng(1)), partition_by=["_batch"])
    for m in range(merges):  # each in a 5% key range (a few batches), as clustered changes would be
        lo = (m * rows // 20) % rows
        merge_changes(DeltaLocation(uri),
                      change_set(rows + m * changes, changes, rows // 100, [(lo, lo + rows // 20)], m),
                      ["id"], through_seq=m)
    files = len(DeltaTable(uri).file_uris())
    current = DeltaTable(uri).to_pyarrow_table()
    write_deltalake(fresh, current, partition_by=["_batch"])
    lines = [f"| after {merges} MERGEs | {files} | {read_seconds(uri):.2f} s | {read_seconds(fresh):.2f} s |"]
    policy = MaintenancePolicy(vacuum_retention_hours=0, log_retention_hours=0, max_small_files=1)
    maintain(DeltaLocation(uri), policy, policy.check_every_commits)
    lines.append(f"| after `maintain` | {len(DeltaTable(uri).file_uris())} | {read_seconds(uri):.2f} s | "
                 f"{read_seconds(fresh):.2f} s |")
    return lines, current.num_rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--rows-per-commit", type=int, default=20)
    parser.add_argument("--merges", type=int, default=100)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = parser.parse_args()
    policy = MaintenancePolicy(vacuum_retention_hours=0, log_retention_hours=0)
    with tempfile.TemporaryDirectory(prefix="delta-files-") as tmp:
        uri = os.path.join(tmp, "changelog")
        samples, seconds, maintenance = stream_commits(uri, args.commits, args.rows_per_commit, policy)
        print("\n".join(samples), seconds, maintenance, flush=True)
        shutil.rmtree(uri)
        reads, current_rows = merged_current(tmp, 1_000_000, args.merges, 1_000)
        print("\n".join(reads), flush=True)
    p = policy
    bound = p.max_small_files + p.check_every_commits + 1
    text = f"""## Delta table size under many small commits, and reads after many MERGEs

Written by `.venv/bin/python -m bench.maintenance_file_counts` (not by `bench.peers`). {date.today()}, 1 run; cores \
{os.cpu_count()}, python {platform.python_version()}, deltalake {version('deltalake')}, pyarrow {version('pyarrow')}

{args.commits:,} stream commits of {args.rows_per_commit} changelog rows each into an unpartitioned changelog \
table, `lake.write.maintenance.maintain` called after each commit with `MaintenancePolicy` defaults \
(check every {p.check_every_commits} commits, compact beyond {p.max_small_files} excess small files, checkpoint \
every {p.checkpoint_interval} commits) except both retentions 0 (the defaults are 24 h, which would show no \
vacuum or log cleanup within a run of minutes). {seconds:.0f} s in all ({args.commits / seconds:.0f} \
commits/s), of which `maintain` {maintenance:.0f} s.

| commits | data files referenced | Parquet files on disk | `_delta_log` files | peak so far (referenced / disk / log) |
|---|---|---|---|---|
""" + "\n".join(samples) + f"""

The bound: referenced files never exceed `max_small_files + check_every_commits + 1` = {bound} (the excess small \
files a look allows, the commits until the next look, the compacted file). On disk, vacuum runs about once per \
checkpoint interval (counted in table versions, maintenance commits included), so the files compacted away in \
up to about two intervals wait for it (measured peak above; with a retention of R hours, add R hours of \
commits). The log keeps the entries since the last checkpoint older than the log retention: with \
retention 0, at most about {p.checkpoint_interval} commits plus the maintenance commits; with the 24 h default, \
a day of commits plus {p.checkpoint_interval}.

Reading a {current_rows:,}-row current state (100 `_batch` partitions) after {args.merges} MERGEs of 1,000 \
changed keys each (each within a 5% key range), `DeltaTable.to_pyarrow_table()`, median of 3, against a table \
freshly written from the same rows:

| current state | data files | read | freshly written, same rows |
|---|---|---|---|
""" + "\n".join(reads) + "\n"
    write_sections(args.results, text)


if __name__ == "__main__":
    main()
