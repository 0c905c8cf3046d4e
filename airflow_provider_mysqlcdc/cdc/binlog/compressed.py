"""The binlog events the reader does not read as they come: MariaDB's compressed events, inflated
here into the events they compress, MySQL's compressed transactions, opened into the events they hold,
and every other event that may carry rows, refused by name.

**Compressed events.** With ``log_bin_compress=ON`` MariaDB writes a statement of at least
``log_bin_compress_min_len`` bytes as QUERY_COMPRESSED_EVENT (165) and a rows event as
WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 (166-168). Only the version-1 forms are decoded: MariaDB
writes no version-2 rows events, compressed (169-171) or not, so those are refused like any type not
decoded rather than decoded by code no server here can test. Only the tail of an event is compressed
(checked byte by byte on MariaDB 10.11): a rows event's row images after its table id, flags, column
count and column bitmaps; a query event's statement after its status variables and database name. The
compressed part starts with a byte whose high bit is set and whose low 3 bits count the bytes of the
uncompressed length that follow (big-endian), then zlib data.

``inflate`` puts the event's packet back together as the uncompressed event it stands for (type
code, size and checksum rewritten), so everything after it reads an ordinary query or rows event:
``binlog.events``' parse, the row decoder and ``row_columns`` (which read values straight from the
packet, by position), and mysql-replication where ``legacy_rows`` leaves an event to it.

**Events that are refused.** ``binlog.events`` makes every type it does not read (and does not know
to be harmless) an ``Undecoded`` event, and ``refuse_undecoded`` stops the stream with a
``SourceConfigError`` naming the type, the offset and the setting to change, unless the event cannot
carry rows of a captured table: a type known to carry none, an event flagged ignorable by the server
(``LOG_EVENT_IGNORABLE_F``: a replica that does not know it may skip it).

**Compressed transactions.** With ``binlog_transaction_compression=ON`` (MySQL 8.0.20+) a transaction's
events are written into one TRANSACTION_PAYLOAD_EVENT (40), and a replica's dump receives it so. Its
body is a header of fields, each a type, a length and a value (all length-encoded integers: 1 the
payload's size, 2 the compression, 0 ZSTD or 255 none, 3 the size uncompressed; 0 ends the header),
then the payload: the transaction's events (GTID excepted, which precedes the payload event), each
with its 19-byte header, without checksums and with 0 as the position after them.
``payload_packets`` opens the payload a packet at a time, decompressing as it reads (pyarrow's zstd
stream: a transaction of gigabytes is never in memory whole, only the compressed event and one inner
event), and gives each inner event the packet an ordinary event of the stream would have: the OK
byte, the header with the payload's end as its position, the body and, when the stream's events carry
one, a CRC32 (so a table map is the same ``TableMap`` inside a payload and out). ``dump.EventStream``
parses them with the same ``parse``, one by one, in place of the payload event; offsets count the
payload's rows events as any transaction's (see ``binlog.reader``). Proven on the payloads real MySQL
8.0 servers wrote (``tests/fixtures/mysql_binlogs``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.exceptions import RowDecodeError, SourceConfigError

QUERY_COMPRESSED_EVENT = 165
ROWS_TWINS = {  # MariaDB's compressed rows events, by type code: the uncompressed twin's type code
    166: 23, 167: 24, 168: 25,  # WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 -> *_ROWS_EVENT_V1
}
_QUERY_EVENT = 2
_HEADER = 20  # the packet's OK byte and the 19-byte event header
_TYPE_AT, _SIZE_AT = 5, 10  # in the packet: the event header's type code and event size
_CHECKSUM = 4
_COMPRESSED_FLAG = 0x80
_IGNORABLE = 0x80  # LOG_EVENT_IGNORABLE_F in the event header's flags
_EVENT_HEADER = 19
# a TRANSACTION_PAYLOAD_EVENT's header fields, and its compression types
_END_MARK, _PAYLOAD_SIZE, _COMPRESSION, _UNCOMPRESSED_SIZE = 0, 1, 2, 3
_ZSTD, _UNCOMPRESSED = 0, 255

_STATEMENT_BASED = "SET GLOBAL binlog_format = 'ROW' (and in the server config; no session may change it)"
_OLD_ROWS = "Upgrade the server: these are rows events of MySQL 5.1 before 5.1.16"
_COMPRESSED_V2 = "SET GLOBAL log_bin_compress = OFF (MariaDB writes no such events; the binlog is not as expected)"
# what to do, by type code; a type not named here is refused as unknown
_SETTINGS = {
    6: _STATEMENT_BASED, 8: _STATEMENT_BASED, 9: _STATEMENT_BASED, 10: _STATEMENT_BASED,
    11: _STATEMENT_BASED, 12: _STATEMENT_BASED,  # LOAD DATA logged as a statement
    20: _OLD_ROWS, 21: _OLD_ROWS, 22: _OLD_ROWS,
    26: "The server logged an incident: events are missing from the binlog here (on MariaDB e.g. a statement on "
        "a non-transactional table that outgrew max_binlog_stmt_cache_size)",
    169: _COMPRESSED_V2, 170: _COMPRESSED_V2, 171: _COMPRESSED_V2,
}
_NAMES = {
    6: "LOAD_EVENT", 8: "CREATE_FILE_EVENT", 9: "APPEND_BLOCK_EVENT", 10: "EXEC_LOAD_EVENT",
    11: "DELETE_FILE_EVENT", 12: "NEW_LOAD_EVENT", 20: "PRE_GA_WRITE_ROWS_EVENT", 21: "PRE_GA_UPDATE_ROWS_EVENT",
    22: "PRE_GA_DELETE_ROWS_EVENT", 26: "INCIDENT_EVENT",
    169: "WRITE_ROWS_COMPRESSED_EVENT",
    170: "UPDATE_ROWS_COMPRESSED_EVENT", 171: "DELETE_ROWS_COMPRESSED_EVENT",
}



def uncompress(data: bytes) -> bytes:
    """The bytes MariaDB compressed into ``data`` (``binlog_buf_compress``'s format: a header byte
    with the high bit set and the width of the length in its low 3 bits, the uncompressed length
    big-endian, then zlib data). Raises ValueError for anything else."""
    if not data:
        raise ValueError("no compressed data")
    header = data[0]
    width = header & 0x07
    if not header & _COMPRESSED_FLAG or not 1 <= width <= 4 or len(data) < 1 + width:
        raise ValueError(f"header byte {header:#04x} is not that of compressed data")
    length = int.from_bytes(data[1:1 + width], "big")
    try:
        inflated = zlib.decompress(data[1 + width:], bufsize=max(length, 1))
    except zlib.error as exc:
        raise ValueError(f"zlib: {exc}") from exc
    if len(inflated) != length:
        raise ValueError(f"inflates to {len(inflated)} bytes, not the {length} its header says")
    return inflated


def inflate(data: bytes, end: int, head_end: int, twin: int) -> tuple[bytes, int]:
    """The packet ``data`` of a compressed event (its checksum, if any, from ``end``; its compressed
    tail from ``head_end``) as the packet of the uncompressed event of type ``twin``, and where that
    one's checksum starts."""
    try:
        body = uncompress(data[head_end:end])
    except ValueError as exc:
        wire_type, log_pos = data[_TYPE_AT], int.from_bytes(data[14:18], "little")
        raise RowDecodeError(
            f"the compressed event of type {wire_type} ending at binlog position {log_pos} does not inflate "
            f"({exc}): the binlog is damaged, or not in MariaDB's compressed format"
        ) from exc
    checksum = len(data) - end
    rebuilt = bytearray(data[:head_end])
    rebuilt[_TYPE_AT] = twin
    struct.pack_into("<I", rebuilt, _SIZE_AT, head_end - 1 + len(body) + checksum)
    rebuilt += body
    if checksum == _CHECKSUM:
        rebuilt += zlib.crc32(memoryview(rebuilt)[1:]).to_bytes(_CHECKSUM, "little")
    return bytes(rebuilt), head_end + len(body)


