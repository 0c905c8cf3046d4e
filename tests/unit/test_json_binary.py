"""MySQL's binary JSON as the text MySQL's SELECT prints (``json_binary``), through the row decoder and the
columnar path, on the bytes real MySQL servers wrote (``tests/fixtures/mysql_binlogs``); then each rule of the
text on small documents built here (our reading of the format, so only as extra checks)."""

from __future__ import annotations

import base64
import json
import struct

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.json_binary import to_text
from airflow_provider_mysqlcdc.cdc.binlog.row_columns import located_columns
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import RowDecoders
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import RowDecodeError
from tests.binlog_rows import MYSQL_BINLOGS, rows_events

OPAQUE = "rust_mysql_common/json-opaque.binlog"
# MySQL 9.0.1's documents as SELECT prints them (Json_wrapper::to_string): the owner's values (catalogue.json)
# with DECIMAL as a number and the temporal values with MySQL's six fraction digits
OPAQUE_TEXT = {
    736: '{"a": "base64:type15:VQ=="}',  # an opaque VARCHAR
    846: '{"b": "2012-03-18"}',
    963: '{"c": "2012-03-18 11:30:45.000000"}',
    1080: '{"c": "87:31:46.654321"}',
    1197: '{"d": 123.456}',
    1312: '{"e": 9.00}',
    1428: '{"e": [0, 1, true, false]}',
    1551: '{"e": null}',
}
GENERATED = "rust_mysql_common/json.binlog.000001"
T = TableSchema(TableId("mysql", "t"), (Column("id", "int", "int", nullable=False), Column("json_col", "json", "json"),
                                        Column("name", "varchar", "varchar(100)", charset="utf8mb4"),
                                        Column("age", "int", "int")), ("id",))


def test_opaque_values_of_a_mysql_9_binlog_are_what_select_prints() -> None:
    table = TableSchema(TableId("foo", "test"), (Column("a", "json", "json"),), ())
    decoders = RowDecoders()
    events = dict(rows_events(OPAQUE))
    assert sorted(events) == sorted(OPAQUE_TEXT)
    for position, text in OPAQUE_TEXT.items():
        assert decoders.row_images(events[position], table) == [(text,)]
        located = decoders.locate(events[position], table)
        assert located is not None
        assert [a.to_pylist() for a in located_columns([located], None, table)] == [[text]]
    catalogue = json.loads((MYSQL_BINLOGS / "catalogue.json").read_text())
    owner = {e["event_pos"]: e["first_row_after_image_json"] for e in catalogue["files"][OPAQUE]["expected"]}
    assert {p: json.loads(t, parse_float=str) for p, t in OPAQUE_TEXT.items()} == owner  # the owner's DECIMALs: text


def test_documents_agree_with_the_columns_mysql_generated_from_them() -> None:
    """``name`` is ``json_col->>'$.name'`` and ``age`` ``json_col->'$.age'``, computed by the MySQL 8.0.22 server
    that wrote the binlog: the text read from each document holds the same values."""
    decoders, images = RowDecoders(), []
    for _, event in rows_events(GENERATED):
        if event.type_code != 39:
            images += decoders.row_images(event, T) or []
    assert len(images) == 6 + 12
    assert images[0] == (1, '{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}', "Joe", 24)
    for _, document, name, age in images:
        assert json.loads(document) == {"age": age, "data": json.loads(document)["data"], "name": name}


def binary(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + body


def length(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def string(text: str) -> bytes:
    raw = text.encode()
    return binary(0x0C, length(len(raw)) + raw)


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.0"), (-0.0, "-0.0"), (0.1, "0.1"), (3.14, "3.14"), (2.5e-5, "0.000025"), (1e-15, "0.000000000000001"),
    (1e-16, "1e-16"), (1e14, "100000000000000.0"), (1e15, "1e15"), (1.5e300, "1.5e300"),
    (1234567890123456.7, "1234567890123456.8"), (123456789012345678.0, "1.2345678901234568e17"),
])
def test_doubles_as_my_gcvt_writes_them(value: float, text: str) -> None:
    assert to_text(binary(0x0B, struct.pack("<d", value))) == text


def test_scalars_strings_and_the_empty_value() -> None:
    assert to_text(b"") == "null"  # MySQL reads an empty value as the JSON null
    assert to_text(binary(0x0A, struct.pack("<Q", 2**64 - 1))) == "18446744073709551615"
    assert to_text(binary(0x09, struct.pack("<q", -(2**63)))) == str(-(2**63))
    assert to_text(string('a"b\\c\n\t\x01\x1f/ü€\x7f')) == '"a\\"b\\\\c\\n\\t\\u0001\\u001f/ü€\x7f"'
    assert to_text(binary(0x0F, bytes([253]) + length(2) + b"ok")) == '"ok"'  # opaque VAR_STRING: a string


def test_opaque_binary_and_temporal_values() -> None:
    blob = bytes(range(60))
    encoded = base64.b64encode(blob).decode()
    text = to_text(binary(0x0F, bytes([252]) + length(60) + blob))
    assert text == f'"base64:type252:{encoded[:76]}\\n{encoded[76:]}"'  # MySQL's base64: a newline every 76
    minus_838 = -(((838 << 12) | (59 << 6) | 59) << 24)  # TIME '-838:59:59', packed
    assert to_text(binary(0x0F, bytes([11]) + length(8) + struct.pack("<q", minus_838))) == '"-838:59:59.000000"'
    ymd, hms = ((2024 * 13 + 2) << 5) | 29, (23 << 12) | (59 << 6) | 58
    packed = (((ymd << 17) | hms) << 24) | 999_999
    assert to_text(binary(0x0F, bytes([7]) + length(8) + struct.pack("<q", packed))) == (
        '"2024-02-29 23:59:58.999999"')  # a TIMESTAMP


def test_large_containers_inline_32_bit_integers() -> None:
    """A large array (4-byte counts and offsets) inlines int32 and uint32; a nested small object is at its offset."""
    nested = struct.pack("<HH", 1, 12) + struct.pack("<HH", 11, 1) + bytes([0x05]) + struct.pack("<h", -7) + b"k"
    entries = bytes([0x07]) + struct.pack("<i", -70000) + bytes([0x08]) + struct.pack("<I", 70000)
    head = 8 + 3 * 5
    entries += bytes([0x00]) + struct.pack("<I", head)
    array = struct.pack("<II", 3, head + len(nested)) + entries + nested
    assert to_text(binary(0x03, array)) == '[-70000, 70000, {"k": -7}]'


def test_what_is_not_binary_json_is_an_error() -> None:
    with pytest.raises(RowDecodeError, match="overruns its value"):
        to_text(binary(0x02, struct.pack("<HH", 5, 200)))
    with pytest.raises(RowDecodeError, match="not MySQL's binary JSON"):
        to_text(binary(0x02, struct.pack("<HH", 5, 4)))  # five elements, their entries missing
    with pytest.raises(RowDecodeError, match="not as its bytes"):
        to_text({"a": 1})  # type: ignore[arg-type]  # what mysql-replication would hand over


def test_a_json_column_reads_into_arrow_as_its_text() -> None:
    decoders = RowDecoders()
    events = [event for _, event in rows_events(GENERATED) if event.type_code == 30]
    located = [decoders.locate(event, T) for event in events]
    assert all(located)
    columns = located_columns(located, None, T)  # type: ignore[arg-type]
    assert columns[1].type == pa.string() and columns[1].to_pylist()[2] == (
        '{"age": 40, "data": "zzzzzzzzzz", "name": "Pete"}')
