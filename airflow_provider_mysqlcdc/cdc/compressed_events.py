"""The binlog events mysql-replication does not decode: MariaDB's compressed events, decoded here,
and every other event that may carry rows, refused by name.

**Compressed events.** With ``log_bin_compress=ON`` MariaDB writes a statement of at least
``log_bin_compress_min_len`` bytes as QUERY_COMPRESSED_EVENT (165) and a rows event as
WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 (166-168). Only the version-1 forms are decoded: MariaDB
writes no version-2 rows events, compressed (169-171) or not, so those are refused like any type not
decoded rather than decoded by code no server here can test. Only the tail of an event is compressed
(checked byte by byte on MariaDB 10.11): a rows event's row images after its table id, flags, column
count and column bitmaps; a query event's statement after its status variables and database name. The
compressed part starts with a byte whose high bit is set and whose low 3 bits count the bytes of the
uncompressed length that follow (big-endian), then zlib data. mysql-replication knows none of these
types and skips them, so with compression on every change would be lost without a word.

Each compressed type gets a subclass of mysql-replication's class for its uncompressed twin. The
subclass lets the parent read the uncompressed head, inflates the tail, and puts the event's
packet back together as the uncompressed event it stands for (type code, size and checksum
rewritten), before any row is read. Everything that reads rows events therefore works on it
unchanged, the fast paths included: mysql-replication's own decoding, ``row_decoder`` and ``row_columns``
(which read values straight from the packet, by position), ``isinstance`` on the parent classes,
and the DDL handling of query events (``.query`` is the statement). ``event_type`` is the
uncompressed twin's code, and ``wire_type`` what the binlog said. The alternatives cost more: a
wrapper that decodes rows itself duplicates mysql-replication's parsing, and rewriting packets before
``BinLogPacketWrapper`` sees them means replacing the stream's packet loop. Uncompressed events do
not pass through this module at all, so their path is unchanged.

The classes are registered in ``BinLogPacketWrapper``'s event map (the only place mysql-replication
chooses a class by type code), and the reader lists them in ``only_events``; the map is a private
class attribute, so a mysql-replication that renamed it fails at import, loudly, not by skipping.

**Events that are refused.** The reader also takes mysql-replication's ``NotImplementedEvent`` (every
type it has no class for) and ``PartialUpdateRowsEvent``, and ``refuse_undecoded`` stops the stream
with a ``SourceConfigError`` naming the type, the offset and the setting to change, unless the event
cannot carry rows of a captured table: a type known to carry none, an event flagged ignorable by the
server (``LOG_EVENT_IGNORABLE_F``: a replica that does not know it may skip it), or a partial update
of a table not captured. MySQL 8's TRANSACTION_PAYLOAD_EVENT (``binlog_transaction_compression=ON``)
is refused rather than decoded: it nests whole transactions of events in zstd, which a decoder here
could be tested only on bytes built from the documentation (no MySQL server runs in the test
environment), while refusing it costs a user one setting; ``source_checks`` reports the global
setting before capture starts, and this check catches a session that turns it on.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Container
from typing import Any

from pymysqlreplication.event import NotImplementedEvent, QueryEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import DeleteRowsEvent, PartialUpdateRowsEvent, UpdateRowsEvent, WriteRowsEvent

from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.exceptions import RowDecodeError, SourceConfigError

QUERY_COMPRESSED_EVENT = 165
# MariaDB's compressed rows events, by type code: the uncompressed twin's type code
_ROWS_TWINS = {
    166: 23, 167: 24, 168: 25,  # WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 -> *_ROWS_EVENT_V1
}
_QUERY_EVENT = 2
_QUERY_POST_HEADER = 13  # thread id, execution time, database name length, error code, status length
_HEADER = 20  # the packet's OK byte and the 19-byte event header
_TYPE_AT, _SIZE_AT = 5, 10  # in the packet: the event header's type code and event size
_CHECKSUM = 4
_COMPRESSED_FLAG = 0x80
_IGNORABLE = 0x80  # LOG_EVENT_IGNORABLE_F in the event header's flags

# types without a class in mysql-replication that carry no rows and may be skipped: MySQL's
# ANONYMOUS_GTID (34), TRANSACTION_CONTEXT (36), VIEW_CHANGE (37) and HEARTBEAT_LOG_EVENT_V2 (41)
_NO_ROWS = frozenset({34, 36, 37, 41})
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
    39: "SET GLOBAL binlog_row_value_options = '' (partial JSON updates; also in the server config and in any "
        "session that sets it)",
    40: "SET GLOBAL binlog_transaction_compression = OFF (also in the server config and in any session that sets it)",
    42: "Commit without a GTID tag: capture does not follow tagged GTIDs (MySQL 8.3+)",
    169: _COMPRESSED_V2, 170: _COMPRESSED_V2, 171: _COMPRESSED_V2,
}
_NAMES = {
    6: "LOAD_EVENT", 8: "CREATE_FILE_EVENT", 9: "APPEND_BLOCK_EVENT", 10: "EXEC_LOAD_EVENT",
    11: "DELETE_FILE_EVENT", 12: "NEW_LOAD_EVENT", 20: "PRE_GA_WRITE_ROWS_EVENT", 21: "PRE_GA_UPDATE_ROWS_EVENT",
    22: "PRE_GA_DELETE_ROWS_EVENT", 26: "INCIDENT_EVENT", 39: "PARTIAL_UPDATE_ROWS_EVENT",
    40: "TRANSACTION_PAYLOAD_EVENT", 42: "GTID_TAGGED_LOG_EVENT", 169: "WRITE_ROWS_COMPRESSED_EVENT",
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


def _inflate(event: Any, start: int) -> bytes:
    """Replace the compressed tail of ``event``'s packet, from ``start`` (counted after the event
    header) to the end of the event, by what it inflates to; return that. The packet becomes the
    uncompressed event, read from ``start`` on."""
    wrapper, size = event.packet, event.event_size
    packet = wrapper.packet  # pymysql's MysqlPacket, holding the whole event
    data = packet.get_all_data()
    head_end, end = _HEADER + start, _HEADER + size
    try:
        body = uncompress(data[head_end:end])
    except ValueError as exc:
        raise RowDecodeError(
            f"the compressed event of type {event.wire_type} ending at binlog position {wrapper.log_pos} does not "
            f"inflate ({exc}): the binlog is damaged, or not in MariaDB's compressed format"
        ) from exc
    checksum = len(data) - end
    rebuilt = bytearray(data[:head_end])
    rebuilt[_TYPE_AT] = event.event_type
    struct.pack_into("<I", rebuilt, _SIZE_AT, _HEADER - 1 + start + len(body) + checksum)
    rebuilt += body
    if checksum == _CHECKSUM:
        rebuilt += zlib.crc32(memoryview(rebuilt)[1:]).to_bytes(_CHECKSUM, "little")
    packet._data = bytes(rebuilt)
    packet._position = head_end
    wrapper.read_bytes = start
    event.event_size = start + len(body)
    return body


def _as_twin(from_packet: Any, twins: dict[int, int] | int) -> int:
    """Make the packet say it is the uncompressed twin (the parent parses by type code) and return
    the type code the binlog said."""
    wire_type: int = from_packet.event_type
    from_packet.event_type = twins if isinstance(twins, int) else twins[wire_type]
    return wire_type


class CompressedQueryEvent(QueryEvent):  # type: ignore[misc]
    """QUERY_COMPRESSED_EVENT, decoded as the QueryEvent it compresses."""

    def __init__(self, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any, **kwargs: Any) -> None:
        self.wire_type = _as_twin(from_packet, _QUERY_EVENT)
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        # the parent read the compressed statement as text: read it again, inflated
        start = (self._declared_post_header_len(_QUERY_POST_HEADER) + self.status_vars_length
                 + self.schema_length + 1)
        body = _inflate(self, start)
        self.packet.advance(len(body))
        self.query = body.decode("utf-8", errors="backslashreplace")


class _CompressedRows:
    """A compressed rows event, decoded as its uncompressed twin (the parent class after this one)."""

    wire_type: int

    def __init__(self, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any, **kwargs: Any) -> None:
        self.wire_type = _as_twin(from_packet, _ROWS_TWINS)
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)  # type: ignore[call-arg]
        if self._processed:  # the parent read up to the row images (else the table is not captured)
            _inflate(self, self.packet.read_bytes)

    _processed: bool
    packet: Any


class CompressedWriteRowsEvent(_CompressedRows, WriteRowsEvent):  # type: ignore[misc]
    """WRITE_ROWS_COMPRESSED_EVENT(_V1), decoded as a WriteRowsEvent."""


class CompressedUpdateRowsEvent(_CompressedRows, UpdateRowsEvent):  # type: ignore[misc]
    """UPDATE_ROWS_COMPRESSED_EVENT(_V1), decoded as an UpdateRowsEvent."""


class CompressedDeleteRowsEvent(_CompressedRows, DeleteRowsEvent):  # type: ignore[misc]
    """DELETE_ROWS_COMPRESSED_EVENT(_V1), decoded as a DeleteRowsEvent."""


_CLASSES: dict[int, type] = {
    QUERY_COMPRESSED_EVENT: CompressedQueryEvent,
    166: CompressedWriteRowsEvent, 167: CompressedUpdateRowsEvent, 168: CompressedDeleteRowsEvent,
}
COMPRESSED_EVENTS: tuple[type, ...] = (CompressedQueryEvent, CompressedWriteRowsEvent, CompressedUpdateRowsEvent,
                                       CompressedDeleteRowsEvent)
UNDECODED_EVENTS: tuple[type, ...] = (NotImplementedEvent, PartialUpdateRowsEvent)
"""The classes of events mysql-replication does not decode into rows we can take: ``refuse_undecoded``."""
EXTRA_EVENTS: tuple[type, ...] = COMPRESSED_EVENTS + UNDECODED_EVENTS
"""What the reader adds to ``only_events`` (with ``filter_non_implemented_events=False``)."""


def _register() -> None:
    event_map = vars(BinLogPacketWrapper).get("_BinLogPacketWrapper__event_map")
    if not isinstance(event_map, dict):
        raise ImportError(
            "mysql-replication's BinLogPacketWrapper has no event map: this version of it is not supported "
            "(compressed MariaDB binlog events could not be decoded)"
        )
    event_map.update(_CLASSES)


_register()


def refuse_undecoded(event: Any, captured: Container[TableId], log_file: str, transaction: BinlogOffset) -> None:
    """Raise a ``SourceConfigError`` for an event of ``UNDECODED_EVENTS`` that may carry rows of a
    ``captured`` table; return for one that cannot (see the module's docstring). ``transaction`` is
    where the event's transaction starts, ``log_file`` the binlog file it is in."""
    code: int = event.event_type
    if isinstance(event, PartialUpdateRowsEvent):
        if TableId(event.schema, event.table) not in captured:
            return
    elif code in _NO_ROWS or event.packet.flags & _IGNORABLE:
        return
    name = _NAMES.get(code, "an event type this reader does not know")
    fix = _SETTINGS.get(code, "Upgrade the provider, or turn off the server feature that writes this event type")
    raise SourceConfigError(
        f"the binlog holds {name} (type {code}) ending at {log_file}:{event.packet.log_pos}, in the transaction "
        f"starting at {transaction}: this reader cannot decode it, and it may carry rows of captured tables, which "
        f"skipping it would lose. {fix}. Then re-snapshot the captured tables: the stream cannot get past this event."
    )
