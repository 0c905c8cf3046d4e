"""Every MySQL type, inserted once, read by SELECT and from the binlog: the canonical values must be equal.

Each column lists SQL literals for rows 1..n; a final row is NULL in every column that allows it.
Hand-checked canonical values guard against both sides being wrong the same way. The binlog is read
by three decoders: mysql-replication's with ``RowConverter.from_binlog``, ``row_decoder``'s records,
and the columnar stream's (``row_decoder`` places read into Arrow by ``row_columns``, many values at
once where it can, else with the row decoder's readers), whose lake rows must equal the records'.
All of it runs twice: with the binlog as is, and compressed (MariaDB's ``log_bin_compress``).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, ChangeRows
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import RowDecoder
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.converters import (
    RowConverter,
    arrow_schema,
    arrow_type,
    select_expression,
)
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.server_info import MARIADB
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.lake.changelog import changes_table, rows_table
from tests.arrow_rows import canonical_rows
from tests.compressed_binlog import PLAIN_ROWS_EVENTS, compressed_binlog, event_types_since
from tests.integration.type_matrix import MATRIX, MAX_DEC, ROWS

DECODERS = ["mysql-replication", "row_decoder", "columnar"]


@pytest.fixture(scope="module", params=["plain", "compressed"])
def captured(request, mariadb_server, database) -> dict[str, Any]:
    """The matrix written once as is and once with the binlog compressed (MariaDB's log_bin_compress)."""
    compress = request.param == "compressed"
    table = "matrix_compressed" if compress else "matrix"
    admin = mariadb_server.admin_connect(database)
    columns = ", ".join(f"`{name}` {ddl}" for name, (ddl, _, _) in MATRIX.items())
    with admin.cursor() as cur, compressed_binlog(mariadb_server, compress):
        cur.execute(f"DROP TABLE IF EXISTS {table}")  # pytest may set a parametrized module fixture up again
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, {columns})")
        cur.execute("SHOW MASTER STATUS")
        file, position = cur.fetchone()[:2]
        cur.execute("SET SESSION sql_mode = ''")  # zero dates and bad enum values, as legacy apps write them
        for row in range(1, ROWS + 1):
            names = [n for n, (_, values, _) in MATRIX.items() if row <= len(values)]
            literals = [MATRIX[n][1][row - 1] for n in names]
            cur.execute(f"INSERT INTO {table} (id{''.join(', `' + n + '`' for n in names)}) "
                        f"VALUES ({row}{''.join(', ' + v for v in literals)})")
        cur.execute(f"UPDATE {table} SET bu = 1, fl = 0.5, st = 'y', ts = '2000-01-01 00:00:00', bn = X'02' "
                    f"WHERE id = 1")
    admin.close()
    if compress:  # else the second run would only repeat the first
        types = set(event_types_since(mariadb_server, file, position))
        assert {"Write_rows_compressed_v1", "Update_rows_compressed_v1"} <= types and not PLAIN_ROWS_EVENTS & types

    conn = mariadb_server.cdc_connect(database, init_command="SET time_zone = '+00:00'")
    schema = load_table_schema(conn, TableId(database, table))
    select = f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {table} ORDER BY id"
    with conn.cursor() as cur:
        cur.execute(select)
        selected = cur.fetchall()
    berlin = mariadb_server.cdc_connect(database, init_command="SET time_zone = '+02:00'")
    with berlin.cursor() as cur:
        cur.execute(select)
        selected_plus2 = cur.fetchall()

    settings = {"host": mariadb_server.host, "port": mariadb_server.port,
                "user": mariadb_server.cdc_user, "password": mariadb_server.cdc_password}
    return {"schema": schema, "selected": selected, "selected_plus2": selected_plus2, "settings": settings,
            "start": BinlogOffset(file, position, flavor=MARIADB)}


def read_binlog(captured: dict[str, Any], decoder: str) -> dict[str, list[Any]]:
    """The matrix's insert images and update (before, after) pairs, decoded by ``decoder``."""
    schema: TableSchema = captured["schema"]
    server_id = 5401 + DECODERS.index(decoder)
    reader = BinlogReader(captured["settings"], server_id, ServerIdRange(server_id, server_id), {schema.id: schema},
                          captured["start"], reload_schema=lambda t: schema, decode_rows=decoder != "mysql-replication")
    if decoder == "columnar":
        table = lake_rows(reader, schema)
        images = list(zip(table.column("_op").to_pylist(), canonical_rows(table.select(schema.column_names)),
                          strict=True))
    else:
        images = [(r.op, r.values) for r in reader if isinstance(r, ChangeRecord)]
    before = [v for op, v in images if op == ChangeKind.UPDATE_BEFORE]
    after = [v for op, v in images if op == ChangeKind.UPDATE_AFTER]
    inserted = [v for op, v in images if op == ChangeKind.INSERT]
    return {"inserted": inserted, "updates": list(zip(before, after, strict=True))}


