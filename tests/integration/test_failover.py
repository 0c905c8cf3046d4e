"""Failover by GTID: a stream from a MariaDB primary continues on its replica with nothing lost or doubled.

A primary and a GTID replica of it (``log_slave_updates``, strict mode) run on loopback, each with its
own port and data directory; the replica's binlog has other file names and positions (its own
basename, two files further on). A stream worker streams from the primary under a writer and is
killed mid-stream; the replica catches up, the primary stops, and the stream restarts with the
connection pointed at the replica (same lake, new host and port), as a user edits the Airflow
connection. It must find its place in the replica's binlog by GTID. Without GTIDs in the checkpoint,
a changed server is refused with ``ServerChangedError``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.exceptions import ServerChangedError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from dev import mariadb
from dev.ports import free_port
from tests import stream_worker
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows

ROOT = Path(__file__).resolve().parents[2]
DB = "shop"



@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[mariadb.MariaDbServer, mariadb.MariaDbServer]]:
    primary_dir, replica_dir = tmp_path_factory.mktemp("primary"), tmp_path_factory.mktemp("replica")
    try:
        primary = mariadb.start(primary_dir, free_port(), extra_args=mariadb.REPLICA_ARGS)
        replica = mariadb.start(replica_dir, free_port(), server_id=2, log_bin="replica-bin",
                                extra_args=mariadb.REPLICA_ARGS)
        with replica.admin_connect() as conn, conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")  # other file names and numbers than the primary's
            cur.execute("FLUSH BINARY LOGS")
        mariadb.replicate(replica, primary)
        yield primary, replica
    finally:
        mariadb.stop(replica_dir)
        mariadb.stop(primary_dir)


def config_of(server: mariadb.MariaDbServer) -> ConnectionConfig:
    return ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)


class Writer(threading.Thread):
    """Random upserts, updates and deletes of ``orders``, counting the row changes the server reports
    (an upsert that updates reports 2 affected rows): what the changelog must hold, exactly once."""

    def __init__(self, server: mariadb.MariaDbServer, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.rnd = server, random.Random(seed)
        self.ops: Counter[str] = Counter()
        self.transactions = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.server.admin_connect(DB) as conn, conn.cursor() as cur:
            while not self.stopping.is_set():
                self.write(cur)

    def write(self, cur: Any) -> None:
        key = self.rnd.randint(1, 400)
        cur.execute("BEGIN")
        upsert = cur.execute("INSERT INTO orders VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE amount = amount + 1",
                             (key, Decimal(key) / 100, f"w{key}"))
        updated = cur.execute("UPDATE orders SET note = %s WHERE id = %s", (f"u{self.transactions}", key + 3))
        deleted = cur.execute("DELETE FROM orders WHERE id = %s", (key + 11,))
        cur.execute("COMMIT")
        self.ops[ChangeKind.INSERT if upsert == 1 else ChangeKind.UPDATE_AFTER] += 1
        self.ops[ChangeKind.UPDATE_AFTER] += updated
        self.ops[ChangeKind.DELETE] += deleted
        self.transactions += 1
        time.sleep(0.003)


def changelog_ops(base_uri: str, table: str) -> Counter[str]:
    return Counter(str(op) for op in read_changes(base_uri, table).column("_op").to_pylist())


def test_stream_continues_on_the_replica_by_gtid(servers, tmp_path) -> None:
    primary, replica = servers
    with primary.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, amount DECIMAL(12,2), note VARCHAR(40))")
    mariadb.wait_caught_up(replica, primary)
    table = TableId(DB, "orders")
    base_uri = str(tmp_path / "lake")
    store = StreamStore(Lake.at(base_uri))
    with config_of(primary).connect() as control:
        schema = load_table_schema(control, table)
        # as snapshot high watermarks are read: fast, without GTIDs; the stream must add them itself
        start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
    assert start.gtid is None and start.file.startswith("mysql-bin.")
    store.commit(Checkpoint(0, start, {table: schema}), {})

    writer = Writer(primary, seed=11)
    writer.start()
    primary_config = config_of(primary)
    env = {**os.environ, "MYSQL_CDC_PASSWORD": primary_config.password, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "tests.stream_worker", base_uri,
                               json.dumps(primary_config.to_dict())], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while (store.read_checkpoint() or Checkpoint(0, start, {})).seq < 5:  # the stream has committed batches
            assert worker.poll() is None and time.monotonic() < deadline, "the stream worker did not commit"
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGKILL)  # the primary "dies" under the stream, mid-batch maybe
        worker.wait()
    time.sleep(0.5)  # the writer goes on a little: the lake is behind the primary
    writer.stopping.set()
    writer.join()
    behind = store.read_checkpoint()
    assert behind is not None and behind.offset.gtid, "the stream's commits carry no GTID position"
    assert behind.offset.file.startswith("mysql-bin.")
    target = mariadb.wait_caught_up(replica, primary)
    assert behind.offset.gtid != target, "the lake was not behind the primary when it failed"
    mariadb.stop(Path(primary.data_dir).parent)

    # every commit the stream made on the primary carried the GTID position
    history = DeltaTable(store.lake.table(table).changelog.uri).history()
    offsets = [h["offset"] for h in history if "offset" in h and h.get("stream_seq") not in (None, "0")]
    assert offsets and all(" gtid=0-1-" in o for o in offsets), offsets

    # the user edits the connection: same lake, the replica's host and port
    replica_config = config_of(replica)
    stream_worker.run(base_uri, replica_config, once=True)
    anchored = store.read_checkpoint()
    assert anchored is not None and anchored.offset.file.startswith("replica-bin.")
    assert anchored.offset.server == "mariadb server_id=2" and anchored.offset.gtid == target

    # the replica is the primary now: it takes writes, and the stream follows them
    promoted = Writer(replica, seed=12)
    promoted.ops, promoted.transactions = writer.ops, writer.transactions
    with replica.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("STOP SLAVE")
        cur.execute(f"USE {DB}")
        for _ in range(40):
            promoted.write(cur)
    stream_worker.run(base_uri, replica_config, once=True)

    with replica_config.connect() as conn:
        assert canonical_rows(read_table(base_uri, str(table))) == table_rows(conn, schema)
    ops = changelog_ops(base_uri, str(table))
    assert ops[ChangeKind.INSERT] == writer.ops[ChangeKind.INSERT] > 50
    assert ops[ChangeKind.UPDATE_AFTER] == ops[ChangeKind.UPDATE_BEFORE] == writer.ops[ChangeKind.UPDATE_AFTER] > 50
    assert ops[ChangeKind.DELETE] == writer.ops[ChangeKind.DELETE] > 10
    changes = read_changes(base_uri, str(table))
    order = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_row_seq")),
                     strict=True))
    assert len(order) == len(set(order)), "a change was written twice"


def test_without_gtids_a_changed_server_is_refused(servers, tmp_path) -> None:
    """A checkpoint with a file and position only (MySQL without gtid_mode) cannot move to the replica."""
    primary, replica = servers
    base_uri = str(tmp_path / "lake")
    table = TableId(DB, "orders")
    replica_config = config_of(replica)
    with replica_config.connect() as control:
        schema = load_table_schema(control, table)
        offset = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
    # the replica's own file name and position, but taken on the old primary and without GTIDs
    old = replace(offset, gtid=None, server="mariadb server_id=1")
    StreamStore(Lake.at(base_uri)).commit(Checkpoint(0, old, {table: schema}), {})
    runner = StreamRunner(StreamOptions(base_uri, (table,), writer="failover test"), replica_config)
    with replica_config.connect() as control, pytest.raises(ServerChangedError, match="enable GTIDs"):
        runner.open(control)
    runner.lease.release()
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and checkpoint.offset == old  # nothing moved
