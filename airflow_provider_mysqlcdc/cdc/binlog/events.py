"""The binlog events the reader acts on, parsed from the bytes of the replication protocol's packets.

A packet of the binlog dump is an OK byte, the 19-byte event header (timestamp, type code, server id,
event size, position of the next event, flags), the event's post-header and body, and a CRC32 when
the server checksums events. ``parse`` turns one packet into a typed event, or None for the types
that cannot change what the reader yields (see ``_HARMLESS``); every other type it does not read
becomes ``Undecoded``, which ``compressed_events.refuse_undecoded`` judges.

Rows are not decoded here: a ``Rows`` event holds its packet and where its images are, and the row
decoder reads them in place (``row_decoder``). A table map is parsed once per definition: the binlog
repeats it before the rows of every transaction, and an equal body (table id, names, types, metadata)
is the same ``TableMap`` object again (``TableMaps``), which ``RowDecoders`` and the reader then
recognise by identity. Its columns carry what mysql-replication's column objects carried under the
same attribute names (type, name, unsigned, lengths, precision, fsp, bits, character set, enum and
set values), from the optional metadata ``binlog_row_metadata=FULL`` writes. A table map without the
column names (``MINIMAL``/``NO_LOG``, MySQL 5.7) gets columns without names, with the signedness and character
sets only where it carries them (MySQL's ``MINIMAL`` does; ``unsigned`` is None where it does not say): the
reader checks such a map against the table's known schema by position and completes it from there.

Character sets are named by mysql-replication's collation table (``charset_by_id``), so a column's
``character_set_name`` is what its decoding used before this reader existed.

Only checked by the unit tests (hand-built packets; no MySQL server runs in the test environment):
MySQL's GTID and anonymous GTID events, the version-2 rows events and their extra data, the
4-byte table ids of old servers' post-header lengths, HEARTBEAT_LOG_EVENT_V2, MySQL's collation ids.
The tagged GTID event (MySQL 8.3+) is read from a binlog file a MySQL 9.6 server wrote.
The MariaDB forms are also read from a real MariaDB 10.11 by the integration tests.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pymysqlreplication.constants.CHARSET import charset_by_id

from airflow_provider_mysqlcdc.cdc.binlog.compressed import QUERY_COMPRESSED_EVENT, ROWS_TWINS, inflate, inflate_query
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.schema.type_registry import BinlogType
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

HEADER = 20
"""The packet's OK byte and the 19-byte event header: where an event's post-header starts."""
CHECKSUM = 4
_HEADER = struct.Struct("<IBIIIH").unpack_from  # after the OK byte

QUERY, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP, HEARTBEAT, EXECUTE_LOAD_QUERY = 2, 4, 15, 16, 19, 27, 18
GTID, ANONYMOUS_GTID, PARTIAL_UPDATE_ROWS, HEARTBEAT_V2, GTID_TAGGED, MARIADB_GTID = 33, 34, 39, 41, 42, 162
TRANSACTION_PAYLOAD = 40
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1, WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 23, 24, 25, 30, 31, 32
_KINDS = {
    WRITE_ROWS_V1: (ChangeKind.INSERT,), WRITE_ROWS: (ChangeKind.INSERT,),
    UPDATE_ROWS_V1: (ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER),
    UPDATE_ROWS: (ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER),
    PARTIAL_UPDATE_ROWS: (ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER),  # its JSON diffs: ``row_decoder``
    DELETE_ROWS_V1: (ChangeKind.DELETE,), DELETE_ROWS: (ChangeKind.DELETE,),
}
_VERSION_2 = frozenset({WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS, PARTIAL_UPDATE_ROWS})
# types that carry no rows and no transaction boundary: STOP, INTVAR, RAND, USER_VAR, statement-based
# LOAD DATA's BEGIN_LOAD_QUERY (the file's bytes; its EXECUTE_LOAD_QUERY is read as the statement it is),
# ROWS_QUERY, PREVIOUS_GTIDS, TRANSACTION_CONTEXT, VIEW_CHANGE, XA_PREPARE, and MariaDB's ANNOTATE_ROWS,
# BINLOG_CHECKPOINT, GTID_LIST and START_ENCRYPTION
_HARMLESS = frozenset({3, 5, 13, 14, 17, 29, 35, 36, 37, 38, 160, 161, 163, 164})
_NUMERIC = frozenset({BinlogType.TINY, BinlogType.SHORT, BinlogType.INT24, BinlogType.LONG, BinlogType.LONGLONG,
                      BinlogType.NEWDECIMAL, BinlogType.FLOAT, BinlogType.DOUBLE, BinlogType.YEAR})
# 253: VAR_STRING; MySQL 9 counts VECTOR (binary) among them: a TEXT after it takes the exception of its place
_CHARACTER = frozenset({BinlogType.STRING, 253, BinlogType.VARCHAR, BinlogType.BLOB, BinlogType.VECTOR})
_ENUM_OR_SET = frozenset({BinlogType.ENUM, BinlogType.SET})
_JSON, _VAR_STRING = 245, 253
# the integer and temporal types of before MySQL 5.6 and NULL: no metadata in a table map
_NO_METADATA = frozenset({0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14})
_ONE_BYTE = frozenset({BinlogType.FLOAT, BinlogType.DOUBLE, BinlogType.TIMESTAMP2, BinlogType.DATETIME2,
                       BinlogType.TIME2, BinlogType.BLOB, BinlogType.GEOMETRY, _JSON, BinlogType.VECTOR})
# optional metadata fields of a table map (MySQL's Table_map_event::Optional_metadata_field_type)
_SIGNEDNESS, _DEFAULT_CHARSET, _COLUMN_CHARSET, _COLUMN_NAME, _SET_VALUES, _ENUM_VALUES = 1, 2, 3, 4, 5, 6
_ENUM_AND_SET_DEFAULT_CHARSET, _ENUM_AND_SET_COLUMN_CHARSET, _VECTOR_DIMENSIONALITY = 10, 11, 13


@dataclass(frozen=True)
class Format:
    """What the binlog's FORMAT_DESCRIPTION says its events look like (the defaults until it arrives)."""

    server_version: str = ""
    post_header_lengths: bytes = b""

    @property
    def version(self) -> tuple[int, int, int]:
        numbers = [int(n) if n.isdigit() else 0 for n in self.server_version.split("-")[0].split(".")[:3]]
        return (*numbers, 0, 0, 0)[:3]  # type: ignore[return-value]

    dbms: str = field(init=False)
    """"mariadb" or "mysql" (mysql-replication's names, which its character set table is keyed by)."""
    table_id_size: int = field(init=False)
    """Bytes of a table id in table map and rows events: 4 on old servers, whose table map post-header
    is 6 bytes (id and flags), else 6."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "dbms", "mariadb" if "mariadb" in self.server_version.lower() else "mysql")
        object.__setattr__(self, "table_id_size", 4 if self.post_header(TABLE_MAP, 8) == 6 else 6)

    def post_header(self, type_code: int, default: int) -> int:
        lengths = self.post_header_lengths
        return lengths[type_code - 1] if 0 < type_code <= len(lengths) else default


@dataclass(slots=True)
class Event:
    """An event's header fields the reader uses: ``log_pos`` is where the next event starts."""

    timestamp: int
    log_pos: int