def lake_rows(reader: BinlogReader, schema: TableSchema) -> pa.Table:
    """The columnar stream's lake rows of every rows event the reader passes."""
    events = [r for r in reader.rows() if isinstance(r, ChangeRows)]
    assert len(events) > 1  # several events joined into one buffer
    return rows_table(ImageBuffer.of(schema, events))


@pytest.fixture(scope="module", params=DECODERS)
def binlog(request, captured) -> dict[str, list[Any]]:
    return read_binlog(captured, request.param)


def test_select_and_binlog_agree_for_every_type(captured, binlog) -> None:
    schema: TableSchema = captured["schema"]
    convert = RowConverter(schema)
    from_select = [convert.from_select(r) for r in captured["selected"]]
    from_binlog = binlog["inserted"]
    assert len(from_binlog) == ROWS
    # row 1 was updated after the inserts; compare the insert images with a SELECT of the same state
    differences = [
        (row, schema.columns[i].name, s, b)
        for row, (selected, decoded) in enumerate(zip(from_select, from_binlog, strict=True), start=1)
        for i, (s, b) in enumerate(zip(selected, decoded, strict=True))
        if row > 1 and s != b
    ]
    assert differences == []
    before, after = binlog["updates"][0]
    assert after == from_select[0]
    names = schema.column_names
    changed = {names[i] for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a}
    assert changed == {"bu", "fl", "st", "ts", "bn"}
    assert before[names.index("bu")] == 2**64 - 1 and after[names.index("bn")] == b"\x02\x00\x00\x00"
    assert after[names.index("st")] == "y" and after[names.index("fl")] == 0.5


def test_connectorx_arrow_path_gives_the_same_values(mariadb_server, captured) -> None:
    schema: TableSchema = captured["schema"]
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    table = ArrowSelect(config, schema).read(Chunk(schema.id, 0, None, None)).sort_by("id")
    assert table.schema == arrow_schema(schema)
    expected = [RowConverter(schema).from_select(r) for r in captured["selected"]]
    differences = [
        (row[0], schema.columns[i].name, e, a)
        for row, got in zip(expected, canonical_rows(table), strict=True)
        for i, (e, a) in enumerate(zip(row, got, strict=True))
        if e != a
    ]
    assert differences == []


def test_decoders_give_identical_values(captured) -> None:
    """Beyond equality with SELECT: the same types (True vs 1, Decimal exponents) and the images of row 1."""
    old, new = (read_binlog(captured, decoder) for decoder in DECODERS[:2])
    assert old == new
    typed = [[(type(v), v.as_tuple() if isinstance(v, Decimal) else v) for v in row] for row in old["inserted"]]
    assert typed == [[(type(v), v.as_tuple() if isinstance(v, Decimal) else v) for v in row] for row in new["inserted"]]


@pytest.mark.usefixtures("columns_read")
def test_columnar_lake_rows_equal_the_records(captured) -> None:
    """The stream's lake rows, Arrow built from the wire, equal those built from the row decoder's
    records: values, types, nulls and metadata; read value by value and with numpy."""
    schema: TableSchema = captured["schema"]

    def reader(server_id: int) -> BinlogReader:
        return BinlogReader(captured["settings"], server_id, ServerIdRange(server_id, server_id),
                            {schema.id: schema}, captured["start"], reload_schema=lambda t: schema)

    records = [r for r in reader(5407) if isinstance(r, ChangeRecord)]
    columnar = lake_rows(reader(5408), schema)
    expected = changes_table(records, schema)
    assert columnar.num_rows == len(records)
    assert columnar.schema == expected.schema
    for name in columnar.column_names:
        assert columnar.column(name).equals(expected.column(name)), name


def test_row_decoder_reads_every_type_itself(captured) -> None:
    """Not left to mysql-replication, which would make the decoders' comparison above vacuous: each
    column's binlog type is one its registry row lists, and has a wire reader."""
    from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
    from airflow_provider_mysqlcdc.cdc.binlog.events import Rows

    start: BinlogOffset = captured["start"]
    dump = BinlogDump(captured["settings"], 5409, start.file, start.position)
    try:
        event = next(e for e in dump if isinstance(e, Rows))
        assert RowDecoder.for_table(captured["schema"], event.table_map.columns) is not None
    finally:
        dump.close()


def test_hand_checked_values(captured, binlog) -> None:
    schema: TableSchema = captured["schema"]
    rows = binlog["inserted"]
    names = schema.column_names
    for name, (_, _, expected) in MATRIX.items():
        for row, value in expected.items():
            assert rows[row - 1][names.index(name)] == value, (name, row)
    nullable = [v for c, v in zip(schema.columns, rows[-1], strict=True) if c.nullable and c.name != "id"]
    assert all(v is None for v in nullable)  # the NULL row
    assert rows[-1][names.index("sn")] == "" and rows[-1][names.index("nbu")] == 0  # NOT NULL: '' and defaults
    wkb = rows[0][names.index("ge")]
    assert wkb[:5] == b"\x01\x03\x00\x00\x00"  # little-endian WKB polygon, SRID stripped