def inflate_query(data: bytes, end: int, post_header: int) -> tuple[bytes, int]:
    """A QUERY_COMPRESSED_EVENT's packet as the QUERY_EVENT it compresses (see ``inflate``): the
    statement after the post-header, the status variables, the database name and its NUL is compressed."""
    schema_length = data[_HEADER + 8]
    status_length = int.from_bytes(data[_HEADER + 11:_HEADER + 13], "little")
    return inflate(data, end, _HEADER + post_header + status_length + schema_length + 1, _QUERY_EVENT)


def payload_packets(data: bytes, end: int, log_pos: int, checksum: bool) -> Iterator[bytes]:
    """The events in the packet ``data`` of a TRANSACTION_PAYLOAD_EVENT (its checksum, if any, from ``end``)
    ending at binlog position ``log_pos``, one packet at a time, as the module's docstring says."""
    compression, uncompressed, start = _payload_header(data, end, log_pos)
    source = pa.BufferReader(pa.py_buffer(data)[start:end])  # no copy of the compressed payload
    stream = source if compression == _UNCOMPRESSED else pa.CompressedInputStream(source, "zstd")
    position = log_pos.to_bytes(4, "little")
    read = 0
    while True:
        header = _read_payload(stream, _EVENT_HEADER, log_pos, allow_end=True)
        if not header:
            break
        size = int.from_bytes(header[9:13], "little")
        if size < _EVENT_HEADER:
            raise _payload_error(log_pos, f"an inner event of {size} bytes, shorter than its header")
        body = _read_payload(stream, size - _EVENT_HEADER, log_pos)
        read += size
        packet = bytearray(b"\0")
        packet += header[:13]
        packet += position
        packet += header[17:]
        packet += body
        if checksum:
            packet += zlib.crc32(memoryview(packet)[1:]).to_bytes(_CHECKSUM, "little")
        yield bytes(packet)
    if uncompressed is not None and read != uncompressed:
        raise _payload_error(log_pos, f"its events are {read} bytes, not the {uncompressed} its header says")