@dataclass(slots=True)
class FormatDescription(Event):
    format: Format


@dataclass(slots=True)
class Rotate(Event):
    """The binlog goes on in ``next_binlog`` at ``position`` (also the fake one the dump starts with)."""

    position: int
    next_binlog: str


@dataclass(slots=True)
class HeartbeatEvent(Event):
    """The server is idle (MySQL's and MariaDB's HEARTBEAT_LOG_EVENT and MySQL's V2)."""


@dataclass(slots=True)
class Xid(Event):
    """The commit of a transaction."""


@dataclass(slots=True)
class Query(Event):
    """A statement: BEGIN, COMMIT of a non-transactional engine, DDL, or a change logged as a statement
    (``row_statements``; statement-based LOAD DATA's EXECUTE_LOAD_QUERY too). ``schema`` is its database."""

    schema: bytes
    query: str


@dataclass(slots=True)
class Gtid(Event):
    """A transaction's GTID (MySQL's uuid:number, all zeros for an anonymous one; MariaDB's
    domain-server-sequence)."""

    gtid: str


@dataclass(eq=False)
class BinlogColumn:
    """A column of a table map, with what its wire format and the schema checks need."""

    type: int
    name: str | None = None
    unsigned: bool | None = False
    """None: a numeric column of a table map without the SIGNEDNESS field (``binlog_row_metadata=NO_LOG``)."""
    max_length: int = 0
    length_size: int = 0
    precision: int = 0
    decimals: int = 0
    fsp: int = 0
    bits: int = 0
    size: int = 0
    character_set_name: str | None = None
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    dimensions: int = 0
    """A VECTOR's floats (MySQL 9's VECTOR_DIMENSIONALITY metadata; 0 without it)."""


