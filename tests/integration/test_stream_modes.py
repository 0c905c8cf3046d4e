"""The stream operator's startup modes, a purged binlog, and an ADD COLUMN while streaming.

The operator runs here without a DAG run (``deferrable=False``, stopping as soon as it is idle), as
a retry or a later DAG run would: each call continues from the lake's checkpoint.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.stream_task import stream_task

pytestmark = pytest.mark.usefixtures("connections")


def inserted_ids(base_uri: str, table: str) -> list[int]:
    changes = read_changes(base_uri, table)
    return [i for i, op in zip(changes.column("id").to_pylist(), changes.column("_op").to_pylist(), strict=True)
            if op == ChangeKind.INSERT]


def test_stop_at_offset_stops_once_the_checkpoint_reaches_it(admin, cdc_conn, database, tmp_path) -> None:
    table = f"{database}.stopping"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE stopping (id INT PRIMARY KEY)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        for row in (1, 2):
            cur.execute("INSERT INTO stopping VALUES (%s)", (row,))
    target = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False)
    stop_at = f"{target.file}:{target.position}"
    # only the offset can stop it: no idleness stop; the duration is a safety net the test would see
    summary = stream_task(base_uri, table, stop_at_offset=stop_at, stop_after_idle_seconds=None,
                          max_duration_seconds=30)
    assert summary["stopped"] == f"reached {stop_at}"
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and not checkpoint.offset < target
    assert inserted_ids(base_uri, table) == [1, 2]


def test_startup_modes(admin, cdc_conn, database, tmp_path) -> None:
    table = f"{database}.modes"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE modes (id INT PRIMARY KEY, v VARCHAR(5))")
        cur.execute("INSERT INTO modes VALUES (1, 'a'), (2, 'a')")
    middle = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False)
    latest = str(tmp_path / "latest")
    stream_task(latest, table, startup_mode="latest-offset")  # starts here, nothing to write yet
    with admin.cursor() as cur:
        cur.execute("INSERT INTO modes VALUES (3, 'b'), (4, 'b')")
    summary = stream_task(latest, table, startup_mode="latest-offset")  # continues from its checkpoint
    assert summary["rows"] == 2 and summary["stopped"] == "idle for 0 s"
    assert inserted_ids(latest, table) == [3, 4]

    specific = str(tmp_path / "specific")
    stream_task(specific, table, startup_mode="specific-offset", startup_offset=f"{middle.file}:{middle.position}")
    assert inserted_ids(specific, table) == [3, 4]

    earliest = str(tmp_path / "earliest")
    stream_task(earliest, table, startup_mode="earliest-offset")
    assert inserted_ids(earliest, table) == [1, 2, 3, 4]
    schema = load_table_schema(cdc_conn, TableId(database, "modes"))
    assert canonical_rows(read_table(earliest, table)) == table_rows(cdc_conn, schema)

    assert stream_task(str(tmp_path / "none"), table, startup_mode="snapshot") is None
    with pytest.raises(InvalidOptionError, match="startup_mode must be one of"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="sometime")
    with pytest.raises(InvalidOptionError, match="startup_offset must be 'binlog-file:position'"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="specific-offset", startup_offset="yesterday")
    with pytest.raises(InvalidOptionError, match="stop_at_offset must be 'binlog-file:position'"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="latest-offset", stop_at_offset="soon")
    with pytest.raises(InvalidOptionError, match="needs the finished snapshot"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="initial")


def test_gtid_and_timestamp_startup_find_the_next_transaction(admin, database, tmp_path) -> None:
    """The first transaction after a GTID position or at a commit time, across several binlog files."""
    table = f"{database}.moments"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE moments (id INT PRIMARY KEY)")
        for key in range(1, 4):
            cur.execute("INSERT INTO moments VALUES (%s)", (key,))
            cur.execute("FLUSH BINARY LOGS")
        cur.execute("SELECT @@gtid_binlog_pos")
        (after_three,) = cur.fetchone()
        second = math.ceil(time.time())  # binlog commit times have whole seconds
        time.sleep(second - time.time() + 0.05)
        cur.execute("INSERT INTO moments VALUES (4)")
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("INSERT INTO moments VALUES (5)")
    gtid = str(tmp_path / "gtid")
    stream_task(gtid, table, startup_mode="specific-offset", startup_offset=after_three)
    assert inserted_ids(gtid, table) == [4, 5]
    at = str(tmp_path / "timestamp")
    stream_task(at, table, startup_mode="timestamp", startup_timestamp=second * 1000)
    assert inserted_ids(at, table) == [4, 5]
    iso = str(tmp_path / "iso")
    stream_task(iso, table, startup_mode="timestamp",
                startup_timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    assert inserted_ids(iso, table) == [4, 5]
    future = str(tmp_path / "future")
    stream_task(future, table, startup_mode="timestamp", startup_timestamp=(second + 3600) * 1000)
    with admin.cursor() as cur:
        cur.execute("INSERT INTO moments VALUES (6)")
    stream_task(future, table)
    assert inserted_ids(future, table) == [6]
    with pytest.raises(InvalidOptionError, match="is a MySQL GTID set, but the server is MariaDB"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="specific-offset",
                    startup_offset="3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
    with pytest.raises(InvalidOptionError, match="startup_timestamp as epoch milliseconds or an ISO 8601"):
        stream_task(str(tmp_path / "bad"), table, startup_mode="timestamp", startup_timestamp="noon")


def test_purged_binlog_fails_clearly(cdc_conn, database, tmp_path, admin) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE purged (id INT PRIMARY KEY)")
    table = TableId(database, "purged")
    base_uri = str(tmp_path / "lake")
    gone = BinlogOffset("mysql-bin.000000", 4, flavor="mariadb")
    StreamStore(Lake.at(base_uri)).commit(Checkpoint(3, gone, {table: load_table_schema(cdc_conn, table)}), {})
    with pytest.raises(SourceConfigError, match="no longer on the server.*Ways back: .* on_position_lost"):
        stream_task(base_uri, str(table))


def test_add_column_while_streaming(admin, cdc_conn, database, tmp_path) -> None:
    table = f"{database}.grows"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE grows (id INT PRIMARY KEY, v INT)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        cur.execute("INSERT INTO grows VALUES (1, 10), (2, 20)")
        # without a DEFAULT (NULL in existing rows); one with a DEFAULT is tests/integration/test_schema_changes.py's
        cur.execute("ALTER TABLE grows ADD COLUMN note VARCHAR(10)")
        cur.execute("INSERT INTO grows VALUES (3, 30, 'three')")
        cur.execute("UPDATE grows SET note = 'one' WHERE id = 1")
    stream_task(base_uri, table)
    assert read_changes(base_uri, table).column_names[:3] == ["id", "v", "note"]
    assert_followed(cdc_conn, base_uri, table)


def assert_followed(cdc_conn: Any, base_uri: str, table: str) -> None:
    """The checkpoint holds the table's current schema and the lake equals the table."""
    schema = load_table_schema(cdc_conn, TableId.parse(table))
    assert StreamStore(Lake.at(base_uri)).read_checkpoint().schemas[schema.id] == schema  # type: ignore[union-attr]
    assert canonical_rows(read_table(base_uri, table)) == table_rows(cdc_conn, schema)


