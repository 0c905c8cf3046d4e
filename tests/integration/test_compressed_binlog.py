"""MariaDB's compressed binlog, read for real: every change comes out as it would uncompressed, and
an event the reader cannot decode stops it instead of being skipped.

Compression is on for this module only (``tests.compressed_binlog``: the server is shared by the
session), with the smallest minimum length, and each test first checks that the binlog really holds
compressed events, so that none can pass with compression silently off. The type matrix and the
consistency test run once more with compression on as well.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
from airflow_provider_mysqlcdc.cdc.binlog.events import Query
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, ChangeRows
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import Located
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter, select_expression
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceConfigError
from airflow_provider_mysqlcdc.lake.changelog import rows_table
from dev import mariadb
from dev.ports import free_port
from tests.arrow_rows import canonical_rows
from tests.compressed_binlog import COMPRESSED_ROWS_EVENTS, PLAIN_ROWS_EVENTS, compressed_binlog, event_types_since

COLUMNS = ("id INT PRIMARY KEY, big BIGINT UNSIGNED NOT NULL, amount DECIMAL(12,2), name VARCHAR(40), "
           "note TEXT, at DATETIME(6), flag BIT(1), doc JSON, data BLOB, kind ENUM('a','b'))")
ROW = "({id}, 18446744073709551615, -12.5, 'café 😀 {id}', REPEAT('long text ', 30), " \
      "'2024-02-29 12:34:56.789012', b'1', '{{\"k\": [1, 2]}}', X'00FF00FF', 'b')"


@pytest.fixture(scope="module")
def compressed(mariadb_server: mariadb.MariaDbServer) -> Iterator[None]:
    with compressed_binlog(mariadb_server):
        yield


def config_of(server: mariadb.MariaDbServer) -> ConnectionConfig:
    return ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)


def selected(conn: Any, schema: TableSchema, key: int) -> tuple[Any, ...]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {schema.id.quoted} "
                    f"WHERE id = %s", (key,))
        return RowConverter(schema).from_select(cur.fetchone())


def test_reader_yields_exactly_the_changes(compressed, mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE kinds ({COLUMNS}")
    schema = load_table_schema(cdc_conn, TableId(database, "kinds"))
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn))
    expected: list[tuple[ChangeKind, tuple[Any, ...]]] = []
    with admin.cursor() as cur:
        cur.execute(f"INSERT INTO kinds VALUES {', '.join(ROW.format(id=i) for i in (1, 2, 3))}")
        expected += [(ChangeKind.INSERT, selected(cdc_conn, schema, i)) for i in (1, 2, 3)]
        cur.execute("INSERT INTO kinds (id, big) VALUES (4, 0)")  # NULLs
        expected.append((ChangeKind.INSERT, selected(cdc_conn, schema, 4)))
        before = selected(cdc_conn, schema, 2)
        cur.execute("UPDATE kinds SET amount = 7.25, name = NULL, doc = '[]', kind = 'a' WHERE id = 2")
        expected += [(ChangeKind.UPDATE_BEFORE, before), (ChangeKind.UPDATE_AFTER, selected(cdc_conn, schema, 2))]
        gone = selected(cdc_conn, schema, 3)
        cur.execute("DELETE FROM kinds WHERE id = 3")
        expected.append((ChangeKind.DELETE, gone))
    end = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn))

    types = event_types_since(mariadb_server, start.file, start.position)
    assert COMPRESSED_ROWS_EVENTS <= set(types) and not PLAIN_ROWS_EVENTS & set(types), types
    assert expected[1][1][schema.column_names.index("at")] == dt.datetime(2024, 2, 29, 12, 34, 56, 789012)
    assert expected[4][1][schema.column_names.index("amount")] == Decimal("-12.50")

    def reader(server_id: int, decode_rows: bool = True) -> BinlogReader:
        config = config_of(mariadb_server)
        return BinlogReader(config.replication_settings(), server_id, config.server_id, {schema.id: schema},
                            start, reload_schema=lambda t: schema, stop=end, decode_rows=decode_rows)

    # mysql-replication's decoding, the row decoder's, and the columnar stream's
    assert [(r.op, r.values) for r in reader(5701, decode_rows=False) if isinstance(r, ChangeRecord)] == expected
    assert [(r.op, r.values) for r in reader(5702) if isinstance(r, ChangeRecord)] == expected
    events = [r for r in reader(5703).rows() if isinstance(r, ChangeRows)]
    assert all(isinstance(e.images, Located) for e in events)  # read from the packet, not left to the fallback
    lake = rows_table(ImageBuffer.of(schema, events))
    assert list(zip(lake.column("_op").to_pylist(), canonical_rows(lake.select(schema.column_names)),
                    strict=True)) == expected


def test_a_compressed_statement_is_a_query_event(compressed, mariadb_server, admin, cdc_conn) -> None:
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn))
    statement = "CREATE TABLE probe (id INT PRIMARY KEY, note VARCHAR(200) COMMENT 'ünïcode 😀 comment')"
    with admin.cursor() as cur:
        cur.execute(statement)
    assert event_types_since(mariadb_server, start.file, start.position)["Query_compressed"] == 1
    dump = BinlogDump(config_of(mariadb_server).replication_settings(), 5704, start.file, start.position)
    try:
        events = [e for e in dump if isinstance(e, Query)]
    finally:
        dump.close()
    assert [e.query for e in events] == [statement]


@pytest.fixture(scope="module")
def private_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mariadb.MariaDbServer]:
    """A server of this module's own: the incident it logs would stop any replica of the shared one."""
    base: Path = tmp_path_factory.mktemp("incident-mariadb")
    server = mariadb.start(base, free_port())
    yield server
    mariadb.stop(base)