@dataclass(eq=False)
class TableMap:
    """A parsed TABLE_MAP body; ``packet`` is the first packet it was read from, checksum included (for
    ``legacy_rows``)."""

    table_id: int
    table: TableId
    columns: list[BinlogColumn]
    packet: bytes = field(repr=False)


@dataclass(slots=True, eq=False)
class Rows(Event):
    """A WRITE/UPDATE/DELETE_ROWS event (v1 or v2, or a compressed one inflated): its images are
    ``data[start:end]``, ``data`` being the whole (uncompressed) packet. ``full``: every image holds every
    column (``binlog_row_image=FULL``); the bits of the bitmaps past the column count do not count (MySQL
    sets them, MariaDB clears them)."""

    type_code: int
    table_map: TableMap
    kinds: tuple[ChangeKind, ...]
    column_count: int
    present: bytes
    present_after: bytes | None
    data: bytes
    start: int
    end: int
    full: bool


@dataclass(slots=True, eq=False)
class TransactionPayload(Event):
    """MySQL's compressed transaction (TRANSACTION_PAYLOAD_EVENT): its packet, checksum from ``end``; the event
    stream reads the events in it (``compressed.payload_packets``) in its place."""

    data: bytes
    end: int


@dataclass(slots=True)
class Undecoded(Event):
    """An event of a type this reader does not read (``refuse_undecoded`` decides whether that loses
    rows)."""

    type_code: int
    flags: int


class TableMaps:
    """Table maps by body, parsed once per definition (bounded: it starts over when full)."""

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._parsed: dict[tuple[bytes, str, int], TableMap] = {}

    def get(self, data: bytes, end: int, fmt: Format) -> TableMap:
        key = (data[HEADER:end], fmt.dbms, fmt.table_id_size)
        parsed = self._parsed.get(key)
        if parsed is None:
            if len(self._parsed) >= self.MAX_ENTRIES:
                self._parsed.clear()
            parsed = self._parsed[key] = parse_table_map(data, end, fmt)
        return parsed


_TABLE_MAPS = TableMaps()