def test_column_type_changes_while_streaming(admin, cdc_conn, database, tmp_path) -> None:
    """A type change keeps the column's name: the table map's types and sizes tell it apart, so the
    stream follows it instead of decoding new rows with the old types (a wider DECIMAL read with the
    old scale would be off by powers of ten)."""
    table = f"{database}.retyped"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE retyped (id INT PRIMARY KEY, n INT, d DECIMAL(6,2))")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        cur.execute("INSERT INTO retyped VALUES (1, 10, 1.25), (2, 20, 2.50)")
        cur.execute("ALTER TABLE retyped MODIFY n BIGINT, MODIFY d DECIMAL(12,4)")
        cur.execute("INSERT INTO retyped VALUES (3, 30000000000, 12345678.1234)")
        cur.execute("UPDATE retyped SET d = 0.0001 WHERE id = 1")
    stream_task(base_uri, table)
    assert_followed(cdc_conn, base_uri, table)


def test_an_idle_stream_keeps_one_binlog_connection(admin, database, tmp_path) -> None:
    """Caught up, the stream waits on one replication connection with server heartbeats (no reconnect
    per poll), still sees the next change, and stops on time."""
    table = f"{database}.quiet"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE quiet (id INT PRIMARY KEY)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    result: dict[str, Any] = {}

    def dump_threads() -> set[int]:
        with admin.cursor() as cur:
            cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump' AND USER = 'cdc'")
            return {row[0] for row in cur.fetchall()}

    before = dump_threads()  # the first call's thread may linger on the server for a moment
    running = threading.Thread(target=lambda: result.update(stream_task(base_uri, table, stop_after_idle_seconds=4,
                                                                     poll_interval=0.3)))
    running.start()
    dumps: set[int] = set()
    for tick in range(25):
        dumps |= dump_threads() - before
        if tick == 5:
            with admin.cursor() as cur:
                cur.execute("INSERT INTO quiet VALUES (1)")
        time.sleep(0.1)
    running.join(30)
    assert result["rows"] == 1 and result["stopped"] == "idle for 4 s"
    assert len(dumps) == 1, f"the stream reconnected while idle: binlog dump threads {sorted(dumps)}"
    assert inserted_ids(base_uri, table) == [1]