def test_timestamps_are_utc_whatever_the_session_time_zone(captured) -> None:
    schema: TableSchema = captured["schema"]
    utc = [RowConverter(schema).from_select(r) for r in captured["selected"]]
    plus2 = [RowConverter(schema, "+02:00").from_select(r) for r in captured["selected_plus2"]]
    assert plus2 == utc
    assert RowConverter(schema, "Europe/Berlin").from_select(captured["selected_plus2"][0])  # a named zone converts


def test_arrow_arrays_build_for_every_column(captured) -> None:
    schema: TableSchema = captured["schema"]
    convert = RowConverter(schema)
    rows = [convert.from_select(r) for r in captured["selected"]]
    table = pa.Table.from_pylist([dict(zip(schema.column_names, r, strict=True)) for r in rows],
                                 schema=arrow_schema(schema))
    assert table.num_rows == ROWS
    assert table.column("bu").type == pa.uint64() and table.column("bu")[1].as_py() == 0
    assert table.column("ts").type == pa.timestamp("us", tz="UTC")
    assert arrow_type(schema.column("d65")) == pa.decimal256(65, 30)
    assert table.column("d65")[0].as_py() == Decimal(MAX_DEC)


DATES = {  # column -> (type, SQL literals for rows 1.., which connectorx reads as they are)
    "da": ("DATE", ["'1000-01-01'", "'9999-12-31'", "'1969-12-31'", "'0001-01-01'", "'0000-01-01'"]),
    "dm": ("DATETIME", ["'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "'1969-12-31 23:59:59'",
                        "'0999-12-31 23:59:59'", "'0000-01-01 00:00:00'"]),
    "dm6": ("DATETIME(6)", ["'9999-12-31 23:59:59.999999'", "'1969-12-31 23:59:59.999999'", "'2024-02-29 12:00:00.5'",
                            "'0001-01-01 00:00:00.000001'", "'0000-12-31 23:59:59.999999'"]),
    "ts": ("TIMESTAMP NULL", ["'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "'2024-03-31 01:30:00'"]),
    "ts6": ("TIMESTAMP(6) NULL", ["'2038-01-19 03:14:07.999999'", "'1970-01-01 00:00:01.000001'",
                                  "'2024-10-27 01:30:00.25'"]),
}


def test_connectorx_reads_dates_as_they_are_until_it_meets_one_it_cannot(mariadb_server, database) -> None:
    """Valid dates, DATETIMEs and TIMESTAMPs are selected as they are (the server's cheapest SELECT) and read as
    pymysql's SELECT and the binlog read them: year 0, which Python has not, as NULL; TIMESTAMPs as the UTC
    instant whatever the server's time zone. A zero date added afterwards makes the reader select every date
    through the expressions that read it as NULL, the SELECT that met it included; so are invalid dates (not the
    next valid one)."""
    admin = mariadb_server.admin_connect(database)
    rows = max(len(values) for _, values in DATES.values()) + 1  # the last row NULL everywhere
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE dates (id INT PRIMARY KEY, "
                    f"{', '.join(f'`{n}` {ddl} NULL' for n, (ddl, _) in DATES.items())})")
        cur.execute("SET SESSION sql_mode = ''")  # dates before 1000
        for row in range(1, rows + 1):
            names = [n for n, (_, values) in DATES.items() if row <= len(values)]
            cur.execute(f"INSERT INTO dates (id{''.join(', `' + n + '`' for n in names)}) "
                        f"VALUES ({row}{''.join(', ' + DATES[n][1][row - 1] for n in names)})")
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    conn = mariadb_server.cdc_connect(database, init_command="SET time_zone = '+00:00'")
    schema = load_table_schema(conn, TableId(database, "dates"))
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM dates ORDER BY id")
        expected = [RowConverter(schema).from_select(r) for r in cur.fetchall()]
    assert expected[4][1:4] == (None, None, None) and expected[3][1] == dt.date(1, 1, 1)  # year 0; year 1
    select = ArrowSelect(config, schema)
    with admin.cursor() as cur:
        cur.execute("SET GLOBAL time_zone = '+05:00'")  # connectorx's new connections start at +05:00
        try:
            table = select.read(Chunk(schema.id, 0, None, None)).sort_by("id")
        finally:
            cur.execute("SET GLOBAL time_zone = '+00:00'")
    assert not select.reads_dates_exactly
    assert canonical_rows(table) == expected

    with admin.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        cur.execute(f"INSERT INTO dates (id, da, dm, dm6, ts) VALUES ({rows + 1}, '2020-02-30', '2021-02-29 10:00:00', "
                    f"'2020-04-31 00:00:00.5', '0000-00-00 00:00:00')")
    table = select.read(Chunk(schema.id, 0, None, None)).sort_by("id")
    assert select.reads_dates_exactly
    assert canonical_rows(table) == [*expected, (rows + 1, None, None, None, None, None)]
    admin.close()
    conn.close()