class _Cursor:
    """Reads a packet's fields from ``pos`` on."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        start = self.pos
        self.pos += n
        if self.pos > len(self.data):
            raise RowDecodeError(f"a binlog event ends {self.pos - len(self.data)} bytes early")
        return self.data[start:self.pos]

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def packed(self) -> int:
        """A length-encoded integer."""
        first = self.uint(1)
        if first < 0xFB:
            return first
        return self.uint({0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)) if first != 0xFB else 0

    def string(self) -> bytes:
        return self.take(self.packed())


def parse(data: bytes, end: int, fmt: Format, table_ids: dict[int, TableMap],
          table_maps: TableMaps = _TABLE_MAPS) -> Event | None:
    """The event in packet ``data`` (its checksum, if any, starts at ``end``), or None if its type is
    one the reader has no use for. ``table_ids`` maps table ids to the table maps read so far (a
    table map is added to it)."""
    timestamp, type_code, server_id, _, log_pos, flags = _HEADER(data, 1)
    kinds = _KINDS.get(type_code)
    if kinds is not None:
        return _rows(data, end, fmt, table_ids, timestamp, log_pos, type_code, kinds)
    if type_code == TABLE_MAP:
        table_map = table_maps.get(data, end, fmt)
        table_ids[table_map.table_id] = table_map
        return None
    if type_code == QUERY:
        return _query(data, end, fmt, timestamp, log_pos)
    if type_code == EXECUTE_LOAD_QUERY:  # a query event's post-header, then the file's id and placement (13)
        return _query(data, end, fmt, timestamp, log_pos, fmt.post_header(EXECUTE_LOAD_QUERY, 26))
    if type_code == XID:
        return Xid(timestamp, log_pos)
    if type_code == MARIADB_GTID:
        sequence, domain = struct.unpack_from("<QI", data, HEADER)
        return Gtid(timestamp, log_pos, f"{domain}-{server_id}-{sequence}")
    if type_code in (GTID, ANONYMOUS_GTID):
        number = int.from_bytes(data[HEADER + 17:HEADER + 25], "little")
        return Gtid(timestamp, log_pos, f"{_uuid_text(data[HEADER + 1:HEADER + 17])}:{number}")
    if type_code == GTID_TAGGED:
        return Gtid(timestamp, log_pos, _tagged_gtid(data, end))
    if type_code == ROTATE:
        position = int.from_bytes(data[HEADER:HEADER + 8], "little")
        return Rotate(timestamp, log_pos, position, data[HEADER + 8:end].decode())
    if type_code in (HEARTBEAT, HEARTBEAT_V2):
        return HeartbeatEvent(timestamp, log_pos)
    if type_code == FORMAT_DESCRIPTION:
        return _format_description(data, end, timestamp, log_pos)
    if type_code == QUERY_COMPRESSED_EVENT:
        inflated, inflated_end = inflate_query(data, end, fmt.post_header(QUERY, 13))
        return _query(inflated, inflated_end, fmt, timestamp, log_pos)
    if type_code in ROWS_TWINS:  # the images after the column bitmaps are compressed
        twin = ROWS_TWINS[type_code]
        inflated, inflated_end = inflate(data, end, _images_at(data, fmt, twin, _KINDS[twin])[3], twin)
        return _rows(inflated, inflated_end, fmt, table_ids, timestamp, log_pos, twin, _KINDS[twin])
    if type_code == TRANSACTION_PAYLOAD:
        return TransactionPayload(timestamp, log_pos, data, end)
    if type_code in _HARMLESS:
        return None
    return Undecoded(timestamp, log_pos, type_code, flags)


def _uuid_text(raw: bytes) -> str:
    hexits = raw.hex()
    return f"{hexits[:8]}-{hexits[8:12]}-{hexits[12:16]}-{hexits[16:20]}-{hexits[20:]}"


def _varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned integer of MySQL's serialization framework at ``pos``, and where the next field starts. The
    first byte's trailing one bits count the bytes that follow it; the bits above them, little-endian across
    those bytes, are the value; eight ones: the value is the next 8 bytes whole."""
    first = data[pos] if pos < end else 0
    ones = (first ^ (first + 1)).bit_length() - 1
    size = 9 if ones == 8 else ones + 1
    if pos + size > end:
        raise RowDecodeError(f"a GTID_TAGGED_LOG_EVENT ends {pos + size - end} bytes early")
    if ones == 8:
        return int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
    return int.from_bytes(data[pos:pos + size], "little") >> size, pos + size


