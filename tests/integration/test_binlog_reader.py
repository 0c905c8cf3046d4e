"""The binlog reader on the real server: ops and offsets, stop offsets, restarts mid-transaction,
rotation, ADD COLUMN, and a purged binlog."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, Committed, SchemaChanged
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError, SourceConfigError
from tests.integration.source_sql import now, run


@pytest.fixture()
def config(mariadb_server) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port)


def reader(config: ConnectionConfig, cdc_conn: Any, tables: list[TableId], start: BinlogOffset,
           stop: BinlogOffset | None = None) -> BinlogReader:
    """A reader that knows the tables' schemas as they are now (as a checkpoint taken now would)."""
    return BinlogReader(
        config.replication_settings(), 5410, ServerIdRange(5410, 5410),
        {t: load_table_schema(cdc_conn, t) for t in tables}, start,
        reload_schema=lambda t: load_table_schema(cdc_conn, t), stop=stop,
    )




def test_ops_values_offsets_and_commits(admin, cdc_conn, config, database) -> None:
    run(admin, "CREATE TABLE r1 (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE TABLE other (id INT PRIMARY KEY)")
    start = now(cdc_conn)
    run(admin, "BEGIN", "INSERT INTO r1 VALUES (1, 'a'), (2, 'b')", "INSERT INTO other VALUES (1)",
        "UPDATE r1 SET v = 'c' WHERE id = 1", "COMMIT",
        "DELETE FROM r1 WHERE id = 2")
    end = now(cdc_conn)
    items = list(reader(config, cdc_conn, [TableId(database, "r1")], start))
    records = [i for i in items if isinstance(i, ChangeRecord)]
    assert [(r.op, r.values) for r in records] == [
        (ChangeKind.INSERT, (1, "a")), (ChangeKind.INSERT, (2, "b")),
        (ChangeKind.UPDATE_BEFORE, (1, "a")), (ChangeKind.UPDATE_AFTER, (1, "c")), (ChangeKind.DELETE, (2, "b"))
    ]
    assert all(r.table == TableId(database, "r1") and r.ts_ms > 0 for r in records)
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and offsets[2] == offsets[3]  # -U/+U share the row's offset
    assert all(start < o < end for o in offsets)
    commits = [i for i in items if isinstance(i, Committed)]
    assert commits[-1].offset == end  # the offset after the last transaction is the server's own
    assert all(o < commits[0].offset for o in offsets[:4]) and commits[0].offset < offsets[4]


def test_stop_offset_reads_exactly_up_to_it(admin, cdc_conn, config, database) -> None:
    run(admin, "CREATE TABLE r2 (id INT PRIMARY KEY)")
    low = now(cdc_conn)
    run(admin, "INSERT INTO r2 VALUES (1)", "INSERT INTO r2 VALUES (2)")
    high = now(cdc_conn)
    run(admin, "INSERT INTO r2 VALUES (3)", "FLUSH BINARY LOGS", "INSERT INTO r2 VALUES (4)")
    tables = [TableId(database, "r2")]
    window = [i.values for i in reader(config, cdc_conn, tables, low, stop=high) if isinstance(i, ChangeRecord)]
    assert window == [(1,), (2,)]
    assert list(reader(config, cdc_conn, tables, high, stop=high)) == []
    # across a rotation, to the end
    rest = [i for i in reader(config, cdc_conn, tables, high) if isinstance(i, ChangeRecord)]
    assert [r.values for r in rest] == [(3,), (4,)]
    assert rest[1].offset.file != rest[0].offset.file and rest[0].offset < rest[1].offset


def test_restart_from_any_record_neither_loses_nor_repeats(admin, cdc_conn, config, database) -> None:
    run(admin, "CREATE TABLE r3 (id INT PRIMARY KEY, v INT)")
    start = now(cdc_conn)
    run(admin, "BEGIN", "INSERT INTO r3 SELECT seq, 0 FROM seq_1_to_30", "UPDATE r3 SET v = 1 WHERE id <= 10",
        "DELETE FROM r3 WHERE id > 25", "COMMIT", "INSERT INTO r3 VALUES (100, 7)")
    tables = [TableId(database, "r3")]
    full = [i for i in reader(config, cdc_conn, tables, start) if isinstance(i, ChangeRecord)]
    assert len(full) == 30 + 20 + 5 + 1
    for k in (0, 5, 29, 30, 31, 49, 52, 55):
        resumed = [i for i in reader(config, cdc_conn, tables, full[k].offset) if isinstance(i, ChangeRecord)]
        expected = full[k + 1:]
        # a resume after a before image continues after its row, like the after image
        if full[k].op is ChangeKind.UPDATE_BEFORE:
            expected = full[k + 2:]
        assert [(r.op, r.values) for r in resumed] == [(r.op, r.values) for r in expected], k


