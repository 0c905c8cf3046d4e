"""Compressed MariaDB events and refused event types, on event bytes built here (no server).

Events are put together as the replication protocol delivers them (an OK byte, the 19-byte header,
the body, a CRC32) and parsed by ``events.parse``, as the binlog dump does.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.compressed import inflate_query, refuse_undecoded, uncompress
from airflow_provider_mysqlcdc.cdc.binlog.events import Format, Query, Rows, TableMap, Undecoded, parse
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import RowDecodeError, SourceConfigError

TRANSACTION = BinlogOffset("mysql-bin.000007", 1200)


def compressed(data: bytes, width: int | None = None) -> bytes:
    """MariaDB's format: 0x80 | width of the length, the length big-endian, zlib data."""
    width = width or max(1, (len(data).bit_length() + 7) // 8)
    return bytes([0x80 | width]) + len(data).to_bytes(width, "big") + zlib.compress(data)


@pytest.mark.parametrize("size", [0, 10, 255, 256, 70_000, 17_000_000])
def test_uncompress_inverts_mariadbs_format(size: int) -> None:
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    packed = compressed(data)
    assert packed[0] & 0x07 == max(1, (size.bit_length() + 7) // 8)
    assert uncompress(packed) == data


def test_uncompress_takes_a_wider_length_than_needed() -> None:
    assert uncompress(compressed(b"abc", width=4)) == b"abc"


@pytest.mark.parametrize(("packed", "problem"), [
    (b"", "no compressed data"),
    (bytes([0x01, 3]) + zlib.compress(b"abc"), "not that of compressed data"),  # high bit not set
    (bytes([0x80, 3]) + zlib.compress(b"abc"), "not that of compressed data"),  # no length bytes
    (bytes([0x85]) + bytes(5) + zlib.compress(b"abc"), "not that of compressed data"),  # 5 length bytes
    (bytes([0x84, 0, 0]), "not that of compressed data"),  # the length cut off
    (bytes([0x81, 3]) + zlib.compress(b"abc")[:-3], "zlib"),
    (bytes([0x81, 4]) + zlib.compress(b"abc"), "inflates to 3 bytes, not the 4"),
])
def test_uncompress_refuses_what_is_not_compressed_data(packed: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        uncompress(packed)


def event_packet(event_type: int, body: bytes, flags: int = 0, log_pos: int = 4321) -> bytes:
    """The packet of one event with a CRC32, as the server sends it."""
    header = struct.pack("<IBIIIH", 1_700_000_000, event_type, 1, 19 + len(body) + 4, log_pos, flags)
    event = header + body
    return b"\x00" + event + zlib.crc32(event).to_bytes(4, "little")


def decode(packet: bytes, table_ids: dict[int, TableMap] | None = None) -> object:
    """The event parsed as the binlog dump parses it."""
    return parse(packet, len(packet) - 4, Format("10.11.0-MariaDB"), table_ids if table_ids is not None else {})


def query_body(statement: bytes, database: bytes = b"shop") -> bytes:
    """A query event's post-header (thread, time, database length, error, status length) and payload."""
    status = b"\x00\x00\x00\x00\x00"  # Q_FLAGS2_CODE and its 4 bytes
    return struct.pack("<IIBHH", 7, 0, len(database), 0, len(status)) + status + database + b"\x00" + statement


def test_a_compressed_query_event_is_the_query_event_it_compresses() -> None:
    statement = "ALTER TABLE orders ADD COLUMN note VARCHAR(100) COMMENT 'ünïcode 😀'".encode()
    packet = event_packet(165, query_body(compressed(statement)))
    event = decode(packet)
    assert type(event) is Query
    assert event.query == statement.decode() and event.schema == b"shop"
    # the packet rebuilt: the uncompressed query event, type, size and checksum rewritten
    plain = event_packet(2, query_body(statement))
    assert inflate_query(packet, len(packet) - 4, 13) == (plain, len(plain) - 4)


def test_a_compressed_rows_event_is_the_rows_event_it_compresses() -> None:
    table_map = TableMap(7, TableId("shop", "orders"), [], b"")
    images = bytes([0, 1, 2, 3, 4]) * 3
    head = (7).to_bytes(6, "little") + b"\x01\x00" + b"\x01" + b"\x01"  # table id, flags, 1 column, present
    event = decode(event_packet(168, head + compressed(images)), {7: table_map})
    assert isinstance(event, Rows) and event.type_code == 25 and event.table_map is table_map
    assert event.data[event.start:event.end] == images
    assert event.data == event_packet(25, head + images)


def test_a_damaged_compressed_event_is_an_error_naming_its_position() -> None:
    body = query_body(compressed(b"DROP TABLE orders")[:-4])
    with pytest.raises(RowDecodeError, match="type 165 ending at binlog position 4321 does not inflate"):
        decode(event_packet(165, body))


@pytest.mark.parametrize(("event_type", "named", "setting"), [
    (26, "INCIDENT_EVENT (type 26)", "events are missing from the binlog"),
    (20, "PRE_GA_WRITE_ROWS_EVENT (type 20)", "Upgrade the server"),
    (169, "WRITE_ROWS_COMPRESSED_EVENT (type 169)", "SET GLOBAL log_bin_compress = OFF"),
    (12, "NEW_LOAD_EVENT (type 12)", "binlog_format = 'ROW'"),
    (200, "an event type this reader does not know (type 200)", "Upgrade the provider"),
])
def test_an_event_that_may_carry_rows_stops_the_stream(event_type: int, named: str, setting: str) -> None:
    event = decode(event_packet(event_type, b"\x01\x02\x03"))
    assert type(event) is Undecoded
    with pytest.raises(SourceConfigError) as error:
        refuse_undecoded(event, "mysql-bin.000007", TRANSACTION)
    message = str(error.value)
    assert named in message and setting in message, message
    assert "ending at mysql-bin.000007:4321" in message and "starting at mysql-bin.000007:1200" in message
    assert message.endswith("Then re-snapshot the captured tables: the stream cannot get past this event.")


@pytest.mark.parametrize(("event_type", "flags"), [
    (34, 0),  # MySQL's ANONYMOUS_GTID_LOG_EVENT
    (36, 0), (37, 0), (41, 0),
    (200, 0x80),  # unknown, but the server says a replica may ignore it (LOG_EVENT_IGNORABLE_F)
])
def test_an_event_without_rows_is_passed_over(event_type: int, flags: int) -> None:
    event = decode(event_packet(event_type, bytes(42), flags=flags))
    if isinstance(event, Undecoded):
        refuse_undecoded(event, "mysql-bin.000007", TRANSACTION)
