"""The row decoder's wire formats on hand-made packets: the documented examples of each packed format,
the columnar reading of images (places, then Arrow), and the cases that must leave an event to
mysql-replication. ``test_type_matrix`` checks both paths against a real server; MySQL 9's VECTOR is read
from a file a real MySQL server wrote, through ``BinlogReader`` with the file as its events."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import EVENT_FIELDS, ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.events import BinlogColumn, Rows, TableMap, all_present
from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows
from airflow_provider_mysqlcdc.cdc.binlog.row_columns import column_values, located_columns
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import _WIRE_READERS, RowDecoder, RowDecoders, _decimal, _time2
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import TYPES
from tests.mysql_fixtures import binlog_copy, file_reader, lake_rows, owner_expected, records

WRITE_ROWS_V1 = 23


def test_decimal_examples_of_the_mysql_manual() -> None:
    read, fraction_only = _decimal(14, 4).convert, _decimal(5, 5).convert
    assert read is not None and fraction_only is not None
    assert read(bytes.fromhex("810DFB38D204D2")) == Decimal("1234567890.1234")
    assert read(bytes.fromhex("7EF204C72DFB2D")) == Decimal("-1234567890.1234")
    assert fraction_only(bytes.fromhex("7FFFFE")).as_tuple() == Decimal("-0.00001").as_tuple()


def test_negative_times_are_one_fixed_point_number() -> None:
    hundredths = _time2(2).convert
    assert hundredths is not None
    assert hundredths(bytes.fromhex("80000000")) == dt.timedelta(0)
    assert hundredths(bytes.fromhex("7FFFFFFF")) == dt.timedelta(seconds=-0.01)
    assert hundredths(bytes.fromhex("7FFFFF00")) == dt.timedelta(seconds=-1)
    assert hundredths(bytes.fromhex("7FFFFEF6")) == dt.timedelta(seconds=-1.1)


def schema(*columns: Column) -> TableSchema:
    return TableSchema(TableId("db", "t"), columns, (columns[0].name,))


def event(decoder_columns: list[Any], images: bytes, present: bytes = b"\x03") -> Rows:
    """A write-rows event as the binlog dump parses it: the images follow the header."""
    data = bytes(20) + b"header" + images
    table_map = TableMap(1, TableId("db", "t"), decoder_columns, b"")
    return Rows(0, 0, WRITE_ROWS_V1, table_map, (ChangeKind.INSERT,), len(decoder_columns), present, None, data,
                26, len(data), all_present(len(decoder_columns), present, None))


ID = Column("id", "int", "int", nullable=False)
NOTE = Column("note", "varchar", "varchar(10)", nullable=False, charset="utf8mb4")
BINLOG = [BinlogColumn(type=3, name="id", unsigned=False),
          BinlogColumn(type=15, name="note", max_length=40, character_set_name="utf8")]


def image(nulls: int, id_: int, note: bytes | None) -> bytes:
    return bytes([nulls]) + struct.pack("<i", id_) + (b"" if note is None else bytes([len(note)]) + note)


def test_images_and_a_column_that_became_nullable() -> None:
    decoders = RowDecoders()
    rows = decoders.row_images(event(BINLOG, image(0, 1, b"a\xc3\xa9") + image(0, -2, b"")), schema(ID, NOTE))
    assert rows == [(1, "aé"), (-2, "")]
    # the schema says NOT NULL, the binlog has a NULL: the decoder tests every column from then on
    assert decoders.row_images(event(BINLOG, image(2, 3, None)), schema(ID, NOTE)) == [(3, None)]


def test_mysql_bitmaps_with_their_unused_bits_set() -> None:
    """MySQL sets a column bitmap's bits past the column count (0xff for two columns), MariaDB clears them:
    both are whole images, for the decoder and the reader's check alike; a bit of a column clear is not."""
    decoders = RowDecoders()
    mysql = event(BINLOG, image(0, 1, b"m"), present=b"\xff")
    assert mysql.full and decoders.row_images(mysql, schema(ID, NOTE)) == [(1, "m")]
    assert not event(BINLOG, image(0, 1, b"m"), present=b"\xfd").full
    assert all_present(9, b"\xff\x01", None) and not all_present(9, b"\xff\xfe", None)
    assert not all_present(2, b"\x03", b"\x01") and all_present(2, b"\x03", b"\xfb")


