"""Cutting a table into chunks by its chunk key, as Flink CDC 2.x does, with collation-exact strings.

Integer and DECIMAL keys whose values are spread evenly enough are cut arithmetically from MIN and
MAX (two index lookups, whatever the table size). Everything else walks the key index with one
``LIMIT chunk_size`` query per chunk. Key comparisons happen in SQL or through ``key_order``'s sort
keys, never with Python's ``<`` on strings.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from airflow_provider_mysqlcdc.cdc.chunks import INTEGER_TYPES, Chunk, check_chunk_key, key_parameter
from airflow_provider_mysqlcdc.cdc.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.schema import Column, TableSchema
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

DEFAULT_CHUNK_SIZE = 8096
DEFAULT_DISTRIBUTION_FACTOR_LOWER = 0.05
DEFAULT_DISTRIBUTION_FACTOR_UPPER = 1000.0


def validate_split_options(chunk_size: int, factor_lower: float, factor_upper: float) -> None:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidOptionError(f"chunk_size must be a whole number of rows >= 1, not {chunk_size!r}")
    if not (0 < factor_lower <= factor_upper) or not math.isfinite(factor_upper):
        raise InvalidOptionError(
            "distribution_factor_lower and distribution_factor_upper must be positive numbers with "
            f"lower <= upper (defaults 0.05 and 1000.0), not {factor_lower!r} and {factor_upper!r}"
        )


def split_table(
    conn: Any,
    schema: TableSchema,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    distribution_factor_lower: float = DEFAULT_DISTRIBUTION_FACTOR_LOWER,
    distribution_factor_upper: float = DEFAULT_DISTRIBUTION_FACTOR_UPPER,
) -> list[Chunk]:
    """The chunks of ``schema``'s table as it is now; the same table state gives the same chunks."""
    validate_split_options(chunk_size, distribution_factor_lower, distribution_factor_upper)
    column = check_chunk_key(schema)
    key, table = column.quoted, schema.id.quoted
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({key}), MAX({key}) FROM {table}")  # noqa: S608 (quoted names)
        low, high = cur.fetchone()
    if low is None:  # empty, or every key NULL: one chunk takes all
        return [Chunk(schema.id, 0, None, None)]
    if column.data_type in INTEGER_TYPES or column.data_type == "decimal":
        rows = _approximate_rows(conn, schema)
        factor = (Decimal(high) - Decimal(low) + 1) / rows if rows > 0 else None
        if factor is not None and distribution_factor_lower <= factor <= distribution_factor_upper:
            bounds = _even_bounds(column, low, high, factor, chunk_size)
            return _chunks(schema, bounds)
    return _chunks(schema, _uneven_bounds(conn, schema, column, low, chunk_size))


def _approximate_rows(conn: Any, schema: TableSchema) -> int:
    """InnoDB's estimate: free to read, but 0 right after a bulk load, which means "split unevenly"."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.id.database, schema.id.table),
        )
        row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def _even_bounds(column: Column, low: Any, high: Any, factor: Decimal, chunk_size: int) -> list[Any]:
    """Chunk starts ``low + step, low + 2 step, ...`` up to ``high``; the first chunk is (-inf, low + step).

    Integer steps are whole numbers (at least 1); DECIMAL steps are rounded up to the column's scale,
    so no two bounds are equal and none is above MAX (BIGINT UNSIGNED near 2^64 included, as Python
    integers do not overflow).
    """
    if column.data_type in INTEGER_TYPES:
        step: int | Decimal = max(1, int(factor * chunk_size))
    else:
        unit = Decimal(1).scaleb(-(column.scale or 0))
        step = max(unit, (factor * chunk_size).quantize(unit, rounding="ROUND_CEILING"))
    bounds = []
    bound = low + step
    while bound <= high:
        bounds.append(bound)
        bound += step
    return bounds


def _uneven_bounds(conn: Any, schema: TableSchema, column: Column, low: Any, chunk_size: int) -> list[Any]:
    """Walk the key index: each next bound is the key ``chunk_size`` rows after the current one.

    When fewer rows than that remain, they form the last chunk (unbounded above). When the next
    bound equals the current one (``chunk_size`` rows share one value of a non-unique
    chunk_key_column), jump to the next larger key instead, so every chunk makes progress.
    """
    key, table, param = column.quoted, schema.id.quoted, key_parameter(column)
    order = KeyOrder.for_column(conn, column)
    next_sql = (
        f"SELECT MAX({key}), COUNT(*) FROM (SELECT {key} FROM {table} WHERE {key} >= {param} "  # noqa: S608
        f"ORDER BY {key} LIMIT {int(chunk_size) + 1}) AS window_"
    )
    jump_sql = f"SELECT MIN({key}) FROM {table} WHERE {key} > {param}"  # noqa: S608 (quoted names)
    bounds: list[Any] = []
    start = low
    with conn.cursor() as cur:
        while True:
            cur.execute(next_sql, (start,))
            end, rows = cur.fetchone()
            if rows <= chunk_size:
                return bounds
            start_key, end_key = order.sort_keys([start, end])
            if end_key == start_key:
                cur.execute(jump_sql, (end,))
                (end,) = cur.fetchone()
                if end is None:
                    return bounds
            bounds.append(end)
            start = end


def _chunks(schema: TableSchema, bounds: list[Any]) -> list[Chunk]:
    starts = [None, *bounds]
    ends = [*bounds, None]
    return [Chunk(schema.id, i, s, e) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