def test_lost_events_stop_the_stream(private_server) -> None:
    """A statement on a non-transactional table too large for the statement cache is applied in part
    and logged as an INCIDENT_EVENT (LOST_EVENTS) instead of its rows: skipping it would diverge."""
    admin = private_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
        cur.execute("CREATE TABLE shop.notes (id INT PRIMARY KEY, body TEXT) ENGINE=MyISAM")
    config = config_of(private_server)
    control = config.connect()
    schema = load_table_schema(control, TableId("shop", "notes"))
    start = read_current_offset(control, ServerInfo.read(control))
    with admin.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.max_binlog_stmt_cache_size")
        (cache,) = cur.fetchone()
        cur.execute("SET GLOBAL max_binlog_stmt_cache_size = 4096")
        try:
            with private_server.admin_connect("shop").cursor() as writer:
                with pytest.raises(Exception, match="max_binlog_stmt_cache_size"):
                    writer.execute("INSERT INTO notes SELECT seq, REPEAT('x', 1000) FROM seq_1_to_100")
                writer.execute("INSERT INTO notes VALUES (1000, 'after')")
        finally:
            cur.execute("SET GLOBAL max_binlog_stmt_cache_size = %s", (cache,))
        cur.execute("SELECT COUNT(*) FROM shop.notes")
        assert cur.fetchone()[0] > 1  # rows the binlog does not have
    assert event_types_since(private_server, start.file, start.position)["Incident"] == 1

    reader = BinlogReader(config.replication_settings(), 5705, config.server_id, {schema.id: schema}, start,
                          reload_schema=lambda t: schema)
    records: list[Any] = []
    with pytest.raises(SourceConfigError, match=r"INCIDENT_EVENT \(type 26\) ending at mysql-bin\.\d+:\d+") as error:
        records.extend(reader)
    assert "max_binlog_stmt_cache_size" in str(error.value) and "re-snapshot the captured tables" in str(error.value)
    assert not [r for r in records if isinstance(r, ChangeRecord)]  # nothing after it was taken
    start_offset: BinlogOffset = start
    assert str(start_offset) in str(error.value)  # the transaction it is in starts there
