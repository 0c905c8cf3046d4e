"""Every MySQL column type the CDC supports, one row each: all a value of that type needs on its way.

A value reaches the lake by one of three readers, and each hands back its own form of the same stored
value (measured on MariaDB 10.11):

- SELECT through pymysql (``types.RowConverter.from_select``),
- SELECT through connectorx straight into Arrow (``arrow_select``), which panics on some values and
  so reads such columns through an SQL expression (dates: only once it has met one), cast to the
  canonical Arrow type after,
- the binlog, decoded by mysql-replication (``types.RowConverter.from_binlog``) or by our own
  ``row_decoder``, which reads the wire format of the table map's column types.

A row (``MySqlType``) says, for the information_schema ``DATA_TYPE`` names it covers, the canonical
Arrow type, the SQL each SELECT reads, the conversions that make each reader's value canonical, and
the binlog column types the row decoder accepts. The comment above a row says why it differs from
the plain "read it as it is". Adding a type is adding a row (and, for a binlog column type no row had
before, its wire reader in ``row_decoder``).

Canonical values are the Python values of the Arrow type: zero and invalid dates are NULL (Arrow has
no such dates), TIMESTAMPs naive UTC datetimes typed ``timestamp[us, UTC]``, strings and bytes as
stored.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.binlog import json_binary
from airflow_provider_mysqlcdc.cdc.schema.table import Column
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError

Converter = Callable[[Any], Any]
SelectConverter = Callable[[Column, str], Converter | None]
"""The conversion of a column's non-NULL SELECT values, given the session time zone; None = as is."""
BinlogConverter = Callable[[Column], Converter | None]
"""The conversion of a column's non-NULL binlog values; None = as is."""
ArrowOf = Callable[[Column], pa.DataType]
Sql = Callable[[str], str]
"""An SQL expression of the quoted column name."""
FromConnectorx = Callable[[pa.ChunkedArray, pa.DataType], pa.ChunkedArray]
"""The canonical column (of the given Arrow type) from what connectorx read."""


class BinlogType(IntEnum):
    """The column types of a binlog table map (MySQL's ``enum_field_types``) that rows arrive as."""

    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    YEAR = 13
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    VECTOR = 242
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    BLOB = 252
    STRING = 254
    GEOMETRY = 255


def _as_is(column: Column, *_: str) -> None:
    """No conversion (a ``SelectConverter`` and a ``BinlogConverter``)."""
    return None


def _every(convert: Converter) -> Callable[..., Converter]:
    """``convert`` for every column of the type (a ``SelectConverter`` or ``BinlogConverter``)."""

    def for_column(column: Column, *_: str) -> Converter:
        return convert

    return for_column