def test_tables_of_one_layout_share_a_decoder() -> None:
    """A database per tenant: each tenant's orders table reads with the first one's decoder (and what
    ``row_columns`` keeps with it); a table of other columns gets its own, and each reads its own rows."""
    decoders = RowDecoders()
    tenants = [TableSchema(TableId(f"tenant_{i}", "orders"), (ID, NOTE), ("id",)) for i in range(3)]
    wider = TableSchema(TableId("tenant_0", "notes"), (ID, Column("note", "varchar", "varchar(20)", nullable=False,
                                                                 charset="utf8mb4")), ("id",))
    built = [decoders.decoder(event(BINLOG, image(0, i, b"x")), s) for i, s in enumerate([*tenants, wider])]
    assert built[0] is not None and built[0] is built[1] is built[2]
    assert built[3] is not None and built[3] is not built[0]
    assert decoders.row_images(event(BINLOG, image(0, 7, b"t1")), tenants[1]) == [(7, "t1")]
    assert decoders.row_images(event(BINLOG, image(0, 8, b"w")), wider) == [(8, "w")]


def test_what_is_left_to_mysql_replication() -> None:
    decoders = RowDecoders()
    minimal = event(BINLOG, image(0, 1, b"x"), present=b"\x01")
    assert decoders.row_images(minimal, schema(ID, NOTE)) is None
    old_datetime = [BINLOG[0], BinlogColumn(type=12, name="note")]
    assert RowDecoder.for_table(schema(ID, Column("note", "datetime", "datetime")), old_datetime) is None
    stale = schema(ID, Column("note", "int", "int"))  # the schema no longer describes the table map
    assert RowDecoder.for_table(stale, BINLOG) is None


def test_every_binlog_type_of_the_registry_has_a_reader_and_every_reader_a_type() -> None:
    assert {kind for spec in TYPES for kind in spec.binlog_types} == set(_WIRE_READERS)


AMOUNT = Column("amount", "decimal", "decimal(12,2)", nullable=True, precision=12, scale=2)
WHEN = Column("at", "datetime", "datetime(3)", nullable=True, datetime_precision=3)
WIDE = [BINLOG[0], BinlogColumn(type=15, name="note", max_length=40, character_set_name="utf8"),
        BinlogColumn(type=246, name="amount", precision=12, decimals=2),
        BinlogColumn(type=18, name="at", fsp=3)]
NOTE_NULL = Column("note", "varchar", "varchar(10)", nullable=True, charset="utf8mb4")


def wide_image(nulls: int, id_: int, note: bytes | None, amount: bytes | None, at: bytes | None) -> bytes:
    return bytes([nulls]) + struct.pack("<i", id_) + b"".join(
        b"" if v is None else v for v in (None if note is None else bytes([len(note)]) + note, amount, at))


def datetime2(year: int, month: int, day: int, hour: int, minute: int, second: int, millis: int) -> bytes:
    """DATETIME(3) as stored: 1 sign bit, year*13+month, day, hour, minute, second; 2 bytes of the fraction."""
    ymd = (year * 13 + month) << 5 | day
    packed = (ymd << 17 | hour << 12 | minute << 6 | second) + 0x8000000000
    return packed.to_bytes(5, "big") + (millis * 10).to_bytes(2, "big")