def _payload_header(data: bytes, end: int, log_pos: int) -> tuple[int, int | None, int]:
    """A payload event's compression, uncompressed size (None if not given) and where its payload starts."""
    pos, compression, uncompressed, size = _HEADER, None, None, None
    while True:
        field, pos = _packed(data, pos, end, log_pos)
        if field == _END_MARK:
            break
        length, pos = _packed(data, pos, end, log_pos)
        if field in (_PAYLOAD_SIZE, _COMPRESSION, _UNCOMPRESSED_SIZE):  # a field of a later version: passed over
            value, _ = _packed(data, pos, min(pos + length, end), log_pos)
            if field == _PAYLOAD_SIZE:
                size = value
            elif field == _COMPRESSION:
                compression = value
            else:
                uncompressed = value
        pos += length
    if compression not in (_ZSTD, _UNCOMPRESSED):
        raise _payload_error(log_pos, f"compression type {compression}, which this reader does not know (MySQL "
                                      f"writes ZSTD, 0)")
    if size is not None and pos + size != end:
        raise _payload_error(log_pos, f"a payload of {end - pos} bytes where its header says {size}")
    return compression, uncompressed, pos


def _packed(data: bytes, pos: int, end: int, log_pos: int) -> tuple[int, int]:
    """The length-encoded integer at ``pos`` (before ``end``) and where the next field starts."""
    if pos >= end:
        raise _payload_error(log_pos, "its header ends early")
    first = data[pos]
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)
    if first == 0xFB or first == 0xFF or pos + 1 + width > end:
        raise _payload_error(log_pos, f"byte {first:#04x} at {pos} is no length-encoded integer of its header")
    if not width:
        return first, pos + 1
    return int.from_bytes(data[pos + 1:pos + 1 + width], "little"), pos + 1 + width


def _read_payload(stream: pa.NativeFile, size: int, log_pos: int, allow_end: bool = False) -> bytes:
    try:
        chunk: bytes = stream.read(size)
    except (OSError, pa.ArrowException) as exc:
        raise _payload_error(log_pos, f"its payload does not decompress ({exc})") from exc
    if len(chunk) != size and not (allow_end and not chunk):
        raise _payload_error(log_pos, f"its payload ends inside an event ({len(chunk)} of {size} bytes)")
    return chunk


def _payload_error(log_pos: int, problem: str) -> RowDecodeError:
    return RowDecodeError(f"the TRANSACTION_PAYLOAD_EVENT ending at binlog position {log_pos} is damaged or not in "
                          f"MySQL's format: {problem}")


class UndecodedEvent(Protocol):
    """What ``refuse_undecoded`` reads of an event (``events.Undecoded``)."""

    type_code: int
    flags: int
    log_pos: int


def refuse_undecoded(event: UndecodedEvent, log_file: str, transaction: BinlogOffset) -> None:
    """Raise a ``SourceConfigError`` for an event the reader does not read that may carry rows (of any table:
    whose cannot be told without reading it); return for one that cannot (see the module's docstring).
    ``transaction`` is where the event's transaction starts, ``log_file`` the binlog file it is in."""
    code = event.type_code
    if event.flags & _IGNORABLE:
        return
    name = _NAMES.get(code, "an event type this reader does not know")
    fix = _SETTINGS.get(code, "Upgrade the provider, or turn off the server feature that writes this event type")
    raise SourceConfigError(
        f"the binlog holds {name} (type {code}) ending at {log_file}:{event.log_pos}, in the transaction "
        f"starting at {transaction}: this reader cannot decode it, and it may carry rows of captured tables, which "
        f"skipping it would lose. {fix}. Then re-snapshot the captured tables: the stream cannot get past this event."
    )
