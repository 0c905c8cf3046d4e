"""``on_position_lost='resnapshot'`` on the real MariaDB: the stream's binlog purged while it was down,
with writes, a DDL and a dropped table in the lost range, and a writer that keeps writing while the
tables are read again; then a recovery killed midway and run again.

The test server is shared by the whole session: the binlog is purged only up to its newest file.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.verification.resnapshot import reread_current
from airflow_provider_mysqlcdc.exceptions import AsOfError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.compared_rows import assert_replica
from tests.integration.binlog_admin import purge_to_newest
from tests.integration.stream_task import stream_task
from tests.replica import snapshot
from tests.writers import KeyValueWriter

pytestmark = pytest.mark.usefixtures("connections")
ROWS = 300
REREAD = "airflow_provider_mysqlcdc.engine.stream.lost_range.reread_current"


def gap_records(base_uri: str, table: str) -> list[str]:
    changes = read_changes(base_uri, table)
    return [d for op, d in zip(changes.column("_op").to_pylist(), changes.column("_ddl").to_pylist(), strict=True)
            if op == ChangeKind.GAP]


def test_a_purged_position_is_recovered_by_reading_the_tables_again(
        admin: Any, connections: ConnectionConfig, database: str, mariadb_server: Any, tmp_path: Any) -> None:
    table, dropped = f"{database}.gap_kv", f"{database}.gap_dropped"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE gap_kv (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO gap_kv WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < "
                    f"{ROWS}) SELECT i, i FROM n")
        cur.execute("CREATE TABLE gap_dropped (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO gap_dropped VALUES (1)")
    base_uri = str(tmp_path / "lake")
    for name in (table, dropped):
        snapshot(connections, base_uri, name, chunk_size=50, chunks_per_batch=2)
    stream_task(base_uri, table, dropped)
    with admin.cursor() as cur:
        cur.execute("UPDATE gap_kv SET v = -1 WHERE id = 1")
    stream_task(base_uri, table, dropped)
    before = read_changes(base_uri, table)
    lost = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert lost is not None

    # the stream is down: writes, a DDL and a DROP, then the binlog purged past its checkpoint
    with admin.cursor() as cur:
        cur.execute("UPDATE gap_kv SET v = v + 1000 WHERE id <= 20")
        cur.execute("DELETE FROM gap_kv WHERE id BETWEEN 100 AND 110")
        cur.execute("ALTER TABLE gap_kv ADD COLUMN note VARCHAR(20) DEFAULT 'added in the gap'")
        cur.execute("DROP TABLE gap_dropped")
    newest = purge_to_newest(admin)

    # the recovery reads the tables again while a writer keeps writing
    writer = KeyValueWriter(mariadb_server, database, "gap_kv", ROWS)
    writer.start()
    try:
        stream_task(base_uri, table, dropped, on_position_lost="resnapshot")
    finally:
        writer.stop(timeout=30)
    assert writer.error is None and writer.count > 0
    with admin.cursor() as cur:
        cur.execute("INSERT INTO gap_kv (id, v) VALUES (100000, 1)")
    after_gap = read_current_offset(admin, ServerInfo.read(admin), with_gtid=False)
    stream_task(base_uri, table, dropped)

    # the lake equals the source, the new column included, read by Delta alone
    assert_replica(connections, base_uri, table)
    # the changelog keeps every change before the loss and marks the lost range once
    changes = read_changes(base_uri, table)
    assert changes.slice(0, before.num_rows).column("id").to_pylist() == before.column("id").to_pylist()
    gaps = gap_records(base_uri, table)
    assert len(gaps) == 1 and str(lost.offset) in gaps[0] and f"{newest}:4" in gaps[0]
    assert "was read again" in gaps[0]
    assert changes.column("_op").to_pylist()[before.num_rows] == ChangeKind.GAP
    # the dropped table is no longer captured; its replica keeps its rows as of the loss
    dropped_gaps = gap_records(base_uri, dropped)
    assert len(dropped_gaps) == 1 and "no longer on the server" in dropped_gaps[0]
    assert read_table(base_uri, dropped).column("id").to_pylist() == [1]
    # as-of reads into the lost range are refused, after the re-read they work
    with pytest.raises(AsOfError, match="purged binlog range"):
        read_table(base_uri, table, as_of=lost.offset)
    assert 100000 in read_table(base_uri, table, as_of=after_gap).column("id").to_pylist()


def test_a_killed_recovery_goes_on_from_the_position_it_took(
        admin: Any, connections: ConnectionConfig, database: str, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = f"{database}.gap_first", f"{database}.gap_second"
    with admin.cursor() as cur:
        for name in ("gap_first", "gap_second"):
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {name} VALUES (1, 1), (2, 2)")
    base_uri = str(tmp_path / "lake")
    for name in (first, second):
        snapshot(connections, base_uri, name, chunk_size=10, chunks_per_batch=1)
    stream_task(base_uri, first, second)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO gap_first VALUES (3, 3)")
        cur.execute("INSERT INTO gap_second VALUES (3, 3)")
    purge_to_newest(admin)

    # killed after the first table's re-read: nothing committed to the stream yet
    def killed_on_the_second(*args: Any, **kwargs: Any) -> Any:
        if str(args[2]) == second:
            raise KeyboardInterrupt("killed")
        return reread_current(*args, **kwargs)

    monkeypatch.setattr(REREAD, killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        stream_task(base_uri, first, second, on_position_lost="resnapshot")
    assert gap_records(base_uri, first) == []
    with admin.cursor() as cur:  # written after the first table was read again, before the retry
        cur.execute("UPDATE gap_first SET v = 30 WHERE id = 3")
        cur.execute("UPDATE gap_second SET v = 30 WHERE id = 3")
    monkeypatch.setattr(REREAD, reread_current)
    stream_task(base_uri, first, second, on_position_lost="resnapshot")
    for name in (first, second):
        assert_replica(connections, base_uri, name)
        assert len(gap_records(base_uri, name)) == 1
    # the first table was not read again (one replace commit): its update after the first try came from the binlog
    replaces = [c for c in Lake.at(base_uri).table(TableId.parse(first)).current.history(None) or []
                if "mysqlcdc.high_watermark" in c.metadata]
    assert len(replaces) == 1
    assert read_changes(base_uri, first).column("_op").to_pylist()[-2:] == ["-U", "+U"]


def test_a_keyless_table_is_refused_before_anything_is_written(
        admin: Any, connections: ConnectionConfig, database: str, tmp_path: Any) -> None:
    table = f"{database}.gap_keyless"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE gap_keyless (v INT, KEY (v))")
        cur.execute("INSERT INTO gap_keyless VALUES (1), (1)")
    base_uri = str(tmp_path / "lake")
    snapshot(connections, base_uri, table, chunk_size=10, chunks_per_batch=1, chunk_key="v")
    stream_task(base_uri, table)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO gap_keyless VALUES (2)")
    stream_task(base_uri, table)
    lost = StreamStore(Lake.at(base_uri)).read_checkpoint()
    with admin.cursor() as cur:
        cur.execute("INSERT INTO gap_keyless VALUES (3)")
    purge_to_newest(admin)
    with pytest.raises(TableNotSupportedError, match="keyless tables .*gap_keyless.* nothing was written"):
        stream_task(base_uri, table, on_position_lost="resnapshot")
    kept = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert lost is not None and kept is not None and (kept.seq, kept.offset) == (lost.seq, lost.offset)


def test_a_transaction_the_lake_holds_in_part_is_not_left_in_the_changelog(
        admin: Any, connections: ConnectionConfig, database: str, tmp_path: Any) -> None:
    table = f"{database}.gap_part"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE gap_part (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO gap_part VALUES (1, 1)")
    base_uri = str(tmp_path / "lake")
    snapshot(connections, base_uri, table, chunk_size=10, chunks_per_batch=1)
    stream_task(base_uri, table)
    start = read_current_offset(admin, ServerInfo.read(admin), with_gtid=False)
    with admin.cursor() as cur:  # one transaction of 40 row events, a batch holds 10 of them
        cur.execute("BEGIN")
        for key in range(100, 140):
            cur.execute("INSERT INTO gap_part VALUES (%s, 0)", (key,))
        cur.execute("COMMIT")
    stream_task(base_uri, table, max_batch_events=10, stop_at_offset=f"{start.file}:{start.position}")
    part = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert part is not None and part.visible[0] < part.seq  # the lake holds part of the transaction
    purge_to_newest(admin)
    stream_task(base_uri, table, on_position_lost="resnapshot")
    assert_replica(connections, base_uri, table)
    changes = read_changes(base_uri, table)
    assert changes.column("_op").to_pylist() == [ChangeKind.GAP]  # none of the transaction's part
