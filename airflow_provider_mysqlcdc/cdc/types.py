"""One Arrow type and one canonical value per MySQL column, whether the value came by SELECT or binlog.

pymysql (SELECT) and mysql-replication (binlog) hand back different Python values for the same
stored value, measured on MariaDB 10.11:

- FLOAT: SELECT prints 6 significant digits (16777217 reads as 16777200); the binlog has the exact
  float32. So FLOAT is selected as ``col + 0e0`` (a DOUBLE holding the exact float32) and both sides
  are rounded to float32.
- BIT: SELECT gives big-endian bytes, the binlog a string of '0'/'1'. BIT(1) becomes a bool,
  wider BITs an unsigned integer.
- BINARY(n): SELECT gives the value right-padded with zero bytes, the binlog strips them.
- SET: SELECT gives 'a,c', the binlog a Python set (and None for the empty set, told apart from
  NULL by its "none source").
- Zero and invalid dates ('0000-00-00', '2020-00-00'): SELECT gives strings, the binlog None (and
  epoch 0 for a zero TIMESTAMP). They all become NULL: Arrow has no such dates.
- TIME(fsp) < 0 with a fraction: mysql-replication decodes it wrongly; the value is repaired.
- YEAR 0000: SELECT gives 0, mysql-replication 1900 (no valid YEAR): it becomes 0.
- TIMESTAMP: the binlog carries a UTC instant; SELECT gives the wall clock of the session time zone,
  which is converted to UTC. Canonical values are naive UTC datetimes, typed ``timestamp[us, UTC]``.
- GEOMETRY: both sides give the server's 4-byte SRID followed by WKB; the SRID is dropped.
- JSON: MariaDB stores it as text, kept as is. MySQL's binary JSON arrives as Python objects from the
  binlog and as normalised text from SELECT; both are re-serialised the same way.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema import Column, TableSchema
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError

Converter = Callable[[Any], Any]

_INTEGERS = {"tinyint": 8, "smallint": 16, "mediumint": 32, "int": 32, "integer": 32, "bigint": 64}
_STRINGS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BINARIES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_GEOMETRIES = {
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection", "geomcollection",
}
_EPOCH = dt.datetime(1970, 1, 1)
_FLOAT32 = struct.Struct("<f")


def arrow_type(column: Column) -> pa.DataType:
    t = column.data_type
    if t in _INTEGERS:
        bits = _INTEGERS[t]
        return getattr(pa, f"{'u' if column.unsigned else ''}int{bits}")()
    if t == "decimal":
        precision, scale = column.precision or 10, column.scale or 0
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if t == "float":
        return pa.float32()
    if t in ("double", "real"):
        return pa.float64()
    if t == "bit":
        return pa.bool_() if _bit_width(column) == 1 else pa.uint64()
    if t == "year":
        return pa.int16()
    if t == "date":
        return pa.date32()
    if t == "time":
        return pa.duration("us")
    if t == "datetime":
        return pa.timestamp("us")
    if t == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if t in _STRINGS or t in ("enum", "set", "json"):
        return pa.string()
    if t in _BINARIES or t in _GEOMETRIES:
        return pa.binary()
    raise TableNotSupportedError(f"column {column.name!r} has type {column.column_type}, which is not supported")


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """Every field is nullable: a zero date in a NOT NULL column still reads as NULL."""
    return pa.schema([pa.field(c.name, arrow_type(c)) for c in schema.columns])


def select_expression(column: Column) -> str:
    """What the chunk reader selects for a column: FLOAT through a DOUBLE to keep its exact value."""
    if column.data_type == "float":
        return f"({column.quoted} + 0e0) AS {column.quoted}"
    return column.quoted


# -- canonical conversions, one function per column, built once per table ------------------------


def _bit_width(column: Column) -> int:
    return column.precision or int(column.column_type[column.column_type.index("(") + 1 : -1])


def _float32(value: Any) -> float:
    return float(_FLOAT32.unpack(_FLOAT32.pack(value))[0])


def _bits_from_bytes(value: bytes) -> int:
    return int.from_bytes(value, "big")


def _bits_from_text(value: str) -> int:
    return int(value, 2)


def _binlog_bytes(value: bytes | str) -> bytes:
    """mysql-replication "decodes" binary strings with the codec 'binary', which Python lacks, and
    falls back to the bytes; but decoding b'' never looks the codec up, so empty values arrive as ''."""
    return value if isinstance(value, bytes) else value.encode()


def _negative_time_from_binlog(value: dt.timedelta) -> dt.timedelta:
    """Undo mysql-replication's decoding of negative fractional TIME values.

    The server packs TIME(fsp) as one signed number: -12:34:56.000001 is stored as integer part
    -12:34:57 plus fraction +0.999999. mysql-replication negates the two parts separately and reads
    -12:34:56.999999. Its value L relates to the true T by T = 2 * floor(L) + 1 s - L.
    """
    if value >= dt.timedelta(0) or not value.microseconds:
        return value
    return value + dt.timedelta(seconds=1) - 2 * dt.timedelta(microseconds=value.microseconds)


def _temporal_or_null(kind: type) -> Converter:
    """Zero or invalid dates come back as strings (SELECT) or None (binlog): they become NULL."""
    return lambda v: v if isinstance(v, kind) else None


def _utc_from_wall_clock(zone: str) -> Converter | None:
    if zone in ("+00:00", "-00:00", "UTC"):
        return None
    if zone[0] in "+-":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        offset = dt.timedelta(hours=hours, minutes=minutes) * (1 if zone[0] == "+" else -1)
        return lambda v: v - offset if isinstance(v, dt.datetime) else None
    tz = ZoneInfo(zone)
    utc = dt.timezone.utc
    return (
        lambda v: v.replace(tzinfo=tz).astimezone(utc).replace(tzinfo=None) if isinstance(v, dt.datetime) else None
    )


def _json_text(value: Any) -> str:
    return json.dumps(_json_plain(value), ensure_ascii=False, separators=(", ", ": "), sort_keys=True)


def _json_plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, dict):
        return {_json_plain(k): _json_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_plain(v) for v in value]
    return value


def _converters(column: Column, source: str, session_time_zone: str) -> Converter | None:
    """The conversion of one non-NULL value from ``source`` ('select' or 'binlog'); None = as is."""
    t, from_select = column.data_type, source == "select"
    if t == "float":
        return _float32
    if t == "bit":
        as_int = _bits_from_bytes if from_select else _bits_from_text
        return (lambda v: as_int(v) == 1) if _bit_width(column) == 1 else as_int
    if t == "year" and not from_select:  # mysql-replication adds 1900 to the stored 0 of YEAR 0000
        return lambda v: 0 if v == 1900 else v
    if t == "time" and not from_select and column.datetime_precision:
        return _negative_time_from_binlog
    if t == "date":
        return _temporal_or_null(dt.date)
    if t == "datetime":
        return _temporal_or_null(dt.datetime)
    if t == "timestamp":
        if from_select:
            return _utc_from_wall_clock(session_time_zone) or _temporal_or_null(dt.datetime)
        return lambda v: None if v == _EPOCH else v  # the zero TIMESTAMP is stored as epoch 0
    if t == "binary" and not from_select:
        width = column.char_max_length or 0
        return lambda v: _binlog_bytes(v).ljust(width, b"\x00")
    if t in _BINARIES and not from_select:
        return _binlog_bytes
    if t == "set" and not from_select:
        order = {m: i for i, m in enumerate(column.members)}
        return lambda v: ",".join(sorted(v, key=order.__getitem__))
    if t in _GEOMETRIES:
        return lambda v: bytes(v[4:])
    if t == "json":  # MySQL's binary JSON; MariaDB's JSON is longtext and stays as stored
        return (lambda v: _json_text(json.loads(v))) if from_select else _json_text
    return None


class RowConverter:
    """Turns a SELECT row (a tuple in column order) or a binlog image (a dict by column name) into
    a tuple of canonical values in column order."""

    def __init__(self, schema: TableSchema, session_time_zone: str = "+00:00") -> None:
        self.schema = schema
        self.names = schema.column_names
        # SELECT rows are the hot path: only the columns that need a conversion are touched
        self._select_fixes = [
            (i, f) for i, c in enumerate(schema.columns) if (f := _converters(c, "select", session_time_zone))
        ]
        self._binlog = [_converters(c, "binlog", session_time_zone) for c in schema.columns]
        # a NOT NULL SET's empty value arrives from the binlog as None; SELECT gives ''
        self._empty_set = frozenset(c.name for c in schema.columns if c.data_type == "set")

    def from_select(self, row: Sequence[Any]) -> tuple[Any, ...]:
        if not self._select_fixes:
            return tuple(row)
        values = list(row)
        for i, f in self._select_fixes:
            v = values[i]
            if v is not None:
                values[i] = f(v)
        return tuple(values)

    def from_binlog(self, values: Mapping[str, Any], none_sources: Mapping[str, str]) -> tuple[Any, ...]:
        out = []
        for name, f in zip(self.names, self._binlog, strict=True):
            v = values[name]
            if v is None:
                out.append("" if name in self._empty_set and none_sources.get(name) == "empty set" else None)
            else:
                out.append(v if f is None else f(v))
        return tuple(out)