def _cast(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    return values.cast(target)


@dataclass(frozen=True)
class MySqlType:
    """What the CDC knows of one MySQL column type (see the module's docstring)."""

    names: tuple[str, ...]
    """information_schema's ``DATA_TYPE`` values (lower case) of this type and its aliases."""
    arrow: ArrowOf
    """The canonical Arrow type of a column."""
    binlog_types: frozenset[int] = frozenset()
    """The table map's column types it arrives as and ``row_decoder`` reads; with any other (a schema
    gone stale, a format it does not decode) the event is left to mysql-replication."""
    select_sql: Sql | None = None
    """What pymysql's SELECT reads instead of the column itself."""
    connectorx_sql: Sql | None = None
    """What connectorx's SELECT reads instead of the column itself."""
    connectorx_exact: Sql | None = None
    """What connectorx's SELECT reads instead of the column once it has met a value of the table that it
    cannot read as it is (``arrow_select``): for a type read as it is until then, because the SQL costs the
    server more than the column and the values that need it (zero and invalid dates) are rare."""
    from_connectorx: FromConnectorx = _cast
    """Turns what connectorx read into the canonical column: a cast unless the row says otherwise."""
    from_select: SelectConverter = _as_is
    """Applied to pymysql's values."""
    from_binlog: BinlogConverter = _as_is
    """Applied to mysql-replication's values; ``row_decoder`` applies it to the strings and bytes it
    slices from the wire (the same values), and decodes the other wire formats straight to canonical."""
    text: bool = False
    """Characters: the binlog's bytes are decoded with the column's character set."""
    byte_string: bool = False
    """Bytes, which mysql-replication hands over as '' when empty (see ``types``)."""
    empty_as_none: bool = False
    """mysql-replication gives the empty value as None, told apart from NULL by its "none source"."""


# -- the conversions the rows share ------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)
_FLOAT32 = struct.Struct("<f")


def _always(arrow: pa.DataType) -> ArrowOf:
    return lambda column: arrow


def _decimal(column: Column) -> pa.DataType:
    precision, scale = column.precision or 10, column.scale or 0
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _unsupported(column: Column) -> pa.DataType:
    raise TableNotSupportedError(f"column {column.name!r} has type {column.column_type}, which is not supported")


def _float32(value: Any) -> float:
    return float(_FLOAT32.unpack(_FLOAT32.pack(value))[0])


def _through_double(q: str) -> str:
    return f"({q} + 0e0)"


def _bit_width(column: Column) -> int:
    return column.precision or int(column.column_type[column.column_type.index("(") + 1 : -1])


def _bit_arrow(column: Column) -> pa.DataType:
    return pa.bool_() if _bit_width(column) == 1 else pa.uint64()


def _bits(as_int: Callable[[Any], int]) -> Callable[..., Converter]:
    """BIT(1) as a bool, wider BITs as an unsigned integer, from what ``as_int`` reads (a
    ``SelectConverter`` or ``BinlogConverter``)."""

    def for_column(column: Column, *_: str) -> Converter:
        return (lambda v: as_int(v) == 1) if _bit_width(column) == 1 else as_int

    return for_column


def _bits_from_bytes(value: bytes) -> int:
    return int.from_bytes(value, "big")


def _bits_from_text(value: str) -> int:
    return int(value, 2)


def _bit_from_connectorx(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    return pc.not_equal(values, 0) if target == pa.bool_() else values.cast(target)


def _from_year_1(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Dates (or DATETIMEs) read as they are: year 0, which connectorx reads and Python's dates (so SELECT
    and the binlog) have not, becomes NULL."""
    values = values.cast(target)
    first = pa.scalar(dt.datetime(1, 1, 1) if pa.types.is_timestamp(target) else dt.date(1, 1, 1), target)
    before = pc.less(values, first)
    return pc.if_else(before, pa.scalar(None, target), values) if pc.any(before).as_py() else values


def _temporal_or_null(kind: type) -> Converter:
    """Zero or invalid dates come back as strings (SELECT) or None (binlog): they become NULL."""
    return lambda v: v if isinstance(v, kind) else None


def _negative_time_from_binlog(value: dt.timedelta) -> dt.timedelta:
    """Undo mysql-replication's decoding of negative fractional TIME values.

    The server packs TIME(fsp) as one signed number: -12:34:56.000001 is stored as integer part
    -12:34:57 plus fraction +0.999999. mysql-replication negates the two parts separately and reads
    -12:34:56.999999. Its value L relates to the true T by T = 2 * floor(L) + 1 s - L.
    """
    if value >= dt.timedelta(0) or not value.microseconds:
        return value
    return value + dt.timedelta(seconds=1) - 2 * dt.timedelta(microseconds=value.microseconds)


def _utc_from_wall_clock(zone: str) -> Converter | None:
    if zone in ("+00:00", "-00:00", "UTC"):
        return None
    if zone[0] in "+-":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        offset = dt.timedelta(hours=hours, minutes=minutes) * (1 if zone[0] == "+" else -1)
        return lambda v: v - offset if isinstance(v, dt.datetime) else None
    tz = ZoneInfo(zone)
    utc = dt.UTC
    return (
        lambda v: v.replace(tzinfo=tz).astimezone(utc).replace(tzinfo=None) if isinstance(v, dt.datetime) else None
    )


def _timestamp_from_select(column: Column, zone: str) -> Converter:
    return _utc_from_wall_clock(zone) or _temporal_or_null(dt.datetime)


def _padded(column: Column) -> Converter:
    width = column.char_max_length or 0
    return lambda value: value.ljust(width, b"\x00")


def _without_srid(value: bytes) -> bytes:
    return bytes(value[4:])


def _set_from_binlog(column: Column) -> Converter:
    order = {m: i for i, m in enumerate(column.members)}
    return lambda v: ",".join(sorted(v, key=order.__getitem__))


def _floats(value: bytes) -> list[float]:
    """A VECTOR's bytes (little-endian float32 values) as its floats (exact: a float32 widened to a double)."""
    return list(struct.unpack(f"<{len(value) // 4}f", value))


def _vectors_from_connectorx(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    return pa.chunked_array([pa.array([None if v is None else _floats(v) for v in values.to_pylist()], target)])


def _integer_row(
    names: tuple[str, ...], signed: pa.DataType, unsigned: pa.DataType, binlog_type: BinlogType
) -> MySqlType:
    return MySqlType(names, lambda column: unsigned if column.unsigned else signed, frozenset({binlog_type}))


def _string_row(names: tuple[str, ...], binlog_type: BinlogType) -> MySqlType:
    return MySqlType(names, _always(pa.string()), frozenset({binlog_type}), text=True)


def _bytes_row(names: tuple[str, ...], binlog_type: BinlogType, from_binlog: BinlogConverter = _as_is) -> MySqlType:
    return MySqlType(names, _always(pa.binary()), frozenset({binlog_type}), from_binlog=from_binlog, byte_string=True)


_GEOMETRIES = (
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection", "geomcollection",
)

# -- the registry --------------------------------------------------------------------------------------

TYPES: tuple[MySqlType, ...] = (
    _integer_row(("tinyint",), pa.int8(), pa.uint8(), BinlogType.TINY),
    _integer_row(("smallint",), pa.int16(), pa.uint16(), BinlogType.SHORT),
    _integer_row(("mediumint",), pa.int32(), pa.uint32(), BinlogType.INT24),
    _integer_row(("int", "integer"), pa.int32(), pa.uint32(), BinlogType.LONG),
    _integer_row(("bigint",), pa.int64(), pa.uint64(), BinlogType.LONGLONG),
    # connectorx panics on DECIMAL wider than 28 digits: it reads the decimal's text
    MySqlType(("decimal",), _decimal, frozenset({BinlogType.NEWDECIMAL}),
              connectorx_sql=lambda q: f"CAST({q} AS CHAR)"),
    # SELECT prints 6 significant digits (16777217 reads as 16777200); the binlog has the exact float32.
    # So FLOAT is selected as ``col + 0e0`` (a DOUBLE holding the exact float32) and both sides are
    # rounded to float32.
    MySqlType(("float",), _always(pa.float32()), frozenset({BinlogType.FLOAT}),
              select_sql=_through_double, connectorx_sql=_through_double,
              from_select=_every(_float32), from_binlog=_every(_float32)),
    MySqlType(("double", "real"), _always(pa.float64()), frozenset({BinlogType.DOUBLE})),
    # SELECT gives big-endian bytes, the binlog a string of '0'/'1', connectorx bytes (so it reads an
    # integer). BIT(1) becomes a bool, wider BITs an unsigned integer.
    MySqlType(("bit",), _bit_arrow, frozenset({BinlogType.BIT}),
              connectorx_sql=lambda q: f"CAST({q} AS UNSIGNED)", from_connectorx=_bit_from_connectorx,
              from_select=_bits(_bits_from_bytes), from_binlog=_bits(_bits_from_text)),
    # YEAR 0000: SELECT gives 0, mysql-replication 1900 (no valid YEAR): it becomes 0.
    MySqlType(("year",), _always(pa.int16()), frozenset({BinlogType.YEAR}),
              from_binlog=_every(lambda v: 0 if v == 1900 else v)),
    # Zero and invalid dates ('0000-00-00', '2020-00-00', '2020-02-30' under ALLOW_INVALID_DATES): SELECT gives
    # strings, the binlog None, and connectorx panics; they all become NULL. connectorx reads the column as it is
    # (the cheapest SELECT for the server) until it meets one, then ``col + INTERVAL 0 DAY``, which is NULL for
    # them and the same type, whatever the sql_mode. Year 0 becomes NULL too (Python has no year 0).
    MySqlType(("date",), _always(pa.date32()), frozenset({BinlogType.DATE}),
              connectorx_exact=lambda q: f"({q} + INTERVAL 0 DAY)", from_connectorx=_from_year_1,
              from_select=_every(_temporal_or_null(dt.date)), from_binlog=_every(_temporal_or_null(dt.date))),
    # TIME(fsp) < 0 with a fraction: mysql-replication decodes it wrongly; the value is repaired.
    # connectorx panics on negative or over-24h TIME.
    MySqlType(("time",), _always(pa.duration("us")), frozenset({BinlogType.TIME2}),
              connectorx_sql=lambda q: f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)",
              from_binlog=lambda column: _negative_time_from_binlog if column.datetime_precision else None),
    MySqlType(("datetime",), _always(pa.timestamp("us")), frozenset({BinlogType.DATETIME2}),
              connectorx_exact=lambda q: f"({q} + INTERVAL 0 SECOND)", from_connectorx=_from_year_1,
              from_select=_every(_temporal_or_null(dt.datetime)),
              from_binlog=_every(_temporal_or_null(dt.datetime))),
    # The binlog carries a UTC instant; SELECT gives the wall clock of the session time zone, which is
    # converted to UTC (connectorx's session is at +00:00, where the wall clock is the UTC instant). The zero
    # TIMESTAMP is stored as epoch 0 and becomes NULL (connectorx panics on it, like on zero dates).
    MySqlType(("timestamp",), _always(pa.timestamp("us", tz="UTC")), frozenset({BinlogType.TIMESTAMP2}),
              connectorx_exact=lambda q: f"({q} + INTERVAL 0 SECOND)",
              from_select=_timestamp_from_select,
              from_binlog=_every(lambda v: None if v == _EPOCH else v)),
    _string_row(("char",), BinlogType.STRING),
    _string_row(("varchar",), BinlogType.VARCHAR),
    _string_row(("tinytext", "text", "mediumtext", "longtext"), BinlogType.BLOB),
    MySqlType(("enum",), _always(pa.string()), frozenset({BinlogType.ENUM})),
    # SELECT gives 'a,c', the binlog a Python set (and None for the empty set, told apart from NULL by
    # its "none source").
    MySqlType(("set",), _always(pa.string()), frozenset({BinlogType.SET}),
              from_binlog=_set_from_binlog, empty_as_none=True),
    # MySQL's JSON (MariaDB's JSON is LONGTEXT, and its information_schema says so): SELECT prints the
    # document's canonical text, which is kept as it is; the binlog carries MySQL's binary JSON, rendered as
    # that same text (``json_binary``). connectorx would parse the JSON and print it its own way (compact,
    # numbers re-printed): it reads the text MySQL prints, as a string.
    MySqlType(("json",), _always(pa.string()), frozenset({BinlogType.JSON}),
              connectorx_sql=lambda q: f"CAST({q} AS CHAR)", from_binlog=_every(json_binary.to_text)),
    # MySQL 9's VECTOR: little-endian float32 values, a list of float32 in the lake. The binlog holds its bytes
    # after a length like a BLOB's; SELECT reads them as a binary string (CAST: connectorx and pymysql know no
    # VECTOR type; MySQL documents the cast's result as the vector's bytes).
    MySqlType(("vector",), _always(pa.list_(pa.float32())), frozenset({BinlogType.VECTOR}),
              select_sql=lambda q: f"CAST({q} AS BINARY)", connectorx_sql=lambda q: f"CAST({q} AS BINARY)",
              from_connectorx=_vectors_from_connectorx, from_select=_every(_floats), from_binlog=_every(_floats)),
    # SELECT gives BINARY(n)'s value right-padded with zero bytes, the binlog strips them.
    _bytes_row(("binary",), BinlogType.STRING, from_binlog=_padded),
    _bytes_row(("varbinary",), BinlogType.VARCHAR),
    _bytes_row(("tinyblob", "blob", "mediumblob", "longblob"), BinlogType.BLOB),
    # SELECT and binlog give the server's 4-byte SRID followed by WKB; the SRID is dropped. connectorx
    # refuses GEOMETRY: it reads the WKB.
    MySqlType(_GEOMETRIES, _always(pa.binary()), frozenset({BinlogType.GEOMETRY}),
              connectorx_sql=lambda q: f"ST_AsWKB({q})",
              from_select=_every(_without_srid), from_binlog=_every(_without_srid)),
)

UNSUPPORTED = MySqlType((), _unsupported)
"""Any other type: refused when its Arrow type is asked for, read as it is until then."""

_BY_NAME: dict[str, MySqlType] = {name: spec for spec in TYPES for name in spec.names}


def type_of(column: Column) -> MySqlType:
    """The registry's row for the column's type (``UNSUPPORTED`` if none)."""
    return _BY_NAME.get(column.data_type, UNSUPPORTED)


def select_item(column: Column, sql: Sql | None) -> str:
    """An item of a SELECT list: the column, or ``sql`` of it named as the column."""
    return column.quoted if sql is None else f"{sql(column.quoted)} AS {column.quoted}"