@pytest.mark.usefixtures("columns_read")
def test_columns_of_many_events_at_once_equal_the_records() -> None:
    """Places, then Arrow: several events joined, NULLs and a skipped image; the values are those of
    ``row_images`` (DECIMAL's packed format, DATETIME2 with a fraction, a zero date as NULL)."""
    table = schema(ID, NOTE_NULL, AMOUNT, WHEN)
    plus, minus = bytes.fromhex("80000000010c"), bytes.fromhex("7ffffffffef3")  # 1.12 and -1.12
    first = event(WIDE, wide_image(0, 1, b"a\xc3\xa9", plus, datetime2(2024, 11, 1, 12, 0, 0, 123))
                  + wide_image(0b1110, 2, None, None, None), present=b"\x0f")
    second = event(WIDE, wide_image(0, -3, b"", minus, datetime2(0, 0, 0, 0, 0, 0, 0)), present=b"\x0f")
    decoders = RowDecoders()
    records = [*decoders.row_images(first, table), *decoders.row_images(second, table)]  # type: ignore[misc]
    assert records == [(1, "aé", Decimal("1.12"), dt.datetime(2024, 11, 1, 12, 0, 0, 123000)),
                       (2, None, None, None), (-3, "", Decimal("-1.12"), None)]
    located = [decoders.locate(first, table), decoders.locate(second, table)]
    assert all(x is not None for x in located)
    arrays = located_columns(located, None, table)  # type: ignore[arg-type]
    assert list(zip(*(a.to_pylist() for a in arrays), strict=True)) == records
    assert [a.type for a in arrays] == [pa.int32(), pa.string(), pa.decimal128(12, 2), pa.timestamp("us")]
    kept = located_columns(located, np.array([False, True, True]), table)  # type: ignore[arg-type]
    assert list(zip(*(a.to_pylist() for a in kept), strict=True)) == records[1:]
    assert column_values(located[0], 1) == ["aé", None]  # type: ignore[arg-type]


@pytest.mark.usefixtures("columns_read")
def test_a_table_s_buffer_gathers_events_read_alike_and_by_value() -> None:
    """``ImageBuffer``: located events of one layout joined, an event by value tuples between them, and the
    images an event's ``keep`` leaves out left out; the columns and the per-event facts are in order."""
    table = schema(ID, NOTE_NULL, AMOUNT, WHEN)
    decoders = RowDecoders()
    plus = bytes.fromhex("80000000010c")  # 1.12
    first = decoders.locate(event(WIDE, wide_image(0, 1, b"a", plus, datetime2(2024, 11, 1, 12, 0, 0, 123))
                                  + wide_image(0b1110, 2, None, None, None), present=b"\x0f"), table)
    second = decoders.locate(event(WIDE, wide_image(0b1110, 4, None, None, None)
                                   + wide_image(0b1110, 5, None, None, None), present=b"\x0f"), table)
    assert first is not None and second is not None
    at = BinlogOffset("mysql-bin.000007", 400)
    insert = (ChangeKind.INSERT,)
    buffer = ImageBuffer.of(table, [
        ChangeRows(insert, table.id, first, 2, at, 1_000),
        ChangeRows(insert, table.id, [(3, "c", None, None)], 1, replace(at, events_to_skip=1), 2_000),
        ChangeRows(insert, table.id, second, 2, replace(at, events_to_skip=2), 3_000, keep=(False, True)),
    ])
    columns, keep = buffer.columns()
    assert [c.to_pylist() for c in columns][:2] == [[1, 2, 3, 5], ["a", None, "c", None]]
    assert keep is not None and keep.tolist() == [True, True, True, False, True]
    assert (buffer.images, buffer.taken, buffer.last_ts) == (5, 4, 3_000)
    # kind, images per row, commit time, file, position, index in the transaction, images
    assert np.frombuffer(buffer.events, np.int64).reshape(-1, EVENT_FIELDS).tolist() == [
        [0, 1, 1_000, 7, 400, 0, 2], [0, 1, 2_000, 7, 400, 1, 1], [0, 1, 3_000, 7, 400, 2, 2]]


