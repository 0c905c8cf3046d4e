"""Selecting a chunk straight into Arrow with connectorx: no Python object per value.

connectorx reads MySQL rows in native code into Arrow (763k rows/s measured here, against 69k for
pymysql), but it panics on some values (DECIMAL wider than 28 digits, zero dates, negative or long
TIME) and refuses GEOMETRY. So a column of such a type is selected through an SQL expression chosen
from its type, producing something connectorx reads exactly (integers, strings, bytes), and the Arrow
column is then cast to the canonical type. Each type's expression and cast are in its row of
``type_registry``, with the reason next to it. The type-matrix test checks this path against the
binlog too.

Dates, DATETIMEs and TIMESTAMPs are the exception: the values connectorx panics on (zero and invalid
dates) are rare, and an expression around every value costs the server more than the rest of the
column (0.11-0.19 CPU s per 1,000,000 rows of the benchmark table, ``bench/RESULTS.md``). So they are
read as they are until connectorx panics on one; that SELECT is then repeated, and every later one of
the table made, with the type's ``connectorx_exact`` expression, which turns those values into NULL.
Repeating a SELECT between the chunk's watermarks changes nothing the chunk reader relies on (it was
selected after LW and before HW). connectorx's session is at time zone +00:00, where the wall clock a
TIMESTAMP is read as is its UTC instant.

connectorx takes no query parameters, so chunk bounds are written as literals: strings and bytes
as hex literals, which need no escaping whatever the server's sql_mode.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema, arrow_type
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import select_item, type_of
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.tls import only_the_ca
from airflow_provider_mysqlcdc.cdc.split.chunks import INTEGER_TYPES, Chunk, chunk_where
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError

_log = logging.getLogger(__name__)


def literal(value: Any) -> str:
    """An SQL literal for a chunk bound."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f"X'{value.encode('utf-8').hex()}'"
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, dt.datetime | dt.date):
        return f"'{value.isoformat(sep=' ') if isinstance(value, dt.datetime) else value.isoformat()}'"
    if isinstance(value, dt.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        sign, micros = ("-" if micros < 0 else ""), abs(micros)
        seconds, fraction = divmod(micros, 1_000_000)
        return f"'{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}'"
    raise TableNotSupportedError(
        f"no SQL literal for a chunk bound of type {type(value).__name__}: set chunk_key_column to a column of "
        f"numbers, strings, binary strings or dates/times"
    )


SESSION = "SET time_zone = '+00:00'"
"""What connectorx's session runs before each SELECT: TIMESTAMPs are read as the wall clock of UTC."""


def select_expression(column: Column, exact: bool = False) -> str:
    """What connectorx reads for a column (named as the column): what it reads exactly, or (``exact``) also what
    it panics on (``MySqlType.connectorx_exact``)."""
    spec = type_of(column)
    return select_item(column, spec.connectorx_exact if exact and spec.connectorx_exact else spec.connectorx_sql)


def _unreadable_date(exc: BaseException) -> bool:
    """Whether connectorx panicked on a date, DATETIME or TIMESTAMP it cannot read (a zero or invalid date)."""
    return type(exc).__name__ == "PanicException" and "Couldn't convert the value `Date(" in str(exc)


def _canonical(column: Column, values: pa.ChunkedArray) -> pa.ChunkedArray:
    return type_of(column).from_connectorx(values, arrow_type(column))


def _in_range(key: pa.ChunkedArray, chunk: Chunk, nullable: bool) -> pa.ChunkedArray:
    """Which of the integer ``key`` values lie in the chunk, as ``chunk_where`` selects them (a NULL key in
    the first chunk); a NULL in the mask drops the row."""
    mask = pc.is_valid(key)
    if chunk.start is not None:
        mask = pc.and_kleene(mask, pc.greater_equal(key, pa.scalar(chunk.start, key.type)))
    if chunk.end is not None:
        mask = pc.and_kleene(mask, pc.less(key, pa.scalar(chunk.end, key.type)))
    if chunk.start is None and nullable:
        mask = pc.or_kleene(mask, pc.is_null(key))
    return mask


def part_by_key(table: pa.Table, key_name: str, chunks: Sequence[Chunk], nullable: bool) -> list[pa.Table]:
    """The rows of ``table`` in each of ``chunks`` by their integer key, as ``_in_range`` selects them. Rows in
    key order without a NULL key (a primary key's range scan returns them so) are cut into slices that
    share the table's buffers, found by binary search; any other order is filtered, which copies each
    chunk's rows (0.07 CPU s per 1,000,000 rows of the benchmark table, the slices ~0.001)."""
    key = table.column(key_name)
    if key.null_count == 0 and table.num_rows:
        values = key.combine_chunks().to_numpy()
        if bool(np.all(values[1:] >= values[:-1])):
            bounds = [(0 if c.start is None else _position(values, c.start),
                       len(values) if c.end is None else _position(values, c.end)) for c in chunks]
            return [table.slice(low, max(0, high - low)) for low, high in bounds]
    return [table.filter(_in_range(key, chunk, nullable)) for chunk in chunks]


def _position(values: np.ndarray, bound: int) -> int:
    """Where ``bound`` would go in the sorted ``values``: the first value at or above it."""
    return int(np.searchsorted(values, np.array(bound, dtype=values.dtype), side="left"))


def connectorx_reaches(config: ConnectionConfig) -> bool:
    """Whether connectorx's URL can say how to connect: plain, or TLS without a client certificate."""
    return config.ssl is None or config.ssl.connectorx_params() is not None


def connectorx_url(config: ConnectionConfig, database: str) -> str:
    """The MySQL URL of ``config`` for connectorx, TLS settings included (``tls.connectorx_params``)."""
    user, password = quote(config.user, safe=""), quote(config.password, safe="")
    params = config.ssl.connectorx_params() if config.ssl else None
    query = f"?{params}" if params else ""
    return f"mysql://{user}:{password}@{config.host}:{config.port}/{quote(database, safe='')}{query}"


class ArrowSelect:
    """Reads chunks of one table into canonical Arrow tables."""

    def __init__(self, config: ConnectionConfig, schema: TableSchema) -> None:
        self._config = config
        self._url = connectorx_url(config, schema.id.database)
        self._schema = schema
        self._arrow_schema = arrow_schema(schema)
        self._key = schema.chunk_key_column
        self._select, self._select_exact = (self._select_list(exact) for exact in (False, True))

    def _select_list(self, exact: bool) -> str:
        columns = ", ".join(select_expression(c, exact) for c in self._schema.columns)
        return f"SELECT {columns} FROM {self._schema.id.quoted} WHERE "  # noqa: S608 (quoted names)

    @property
    def reads_dates_exactly(self) -> bool:
        """Whether the SELECT reads every column through the expressions that read zero and invalid dates."""
        return self._select == self._select_exact

    def query(self, chunk: Chunk) -> str:
        return self._select + self._where(chunk)

    def _where(self, chunk: Chunk) -> str:
        return chunk_where(chunk, self._key, inline=literal)[0]

    def read(self, chunk: Chunk) -> pa.Table:
        return self._read(self._where(chunk))

    @property
    def reads_together(self) -> bool:
        """Whether ``read_many`` can read this table's chunks: its chunk key is an integer column."""
        return self._key.data_type in INTEGER_TYPES

    def query_many(self, chunks: Sequence[Chunk]) -> str:
        """One SELECT of the rows of all ``chunks``: neighbours (one's end the next one's start) as one key
        range, the ranges joined by OR."""
        return self._select + self._where_many(chunks)

    def _where_many(self, chunks: Sequence[Chunk]) -> str:
        ranges: list[Chunk] = []
        for chunk in chunks:
            if ranges and ranges[-1].end is not None and ranges[-1].end == chunk.start:
                ranges[-1] = replace(ranges[-1], end=chunk.end)
            else:
                ranges.append(chunk)
        return " OR ".join(f"({self._where(r)})" for r in ranges)

    def read_many(self, chunks: Sequence[Chunk]) -> list[pa.Table]:
        """The rows of each of ``chunks`` (of an integer key), read by one SELECT and parted by their key in
        Arrow, which compares integers as the server does. A SELECT costs the server and connectorx (which
        connects twice for each) more than its rows when a chunk is small: measured here, reading 16
        chunks of 8,096 rows at once took a fifth less CPU on both sides (``bench/RESULTS.md``)."""
        if not self.reads_together:
            raise ValueError(f"chunks of {self._schema.id} are read together only on an integer key, not on "
                             f"{self._key.name} {self._key.column_type}")
        return part_by_key(self._read(self._where_many(chunks)), self._key.name, chunks, self._key.nullable)

    def _read(self, where: str) -> pa.Table:
        """The canonical rows ``where`` selects: dates read as they are, unless (or until) connectorx panics on
        one (see the module's docstring)."""
        try:
            raw = self._select_raw(self._select + where)
        except BaseException as exc:  # a Rust panic is a BaseException
            if self.reads_dates_exactly or not _unreadable_date(exc):
                raise
            _log.warning("%s holds a zero or invalid date, which connectorx cannot read (the panic above says which): "
                         "its SELECTs read dates through expressions that make them NULL from now on, and this one "
                         "is read again", self._schema.id)
            self._select = self._select_exact
            raw = self._select_raw(self._select + where)
        if raw.num_rows == 0:
            return self._arrow_schema.empty_table()
        columns = [_canonical(c, raw.column(i)) for i, c in enumerate(self._schema.columns)]
        return pa.Table.from_arrays(columns, schema=self._arrow_schema)

    def _select_raw(self, query: str) -> pa.Table:
        import connectorx

        try:
            with only_the_ca(self._config.ssl):
                raw: pa.Table = connectorx.read_sql(self._url, query, return_type="arrow", pre_execution_query=SESSION)
        except RuntimeError as exc:  # connectorx's connection errors are RuntimeErrors with the driver's words
            explained = self._config.explain(exc)
            if explained is exc:
                raise
            raise explained from None
        return raw

