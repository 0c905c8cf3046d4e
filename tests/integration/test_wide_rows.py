"""A table of 6 MB rows (LONGBLOB) through the example DAG and the stream, within stated memory.

Issue 27's "bytes, not rows": 8,096 rows a chunk of 6 MB rows would be 48 GB in one Spark task. The
split cuts chunks by ``chunk_max_bytes`` too, with the table's row bytes sampled (its statistics are
stale right after the load, which this test leaves them), the snapshot runs on real ``spark-submit``
``local[2]``, and the stream (in a process of its own) replays inserts and updates of 6 MB rows. The
peak resident memory of the Spark processes (the driver JVM, which is also the executor on
``local[2]``, and its Python workers) and of the stream's process is measured and held to the figures
``docs/production.md`` states. The server's ``max_allowed_packet`` is MariaDB's default 16 MB, so each row is
written by a statement of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table, scan_table
from dev.dag_file import load_dag

SERVER_IDS = "5460-5475"  # this module's binlog reader ids (the ``connections`` fixture)

ROOT = Path(__file__).resolve().parents[2]
ROW_BYTES = 6 * 1024 * 1024
ROWS = 30
MIB = 1024 * 1024
SPARK_MEMORY = 2048 * MIB
"""The stated bound of the Spark processes together (driver JVM + Python workers), docs/production.md."""
READER_MEMORY = 700 * MIB
"""The stated bound of one Python chunk reader (a Spark task's worker) at chunk_max_bytes = 64 MiB (peaks of
494-648 MiB measured: the peak moves with when memory is freed)."""
STREAM_MEMORY = 1536 * MIB
"""The stated bound of the stream's process at max_batch_bytes = 64 MiB (measured 0.96-1.2 GiB with 6 MB rows)."""


class SparkMemory(threading.Thread):
    """Polls the processes of the Spark job writing to ``base_uri`` (the JVM's command line names the lake)
    and their descendants: the peak of their resident memory together, and of one Python worker."""

    def __init__(self, base_uri: str) -> None:
        super().__init__(daemon=True)
        self.base_uri, self.stopping = base_uri, threading.Event()
        self.total = self.worker = 0

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            roots = []
            for proc in psutil.process_iter(["cmdline"]):
                if "java" in " ".join(proc.info["cmdline"] or [])[:200] and self.base_uri in " ".join(
                        proc.info["cmdline"] or []):
                    roots.append(proc)
            for root in roots:
                try:
                    tree = [root, *root.children(recursive=True)]
                    sizes = [(p, p.memory_info().rss) for p in tree]
                except psutil.Error:
                    continue
                self.total = max(self.total, sum(rss for _, rss in sizes))
                workers = [rss for p, rss in sizes if p is not root]
                self.worker = max(self.worker, *workers, 0)


def write(server: Any, database: str, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
    conn = server.admin_connect(database)
    try:
        with conn.cursor() as cur:
            for sql, params in statements:
                cur.execute(sql, params)
    finally:
        conn.close()


def payload(seed: int) -> bytes:
    """6 MB that compress poorly (as media and archives do), reproducible by seed."""
    return hashlib.shake_256(seed.to_bytes(8, "big")).digest(ROW_BYTES)


def source_rows(admin: Any) -> list[tuple[Any, ...]]:
    with admin.cursor() as cur:
        cur.execute("SELECT id, note, MD5(payload) FROM blobs ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def lake_rows(base_uri: str, table: str) -> list[tuple[Any, ...]]:
    """The replica's rows with each payload's MD5, read a batch at a time."""
    rows = []
    for batch in scan_table(base_uri, table):
        for r in batch.to_pylist():
            rows.append((r["id"], r["note"], hashlib.md5(r["payload"]).hexdigest()))  # noqa: S324 (a checksum)
    return sorted(rows)


def test_a_table_of_6_mb_rows_snapshots_and_streams_within_the_stated_memory(
        airflow_db: None, connections: ConnectionConfig, mariadb_server: Any,  # noqa: F811 (the fixture)
        admin: Any, database: str, tmp_path: Path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE blobs (id INT PRIMARY KEY, note VARCHAR(20), payload LONGBLOB)")
    write(mariadb_server, database, [("INSERT INTO blobs VALUES (%s, %s, %s)", (i, f"n{i}", payload(i)))
                                     for i in range(ROWS)])
    table = f"{database}.blobs"
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [table], "base_uri": base_uri, "stop_after_idle_seconds": 2, "defer_after_idle_seconds": 60}

    spark = SparkMemory(base_uri)
    spark.start()
    run = load_dag("mysql_cdc_example").test(run_conf=conf)
    spark.stopping.set()
    spark.join()
    assert run.state == "success"
    plan = SnapshotStore(Lake.at(base_uri)).read_plan(TableId.parse(table))
    assert plan is not None and len(plan.chunks) >= ROWS // 10  # 64 MiB chunks of 6 MB rows: 10 rows at most
    assert lake_rows(base_uri, table) == source_rows(admin)
    print(f"snapshot of {ROWS} rows of 6 MB: Spark processes {spark.total / MIB:.0f} MiB at most, "
          f"one Python worker {spark.worker / MIB:.0f} MiB")
    assert 0 < spark.worker <= READER_MEMORY, spark.worker / MIB
    assert spark.total <= SPARK_MEMORY, spark.total / MIB

    # inserts and updates of 6 MB rows, streamed by a process of its own (its peak memory is its own)
    write(mariadb_server, database,
          [("INSERT INTO blobs VALUES (%s, %s, %s)", (i, f"n{i}", payload(i))) for i in range(ROWS, ROWS + 12)]
          + [("UPDATE blobs SET note = %s, payload = %s WHERE id = %s", (f"u{i}", payload(1000 + i), i))
             for i in range(0, ROWS, 3)]
          + [("DELETE FROM blobs WHERE id = %s", (i,)) for i in (1, ROWS + 1)])
    env = {**os.environ, "MYSQL_CDC_PASSWORD": connections.password, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "tests.stream_worker", base_uri,
                               json.dumps(connections.to_dict()), "once"], env=env, cwd=ROOT)
    _, status, usage = os.wait4(worker.pid, 0)
    worker.returncode = os.waitstatus_to_exitcode(status)
    assert worker.returncode == 0
    stream_peak = usage.ru_maxrss * 1024  # kB on Linux
    print(f"stream of 12 inserts, 10 updates of 6 MB rows: {stream_peak / MIB:.0f} MiB at most")
    assert stream_peak <= STREAM_MEMORY, stream_peak / MIB
    expected = source_rows(admin)
    assert lake_rows(base_uri, table) == expected
    assert sorted((r["id"], r["note"]) for r in read_table(base_uri, table).to_pylist()) == [
        (i, n) for i, n, _ in expected]