def _tagged_gtid(data: bytes, end: int) -> str:
    """GTID_TAGGED_LOG_EVENT's ``uuid:tag:n`` (MySQL 8.3+, a transaction run with a tagged ``gtid_next``).

    Its body is one message of MySQL's serialization framework (not the GTID event's fixed layout): the
    format version (1), the message's size in bytes, the id of its last field a reader must know, then
    fields as (id, value) in id order, a field at its default left out. Fields 0-3 are the flags, the
    uuid (16 integers, one per byte), the number (signed: zigzag) and the tag (its length, then its
    bytes); commit numbers, times, the transaction's length and server versions follow. Every integer
    is variable-length (``_varlen``)."""
    version, pos = _varlen(data, HEADER, end)
    size, pos = _varlen(data, pos, end)
    _, pos = _varlen(data, pos, end)
    if version != 1:
        raise RowDecodeError(f"a GTID_TAGGED_LOG_EVENT in serialization format {version}, not MySQL's format 1")
    if HEADER + size > end:
        raise RowDecodeError(f"a GTID_TAGGED_LOG_EVENT ends {HEADER + size - end} bytes early")
    uuid, number, tag = bytearray(), 0, ""
    while pos < HEADER + size:
        field, pos = _varlen(data, pos, end)
        if field > 3:
            break
        if field == 1:
            for _ in range(16):
                byte, pos = _varlen(data, pos, end)
                uuid.append(byte)
        elif field == 3:
            length, pos = _varlen(data, pos, end)
            tag = data[pos:pos + length].decode("ascii", "replace")
            pos += length
        else:
            value, pos = _varlen(data, pos, end)
            number = (value >> 1) ^ -(value & 1) if field == 2 else number  # 0: the flags
    if len(uuid) != 16 or number < 1:
        raise RowDecodeError("a GTID_TAGGED_LOG_EVENT without a uuid or a transaction number")
    return f"{_uuid_text(bytes(uuid))}:{tag}:{number}" if tag else f"{_uuid_text(bytes(uuid))}:{number}"


def _format_description(data: bytes, end: int, timestamp: int, log_pos: int) -> FormatDescription:
    """Binlog version (2), server version (50), creation time (4), header length (1), post-header
    lengths by type code, then the checksum algorithm (1 byte) before ``end``."""
    version = data[HEADER + 2:HEADER + 52].rstrip(b"\0").decode()
    lengths = data[HEADER + 57:end - 1]
    return FormatDescription(timestamp, log_pos, Format(version, lengths))


def _query(data: bytes, end: int, fmt: Format, timestamp: int, log_pos: int, post_header: int | None = None) -> Query:
    """Post-header: thread id (4), execution time (4), database name length (1), error code (2),
    status variables' length (2) (and an EXECUTE_LOAD_QUERY's fields); then the status variables, the
    database name, a NUL, the statement."""
    post_header = fmt.post_header(QUERY, 13) if post_header is None else post_header
    schema_length = data[HEADER + 8]
    status_length = int.from_bytes(data[HEADER + 11:HEADER + 13], "little")
    schema_at = HEADER + post_header + status_length
    statement_at = schema_at + schema_length + 1
    if statement_at > end:
        raise RowDecodeError(f"a query event ending at binlog position {log_pos} is shorter than its post-header says")
    return Query(timestamp, log_pos, data[schema_at:schema_at + schema_length],
                 data[statement_at:end].decode("utf-8", errors="backslashreplace"))


def _images_at(data: bytes, fmt: Format, type_code: int,
               kinds: tuple[ChangeKind, ...]) -> tuple[int, bytes, bytes | None, int]:
    """A rows event's post-header: table id, flags, (v2) extra data (its length counts itself); then
    the column count, the bitmap of columns present (for updates also the after image's): the column
    count, the bitmaps and where the images start."""
    pos = HEADER + fmt.table_id_size + 2
    if type_code in _VERSION_2:
        pos += int.from_bytes(data[pos:pos + 2], "little")
    count = data[pos]
    if count < 0xFB:  # the column count in one byte, as nearly always
        pos += 1
    else:
        cursor = _Cursor(data, pos)
        count = cursor.packed()
        pos = cursor.pos
    width = (count + 7) // 8
    present = data[pos:pos + width]
    pos += width
    if len(kinds) == 2:
        return count, present, data[pos:pos + width], pos + width
    return count, present, None, pos


