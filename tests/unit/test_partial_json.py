"""Partial JSON updates (``partial_json``, PARTIAL_UPDATE_ROWS_EVENT) on the bytes a MySQL 8.0.22 server wrote
(``rust_mysql_common/json.binlog.000001``). Its partial update has a MINIMAL before image: ``BinlogReader`` with the
file as its events stops on it, naming ``binlog_row_image``. The diffs inside it, as the file source gives the event,
applied to the documents the update before it left, give the values the server computed its generated columns from
(a check of ``partial_json``'s reading, not a proof through the reader: that file's table maps carry no column
names, which the reader refuses until it decodes them by position, issue 50). Then the same after images behind a
FULL before image (built here), through the row decoder, and the rules of paths and operations."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.events import Rows
from airflow_provider_mysqlcdc.cdc.binlog.json_binary import parse, render
from airflow_provider_mysqlcdc.cdc.binlog.partial_json import (
    INSERT,
    REMOVE,
    REPLACE,
    Cell,
    Diff,
    apply,
    packed_integer,
    parse_path,
    read_diffs,
    updated_text,
)
from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import RowDecoders
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import IncompleteChangeError, RowDecodeError
from tests.mysql_fixtures import BINLOG_NAME, binlog_copy, file_reader, records

FILE = "rust_mysql_common/json.binlog.000001"
T = TableSchema(TableId("mysql", "t"), (Column("id", "int", "int", nullable=False), Column("json_col", "json", "json"),
                                        Column("name", "varchar", "varchar(100)", charset="utf8mb4"),
                                        Column("age", "int", "int")), ("id",))


def partial_rows(event: Rows) -> list[tuple[int, bytes]]:
    """The rows of the file's partial update, MINIMAL images (before: id; after: json_col, name, age): each row's
    id and its after image's bytes (value options, partial bits, NULL bitmap, values)."""
    data, at, rows = event.data, event.start, []
    while at < event.end:
        row_id = struct.unpack_from("<i", data, at + 1)[0]  # a NULL bitmap byte, then the INT
        start = at = at + 5
        options, at = packed_integer(data, at)
        at += 1 + 1  # partial bits (one JSON column), the after image's NULL bitmap
        at += 4 + int.from_bytes(data[at:at + 4], "little")  # the diffs, after their length
        at += 2 + int.from_bytes(data[at:at + 2], "little") + 4  # name (VARCHAR(100) utf8mb4), age
        assert options == 1
        rows.append((row_id, data[start:at]))
    return rows


def file_events(tmp_path: Path) -> tuple[list[tuple[Any, ...]], Rows, Any]:
    """The file's last full update (its images as the row decoder reads them) and its partial update, the events as
    the binlog file source hands them to the reader."""
    events = [event for event in binlog_copy(tmp_path, FILE).open(BINLOG_NAME, 4) if isinstance(event, Rows)]
    update, partial = events[-2], events[-1]
    assert (update.type_code, partial.type_code, partial.log_pos) == (31, 39, 3980)
    update_images = RowDecoders().row_images(update, T)
    assert update_images is not None
    return update_images, partial, update


def test_the_reader_stops_on_the_partial_update_naming_binlog_row_image(tmp_path: Path) -> None:
    """From the partial update's transaction (an offset a stream may resume at): nothing of it is committed."""
    reader = file_reader(binlog_copy(tmp_path, FILE), T, start=BinlogOffset(BINLOG_NAME, 3527))
    with pytest.raises(IncompleteChangeError, match="binlog_row_image = 'MINIMAL' or 'NOBLOB'") as error:
        records(reader, T.id)
    message = str(error.value)
    assert "mysql-bin.000001:3527 (event ending at mysql-bin.000001:3980) has rows of mysql.t" in message
    assert "lack the columns #1, #2, #3, #4" in message  # the before image: id alone; the after image: all but id


def test_the_partial_update_s_diffs_give_what_the_server_computed_from_them(tmp_path: Path) -> None:
    update_images, partial, update = file_events(tmp_path)
    assert not partial.full  # MINIMAL: the reader stops on it (above)
    documents = dict(_after_documents(update))
    for row_id, after in partial_rows(partial):
        diffs = after[7:7 + int.from_bytes(after[3:7], "little")]
        assert [(d.operation, d.path) for d in read_diffs(diffs)] == [(REPLACE, ("age",))]
        text = updated_text(documents[row_id], diffs)
        name_at = 7 + len(diffs)
        name = after[name_at + 2:name_at + 2 + after[name_at]].decode()
        age = struct.unpack_from("<i", after, name_at + 2 + after[name_at])[0]
        before = next(image[1] for image in update_images[1::2] if image[0] == row_id)
        assert text == before.replace(f'"age": {age - 1}', f'"age": {age}') == render(
            {"age": age, "data": parse(documents[row_id])["data"], "name": name})


