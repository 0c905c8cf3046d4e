"""The stream's binlog position on the real MariaDB: purged while the stream is down, kept by idle
tables while other tables rotate the binlog, and watched against a shortened retention.

The test server is shared by the whole session: every global changed here is restored in a
``finally``, and the binlog is purged only up to its newest file, which no other test's lake needs.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import BinlogPositionLostError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from airflow_provider_mysqlcdc.lake.write.lease import StreamLease
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.compared_rows import assert_replica
from tests.integration.binlog_admin import binlog_files, global_value, purge_to_newest
from tests.integration.stream_task import stream_task
from tests.replica import snapshot

pytestmark = pytest.mark.usefixtures("connections")


def test_a_purged_position_fails_naming_the_purge_and_the_remedy_works(
        admin: Any, connections: ConnectionConfig, database: str, tmp_path: Any) -> None:
    table = f"{database}.purged_while_down"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE purged_while_down (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO purged_while_down VALUES (1, 1), (2, 2)")
    base_uri = str(tmp_path / "lake")
    snapshot(connections, base_uri, table, chunk_size=10, chunks_per_batch=1)
    stream_task(base_uri, table)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO purged_while_down VALUES (3, 3)")
    stream_task(base_uri, table)
    store = StreamStore(Lake.at(base_uri))
    before = store.read_checkpoint()
    assert before is not None
    changes_before = read_changes(base_uri, table).to_pylist()

    # the stream is down: the server writes, rotates and purges past its checkpoint
    with admin.cursor() as cur:
        cur.execute("INSERT INTO purged_while_down VALUES (4, 4)")
        cur.execute("UPDATE purged_while_down SET v = 10 WHERE id = 1")
    newest = purge_to_newest(admin)
    with pytest.raises(BinlogPositionLostError) as failed:
        stream_task(base_uri, table)
    message = str(failed.value)
    assert f"checkpoint {before.offset}" in message and f"{before.offset.file}, which the server has purged" in message
    assert f"oldest binlog starts at {newest}:4" in message and "another server" not in message
    assert "delete the lake" in message

    # the lake is as it was, and its lease free at once for another writer
    after = store.read_checkpoint()
    assert after is not None and (after.seq, after.offset) == (before.seq, before.offset)
    assert read_changes(base_uri, table).to_pylist() == changes_before
    StreamLease(Lake.at(base_uri), "another writer", 60.0).acquire()

    # the documented remedy, one step: delete the lake and run the DAG (its split and snapshot, then the stream)
    shutil.rmtree(base_uri)
    snapshot(connections, base_uri, table, chunk_size=10, chunks_per_batch=1)
    stream_task(base_uri, table)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO purged_while_down VALUES (5, 5)")
    stream_task(base_uri, table)
    assert_replica(connections, base_uri, table)


def test_idle_captured_tables_keep_their_position_while_others_rotate_the_binlog(
        admin: Any, database: str, tmp_path: Any) -> None:
    table = f"{database}.quiet"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE quiet (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE busy (id INT PRIMARY KEY AUTO_INCREMENT, pad VARCHAR(1000))")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        cur.execute("INSERT INTO quiet VALUES (1)")
    stream_task(base_uri, table)
    store = StreamStore(Lake.at(base_uri))
    start = store.read_checkpoint()
    assert start is not None
    first_file = binlog_files(admin)[-1]

    size = global_value(admin, "max_binlog_size")
    errors: list[BaseException] = []

    def follow() -> None:
        try:
            stream_task(base_uri, table, stop_after_idle_seconds=None, max_duration_seconds=12)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    streaming = threading.Thread(target=follow)
    streaming.start()
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL max_binlog_size = 4096")  # the smallest it takes
            for _ in range(25):  # ~5 KB a statement: a rotation every few
                cur.execute("INSERT INTO busy (pad) VALUES (REPEAT('x', 1000)), (REPEAT('y', 1000)), "
                            "(REPEAT('z', 1000)), (REPEAT('w', 1000)), (REPEAT('v', 1000))")
                time.sleep(0.1)
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL max_binlog_size = %s", (size,))
    files = binlog_files(admin)
    assert len(files) - files.index(first_file) >= 6  # five rotations or more while the stream ran
    streaming.join(timeout=60)
    assert not streaming.is_alive() and not errors

    # it moved with the binlog: past every transaction, in the newest file or the one the last rotation closed
    followed = store.read_checkpoint()
    assert followed is not None and followed.offset.file in files[-2:]
    assert followed.offset.gtid == global_value(admin, "gtid_binlog_pos")
    purge_to_newest(admin)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO quiet VALUES (2)")
    # no error, no snapshot: the stream goes on from its checkpoint (found by its GTIDs when its file is gone)
    summary = stream_task(base_uri, table)
    assert summary["rows"] == 1
    assert read_changes(base_uri, table).column("id").to_pylist() == [1, 2]


def test_the_stream_warns_before_its_position_is_lost(
        admin: Any, database: str, tmp_path: Any, caplog: pytest.LogCaptureFixture, statsd: Any) -> None:
    table = f"{database}.watched"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE watched (id INT PRIMARY KEY)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    retention = global_value(admin, "binlog_expire_logs_seconds")
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL binlog_expire_logs_seconds = 3600")
            cur.execute("INSERT INTO watched VALUES (1)")
            cur.execute("FLUSH BINARY LOGS")  # the checkpoint's file is closed: purged an hour from now
        with caplog.at_level(logging.WARNING, logger="airflow_provider_mysqlcdc.engine.stream.retention_watch"):
            stream_task(base_uri, table, binlog_margin_seconds=7200)
        # the Test button says the same from outside the stream
        ok, message = MySqlCdcHook("mysql_cdc_default").test_connection()
        assert ok and "a stream caught up now keeps its binlog position for about 1 h while stopped" in message
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL binlog_expire_logs_seconds = %s", (retention,))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "the stream's position may be lost soon" in warnings[0]
    assert "may be purged in" in warnings[0] and "binlog_expire_logs_seconds = 3600" in warnings[0]
    assert "keep binlogs longer" in warnings[0]
    margins = [value for value, kind in statsd.metrics()["mysql_cdc.stream.binlog_margin_seconds"] if kind == "g"]
    assert margins and 0 < margins[0] <= 3600