@pytest.mark.usefixtures("columns_read")
def test_places_after_a_column_became_nullable() -> None:
    decoders = RowDecoders()
    assert decoders.locate(event(BINLOG, image(0, 1, b"x")), schema(ID, NOTE)) is not None
    located = decoders.locate(event(BINLOG, image(2, 3, None) + image(0, 4, b"yz")), schema(ID, NOTE))
    assert located is not None and located.layout.nullable == (True, True)
    assert [a.to_pylist() for a in located_columns([located], None, schema(ID, NOTE))] == [[3, 4], [None, "yz"]]


VECTORS = "rust_mysql_common/vector.binlog"
UNSIGNED_ID = Column("id", "bigint", "bigint unsigned", nullable=False, unsigned=True)  # SERIAL
FOO = TableSchema(TableId("dtb", "foo"), (UNSIGNED_ID, Column("vector_column", "vector", "vector(3)", nullable=False)),
                  ("id",))
BAR = TableSchema(TableId("dtb", "bar"), (
    UNSIGNED_ID, Column("vector_column", "vector", "vector(2)", nullable=False),
    Column("foo", "text", "text", charset="utf8mb4"), Column("vector_column2", "vector", "vector(4)", nullable=False)),
    ("id",))


def float32(values: list[float]) -> list[float]:
    """``values`` as float32 (what a VECTOR holds) read back as Python floats."""
    return pa.array(values, pa.float32()).to_pylist()


def test_mysql_9_vectors_read_as_float32_lists(tmp_path: Path) -> None:
    """MySQL 9.0.1's VECTOR columns (tests/fixtures/mysql_binlogs/rust_mysql_common/vector.binlog), through the
    reader with the file as its events: the rows the owner asserts (their bytes as float32), by value and as the
    columnar stream's lake rows (list<float32>); the file writes the same rows again after recreating the table."""
    owner, dimensions = owner_expected(VECTORS)
    assert (owner["event_pos"], dimensions["table_map_dimensionality"]) == (1085, {"dtb.foo": [3], "dtb.bar": [2, 4]})
    expected = [(row["id"], list(struct.unpack("<3f", bytes(row["vector_column_bytes"]))))
                for row in owner["rows_after_image"]]
    assert expected[1][1] == [1.0, -1.0, 0.0]
    files = binlog_copy(tmp_path, VECTORS)
    written = records(file_reader(files, FOO, BAR), FOO.id)
    assert [(r.op, r.values) for r in written] == [(ChangeKind.INSERT, row) for row in expected * 2]
    assert [r.offset.position for r in written] == [851, 851, 2303, 2303]  # their transactions' starts
    rows = lake_rows(file_reader(files, FOO, BAR), FOO)
    assert rows.schema.field("vector_column").type == pa.list_(pa.float32())
    assert rows.column("vector_column").to_pylist() == [floats for _, floats in expected * 2]


def test_vectors_beside_text_in_writes_and_deletes(tmp_path: Path) -> None:
    """``dtb.bar``'s VECTOR(2), TEXT and VECTOR(4) (the owner's dimensionalities), written, deleted, written."""
    files = binlog_copy(tmp_path, VECTORS)
    bar = [(r.op, r.values) for r in records(file_reader(files, FOO, BAR), BAR.id)]
    first = (1, float32([1.1, 2.2]), None, float32([1.1, 2.2, 3.3, 4.4]))
    second = (2, float32([1.01, -1.01]), "bar", [42.0, 43.0, 44.0, 45.0])
    third = (3, float32([2.01, -2.01]), None, float32([42.1, 43.2, 44.3, 45.4]))
    insert, delete = ChangeKind.INSERT, ChangeKind.DELETE
    assert bar == [(insert, first), (insert, second)] * 2 + [(delete, second), (insert, third)]
    rows = lake_rows(file_reader(files, FOO, BAR), BAR)
    assert rows.column("_op").to_pylist() == ["+I"] * 4 + ["-D", "+I"]
    assert rows.select(["id", "vector_column", "foo", "vector_column2"]).to_pylist() == [
        dict(zip(("id", "vector_column", "foo", "vector_column2"), values, strict=True)) for _, values in bar]