def _after_documents(update: Rows) -> list[tuple[int, bytes]]:
    """The full update's after images' ids and binary JSON (the documents the partial update changes)."""
    data, at, out, image = update.data, update.start, [], 0
    while at < update.end:
        row_id = struct.unpack_from("<i", data, at + 1)[0]
        size = int.from_bytes(data[at + 5:at + 9], "little")
        document = data[at + 9:at + 9 + size]
        at += 9 + size
        at += 2 + int.from_bytes(data[at:at + 2], "little") + 4
        if image % 2:
            out.append((row_id, document))
        image += 1
    return out


def test_a_partial_update_with_a_full_before_image_is_decoded(tmp_path: Path) -> None:
    """The file's after images behind FULL before images (the update's after images, the same documents), as
    MySQL writes them with binlog_row_image = FULL: the row decoder applies the diffs."""
    update_images, partial, update = file_events(tmp_path)
    befores = {row_id: document for row_id, document in _after_documents(update)}
    body = bytearray()
    for row_id, after in partial_rows(partial):
        document = befores[row_id]
        name = next(i[2] for i in update_images if i[0] == row_id).encode()
        body += b"\x00" + struct.pack("<i", row_id) + struct.pack("<I", len(document)) + document
        body += struct.pack("<H", len(name)) + name + struct.pack("<i", next(i[3] for i in update_images[1::2]
                                                                              if i[0] == row_id))
        body += after[:2] + b"\x00" + struct.pack("<i", row_id) + after[3:]  # the after image with its id
    data = bytes(partial.data[:partial.start]) + bytes(body)
    full = Rows(partial.timestamp, partial.log_pos, 39, partial.table_map, partial.kinds, 4, b"\x0f", b"\x0f", data,
                partial.start, len(data), True)
    images = RowDecoders().row_images(full, T)
    assert images is not None and len(images) == 12
    assert images[0][:2] == (1, '{"age": 25, "data": "xxxxxxxxxx", "name": "Joe"}')
    assert images[1] == (1, '{"age": 26, "data": "xxxxxxxxxx", "name": "Joe"}', "Joe", 26)
    assert all(json.loads(after[1])["age"] == after[3] for after in images[1::2])
    assert RowDecoders().locate(full, T) is None  # read value by value: the reader takes its tuples
    rows = ChangeRows(full.kinds, T.id, images, len(images), BinlogOffset("mysql-bin.000001", 4), 0)
    columns, _ = ImageBuffer.of(T, [rows]).columns()
    assert columns[1].to_pylist()[1] == images[1][1]


def test_paths_as_mysql_writes_them() -> None:
    assert parse_path('$.a."b c".d[2][last][last-1]') == ("a", "b c", "d", Cell(2), Cell(0, True), Cell(1, True))
    assert parse_path('$."quo\\"te"') == ('quo"te',)
    with pytest.raises(RowDecodeError, match="names no member"):
        parse_path("$")
    with pytest.raises(RowDecodeError, match="does not know"):
        parse_path("$.*")


def test_operations_as_mysql_applies_them() -> None:
    document = {"b": [1, 2, 3], "aa": {"x": 1}}
    apply(document, [Diff(INSERT, ("a",), "new"), Diff(INSERT, ("b", Cell(10)), 4), Diff(INSERT, ("b", Cell(0)), 0),
                     Diff(REMOVE, ("aa", "x"), None), Diff(REPLACE, ("b", Cell(0, True)), "last")])
    assert render(document) == '{"a": "new", "b": [0, 1, 2, 3, "last"], "aa": {}}'  # keys by length, then bytes
    for diff in (Diff(REPLACE, ("c",), 1), Diff(INSERT, ("a",), 1), Diff(REMOVE, ("b", Cell(9)), None),
                 Diff(REPLACE, ("b", "x"), 1)):
        with pytest.raises(RowDecodeError, match="does not apply to the row's before image"):
            apply(document, [diff])
    with pytest.raises(RowDecodeError, match="NULL in the row's before image"):
        updated_text(None, b"")
