"""One Arrow type and one canonical value per MySQL column, whether the value came by SELECT or binlog.

pymysql (SELECT) and mysql-replication (binlog) hand back different Python values for the same
stored value; the registry of types (``type_registry``) says, next to each type, how they differ and
which conversion makes each canonical. Here are the table-wide pieces built from it: the Arrow schema,
pymysql's SELECT list, and the converter of whole rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import Converter, select_item, type_of


def arrow_type(column: Column) -> pa.DataType:
    """The column's canonical Arrow type; a ``TableNotSupportedError`` for a type the registry lacks."""
    return type_of(column).arrow(column)


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """Every field is nullable: a zero date in a NOT NULL column still reads as NULL."""
    return pa.schema([pa.field(c.name, arrow_type(c)) for c in schema.columns])


def select_expression(column: Column) -> str:
    """What the chunk reader selects for a column through pymysql (FLOAT through a DOUBLE)."""
    return select_item(column, type_of(column).select_sql)


def _binlog_bytes(value: bytes | str) -> bytes:
    """mysql-replication "decodes" binary strings with the codec 'binary', which Python lacks, and
    falls back to the bytes; but decoding b'' never looks the codec up, so empty values arrive as ''."""
    return value if isinstance(value, bytes) else value.encode()


def _from_binlog(column: Column) -> Converter | None:
    """The conversion of one non-NULL value of mysql-replication's; None = as is."""
    spec = type_of(column)
    convert = spec.from_binlog(column)
    if not spec.byte_string:
        return convert
    if convert is None:
        return _binlog_bytes
    return lambda v: convert(_binlog_bytes(v))


class RowConverter:
    """Turns a SELECT row (a tuple in column order) or a binlog image (a dict by column name) into
    a tuple of canonical values in column order."""

    def __init__(self, schema: TableSchema, session_time_zone: str = "+00:00") -> None:
        self.schema = schema
        self.names = schema.column_names
        # SELECT rows are the hot path: only the columns that need a conversion are touched
        self._select_fixes = [
            (i, f) for i, c in enumerate(schema.columns) if (f := type_of(c).from_select(c, session_time_zone))
        ]
        self._binlog = [_from_binlog(c) for c in schema.columns]
        # a NOT NULL SET's empty value arrives from the binlog as None; SELECT gives ''
        self._empty_set = frozenset(c.name for c in schema.columns if type_of(c).empty_as_none)

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
