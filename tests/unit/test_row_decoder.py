"""The row decoder's wire formats on hand-made packets: the documented examples of each packed format,
and the cases that must leave an event to mysql-replication. ``test_type_matrix`` checks it against
a real server."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from pymysqlreplication.column import Column as BinlogColumn

from airflow_provider_mysqlcdc.cdc.row_decoder import _WIRE_READERS, RowDecoder, RowDecoders, _decimal, _time2
from airflow_provider_mysqlcdc.cdc.schema import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.type_registry import TYPES

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


def event(decoder_columns: list[Any], images: bytes, present: bytes = b"\x03") -> Any:
    """A write-rows event as mysql-replication leaves it after its header: the images are what is left."""
    data = bytes(20) + b"header" + images
    packet = SimpleNamespace(get_all_data=lambda: data, read_bytes=len(b"header"))
    return SimpleNamespace(event_type=WRITE_ROWS_V1, number_of_columns=len(decoder_columns), columns=decoder_columns,
                           columns_present_bitmap=present, packet=packet, event_size=len(data) - 20)


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


def test_what_is_left_to_mysql_replication() -> None:
    decoders = RowDecoders()
    minimal = event(BINLOG, image(0, 1, b"x"), present=b"\x01")
    assert decoders.row_images(minimal, schema(ID, NOTE)) is None
    binary_json = [BINLOG[0], BinlogColumn(type=245, name="note", length_size=4)]
    assert RowDecoder.for_table(schema(ID, Column("note", "json", "json")), binary_json) is None
    old_datetime = [BINLOG[0], BinlogColumn(type=12, name="note")]
    assert RowDecoder.for_table(schema(ID, Column("note", "datetime", "datetime")), old_datetime) is None
    stale = schema(ID, Column("note", "int", "int"))  # the schema no longer describes the table map
    assert RowDecoder.for_table(stale, BINLOG) is None


def test_every_binlog_type_of_the_registry_has_a_reader_and_every_reader_a_type() -> None:
    assert {kind for spec in TYPES for kind in spec.binlog_types} == set(_WIRE_READERS)
