"""MySQL's binary JSON as the text MySQL's SELECT prints (``json_binary``), on the bytes real MySQL servers wrote
(``tests/fixtures/mysql_binlogs``) read through ``BinlogReader`` with the files as its events, as records and as
the columnar stream's lake rows; then each rule of the text on small documents built here (our reading of the
format, so only as extra checks)."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.json_binary import to_text
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import IncompleteChangeError, RowDecodeError
from tests.mysql_fixtures import BINLOG_NAME, binlog_copy, file_reader, lake_rows, owner_expected, records

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
# its table as the CREATE TABLE in the file has it: id INT PRIMARY KEY, json_col JSON, and name, age generated from
# json_col (VARCHAR(100) AS (json_col->>'$.name'), INT AS (json_col->'$.age'): virtual, yet in the row images)
T = TableSchema(TableId("mysql", "t"), (Column("id", "int", "int", nullable=False), Column("json_col", "json", "json"),
                                        Column("name", "varchar", "varchar(100)", charset="utf8mb4"),
                                        Column("age", "int", "int")), ("id",))


def test_opaque_values_of_a_mysql_9_binlog_are_what_select_prints(tmp_path: Path) -> None:
    """MySQL 9.0.1's table ``foo.test(a JSON)``, its names in the table maps: each insert's document, as a record
    and as the columnar stream's lake row, is the owner's value as SELECT prints it."""
    table = TableSchema(TableId("foo", "test"), (Column("a", "json", "json"),), ())
    files = binlog_copy(tmp_path, OPAQUE)
    texts = [text for _, text in sorted(OPAQUE_TEXT.items())]
    inserted = records(file_reader(files, table), table.id)
    assert [(r.op, r.values) for r in inserted] == [(ChangeKind.INSERT, (text,)) for text in texts]
    assert [r.offset.events_to_skip for r in inserted] == list(range(8))  # one transaction of 8 rows events
    rows = lake_rows(file_reader(files, table), table)
    assert rows.schema.field("a").type == pa.string() and rows.column("a").to_pylist() == texts
    assert rows.column("_binlog_pos").to_pylist() == [529] * 8  # the transaction's start
    owner = {e["event_pos"]: e["first_row_after_image_json"] for e in owner_expected(OPAQUE)}
    assert {p: json.loads(t, parse_float=str) for p, t in OPAQUE_TEXT.items()} == owner  # the owner's DECIMALs: text


def test_the_generated_columns_file_is_read_by_position_until_its_partial_image(tmp_path: Path) -> None:
    """MySQL 8.0.22's ``mysql.t`` (its documents, and ``name``/``age`` generated from them) is logged with
    binlog_row_metadata = MINIMAL: its table maps name no column, so the reader reads its rows by position against
    the table's schema. The owner asserts no values, but the server did: each row's ``name`` and ``age`` are what
    MySQL computed from the document (``json_col->>'$.name'``, ``json_col->'$.age'``). Its last rows event is a
    partial image (binlog_row_image = MINIMAL), which the reader refuses before anything of it is committed."""
    read: list[Any] = []
    with pytest.raises(IncompleteChangeError, match="binlog_row_image = 'MINIMAL'") as error:
        read.extend(i for i in file_reader(binlog_copy(tmp_path, GENERATED), T) if isinstance(i, ChangeRecord))
    assert f"nothing past {BinlogOffset(BINLOG_NAME, 3527)} is committed" in str(error.value)
    assert [r.op for r in read] == [ChangeKind.INSERT] * 6 + [ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER] * 6
    for record in read:
        identifier, text, name, age = record.values
        document = json.loads(text)
        assert (document["name"], document["age"]) == (name, age) and 1 <= identifier <= 6
    assert [json.loads(r.values[1])["age"] for r in read[7::2]] == [25, 33, 41, 25, 33, 41]  # age + 1


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