def _rows(data: bytes, end: int, fmt: Format, table_ids: dict[int, TableMap], timestamp: int, log_pos: int,
          type_code: int, kinds: tuple[ChangeKind, ...]) -> Rows:
    table_map = table_ids.get(int.from_bytes(data[HEADER:HEADER + fmt.table_id_size], "little"))
    if table_map is None:
        raise RowDecodeError(f"a rows event ending at binlog position {log_pos} names a table id no table map "
                             f"before it defined")
    count, present, after, start = _images_at(data, fmt, type_code, kinds)
    return Rows(timestamp, log_pos, type_code, table_map, kinds, count, present, after, data, start, end,
                all_present(count, present, after))


def all_present(count: int, present: bytes, after: bytes | None) -> bool:
    """Whether the column bitmaps of a rows event name each of its ``count`` columns (bits past them
    aside)."""
    every = (1 << count) - 1
    return int.from_bytes(present, "little") & every == every and (
        after is None or int.from_bytes(after, "little") & every == every)


def parse_table_map(data: bytes, end: int, fmt: Format) -> TableMap:
    """Post-header: table id and flags; then the database and table names (each with a length byte and
    a NUL), the column count, the column types, their metadata, the NULL bitmap and the optional
    metadata fields (type, length, value) up to ``end``."""
    size = fmt.table_id_size
    table_id = int.from_bytes(data[HEADER:HEADER + size], "little")
    cursor = _Cursor(data, HEADER + size + 2)
    schema = cursor.take(cursor.uint(1)).decode()
    cursor.take(1)
    table = cursor.take(cursor.uint(1)).decode()
    cursor.take(1)
    count = cursor.packed()
    columns = [BinlogColumn(kind) for kind in cursor.take(count)]
    metadata_end = cursor.packed() + cursor.pos
    for column in columns:
        if not _read_metadata(column, cursor):
            break  # a type this parse does not know: no schema lists it, so its table cannot be captured
    cursor.pos = metadata_end
    cursor.take((count + 7) // 8)  # the NULL bitmap: the schema says which columns are nullable
    fields: dict[int, bytes] = {}
    while cursor.pos < end:
        kind = cursor.uint(1)
        fields[kind] = cursor.string()
    _apply_optional_metadata(columns, fields, fmt.dbms)
    return TableMap(table_id, TableId(schema, table), columns, data)


def _read_metadata(column: BinlogColumn, cursor: _Cursor) -> bool:
    """A column type's metadata in the table map (0, 1 or 2 bytes); False for a type not known here."""
    kind = column.type
    if kind in _NO_METADATA:
        return True
    if kind in _ONE_BYTE:
        value = cursor.uint(1)
        if kind in (BinlogType.TIMESTAMP2, BinlogType.DATETIME2, BinlogType.TIME2):
            column.fsp = value
        elif kind in (BinlogType.FLOAT, BinlogType.DOUBLE):
            column.size = value
        else:
            column.length_size = value
    elif kind == BinlogType.VARCHAR:
        column.max_length = cursor.uint(2)
    elif kind == BinlogType.NEWDECIMAL:
        column.precision, column.decimals = cursor.uint(1), cursor.uint(1)
    elif kind == BinlogType.BIT:
        bits, whole_bytes = cursor.uint(1), cursor.uint(1)
        column.bits = whole_bytes * 8 + bits
    elif kind in (BinlogType.STRING, _VAR_STRING):
        real, low = cursor.uint(1), cursor.uint(1)
        if real in _ENUM_OR_SET:  # ENUM and SET are logged as STRING with their real type here
            column.type, column.size = real, low
        else:
            column.max_length = (((real << 4) & 0x300) ^ 0x300) + low
    else:
        return False
    return True


def _flags(value: bytes, count: int) -> list[bool]:
    """``count`` flags, most significant bit first."""
    return [bool(value[i // 8] >> (7 - i % 8) & 1) for i in range(count)]


def _ints(value: bytes) -> list[int]:
    cursor, out = _Cursor(value, 0), list[int]()
    while cursor.pos < len(value):
        out.append(cursor.packed())
    return out


def _collations(fields: dict[int, bytes], default_kind: int, column_kind: int, count: int) -> list[int]:
    """The collation of each of ``count`` columns, from a default with exceptions or one per column."""
    if column_kind in fields:
        return _ints(fields[column_kind])
    if default_kind not in fields:
        return []
    values = _ints(fields[default_kind])
    exceptions = dict(zip(values[1::2], values[2::2], strict=True))
    return [exceptions.get(i, values[0]) for i in range(count)]


def _encoding(collation: int, dbms: str) -> str:
    charset = charset_by_id(str(collation), dbms)
    return str(charset.encoding) if charset is not None else "utf8"


def _strings(value: bytes, encodings: list[str]) -> list[list[str]]:
    """Lists of strings (a count, then each string), one per column, decoded as UTF-8 or, failing that,
    in the column's character set."""
    cursor, out = _Cursor(value, 0), list[list[str]]()
    while cursor.pos < len(value):
        raw = [cursor.string() for _ in range(cursor.packed())]
        encoding = encodings[len(out)] if len(out) < len(encodings) else "utf-8"
        out.append([_text(r, encoding) for r in raw])
    return out


def _text(raw: bytes, encoding: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode(encoding)


def _apply_optional_metadata(columns: list[BinlogColumn], fields: dict[int, bytes], dbms: str) -> None:
    if _COLUMN_NAME in fields:
        name_cursor = _Cursor(fields[_COLUMN_NAME], 0)
        for column in columns:
            column.name = name_cursor.string().decode()
    numeric = [c for c in columns if c.type in _NUMERIC]
    signedness = _flags(fields[_SIGNEDNESS], len(numeric)) if _SIGNEDNESS in fields else [None] * len(numeric)
    for column, unsigned in zip(numeric, signedness, strict=True):
        column.unsigned = unsigned
    character = [c for c in columns
                 if c.type in _CHARACTER or (c.type == BinlogType.GEOMETRY and dbms == "mariadb")]
    for column, collation in zip(character, _collations(fields, _DEFAULT_CHARSET, _COLUMN_CHARSET, len(character)),
                                 strict=False):
        column.character_set_name = _encoding(collation, dbms)
    enum_or_set = [c for c in columns if c.type in _ENUM_OR_SET]
    collations = _collations(fields, _ENUM_AND_SET_DEFAULT_CHARSET, _ENUM_AND_SET_COLUMN_CHARSET, len(enum_or_set))
    for column, collation in zip(enum_or_set, collations, strict=False):
        column.character_set_name = _encoding(collation, dbms)
    vectors = [c for c in columns if c.type == BinlogType.VECTOR]
    for column, dimensions in zip(vectors, _ints(fields.get(_VECTOR_DIMENSIONALITY, b"")), strict=False):
        column.dimensions = dimensions
    for kind, key, prefix in ((BinlogType.ENUM, _ENUM_VALUES, [""]), (BinlogType.SET, _SET_VALUES, [])):
        typed = [c for c in columns if c.type == kind]
        encodings = [c.character_set_name or "utf-8" for c in typed]
        for column, values in zip(typed, _strings(fields.get(key, b""), encodings), strict=False):
            if kind == BinlogType.ENUM:
                column.enum_values = prefix + values
            else:
                column.set_values = values