def test_add_column_is_followed_and_a_double_change_stops(admin, cdc_conn, config, database) -> None:
    run(admin, "CREATE TABLE r4 (id INT PRIMARY KEY)")
    start = now(cdc_conn)
    tables = [TableId(database, "r4")]
    follow = reader(config, cdc_conn, tables, start)
    run(admin, "INSERT INTO r4 VALUES (1)", "ALTER TABLE r4 ADD COLUMN note VARCHAR(5) DEFAULT 'x'",
        "INSERT INTO r4 VALUES (2, 'y')")
    items = [i for i in follow if isinstance(i, ChangeRecord | SchemaChanged)]
    assert [type(i).__name__ for i in items] == ["ChangeRecord", "SchemaChanged", "ChangeRecord"]
    assert items[0].values == (1,) and items[2].values == (2, "y")
    assert items[1].schema.column_names == ("id", "note")
    # a reader that starts before both changes cannot know the intermediate schema
    run(admin, "ALTER TABLE r4 DROP COLUMN note")
    stale = reader(config, cdc_conn, tables, start)  # knows (id), as before the first ALTER
    run(admin, "ALTER TABLE r4 ADD COLUMN later INT")
    with pytest.raises(SchemaChangeError, match=f"rows of {database}.r4 that its columns do not describe: its column "
                                                "2 is named note where the table.s is later: the table map has "
                                                r"\(id LONG, note VARCHAR\(20 bytes\)\), the table \(id int"):
        list(stale)


def test_purged_binlog_is_a_clear_error(cdc_conn, config, database) -> None:
    gone = BinlogOffset("mysql-bin.000000", 4, flavor="mariadb")
    with pytest.raises(SourceConfigError, match="no longer on the server"):
        list(reader(config, cdc_conn, [TableId(database, "r1")], gone))


def test_blocking_reader_heartbeats_and_survives_a_killed_connection(mariadb_server, admin, cdc_conn, config,
                                                                     database) -> None:
    import queue
    import threading
    import time

    from airflow_provider_mysqlcdc.cdc.binlog.reader import Heartbeat

    run(admin, "CREATE TABLE r5 (id INT PRIMARY KEY)")
    table = TableId(database, "r5")
    blocking = BinlogReader(config.replication_settings(), 5411, ServerIdRange(5411, 5411),
                            {table: load_table_schema(cdc_conn, table)}, now(cdc_conn),
                            reload_schema=lambda t: load_table_schema(cdc_conn, t),
                            blocking=True, heartbeat_seconds=0.5)
    items: queue.Queue[Any] = queue.Queue()
    stopping = threading.Event()

    def consume() -> None:
        for item in blocking:
            items.put(item)
            if stopping.is_set() and isinstance(item, Heartbeat):
                return

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()

    def wait_for(predicate: Any, timeout: float = 15) -> list[Any]:
        seen, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                seen.append(items.get(timeout=0.2))
            except queue.Empty:
                continue
            if predicate(seen):
                return seen
        raise AssertionError(f"timed out; saw {seen}")

    wait_for(lambda seen: any(isinstance(i, Heartbeat) for i in seen))  # idle: heartbeats arrive
    run(admin, "INSERT INTO r5 VALUES (1), (2)")
    first = wait_for(lambda seen: sum(isinstance(i, ChangeRecord) for i in seen) == 2)
    with admin.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
        dumps = cur.fetchall()
        assert dumps, "the reader's dump thread should be on the server"
        for (thread_id,) in dumps:
            cur.execute(f"KILL {int(thread_id)}")
    run(admin, "INSERT INTO r5 VALUES (3)")
    second = wait_for(lambda seen: any(isinstance(i, ChangeRecord) for i in seen))
    stopping.set()
    thread.join(10)
    values = [i.values for i in first + second if isinstance(i, ChangeRecord)]
    assert values == [(1,), (2,), (3,)]  # nothing lost or repeated across the reconnect
