"""Cutting a table into chunks by its chunk key, as Flink CDC 2.x does, with collation-exact strings.

Integer and DECIMAL keys whose values are spread evenly enough are cut arithmetically from MIN and
MAX (two index lookups, whatever the table size). Everything else walks the key index with one
``LIMIT chunk_size`` query per chunk. Keys are compared in SQL only, never with Python's ``<`` or
``==`` on strings, whose order is the column collation's.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import INTEGER_TYPES, Chunk, check_chunk_key, key_parameter
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

DEFAULT_CHUNK_SIZE = 8096
DEFAULT_CHUNK_MAX_BYTES = 64 * 1024 * 1024
"""64 MiB: what bounds a chunk of wide rows (Flink CDC bounds chunks by rows only). A chunk reader peaks at
about 350 MiB plus 3.5 times its chunk's bytes (bench.wide_rows: 566 MiB at this default with 6 MB rows), so
an executor stays within ``docs/production.md``'s stated memory whatever the row width; rows of 160 B reach
``DEFAULT_CHUNK_SIZE`` long before it."""
DEFAULT_DISTRIBUTION_FACTOR_LOWER = 0.05
DEFAULT_DISTRIBUTION_FACTOR_UPPER = 1000.0
# DECIMAL keys have up to 65 digits (30 after the point); the default 28-digit context would round
# MAX - MIN and make quantizing the step raise InvalidOperation
_DECIMAL_DIGITS = 100


def validate_split_options(chunk_size: int, factor_lower: float, factor_upper: float) -> None:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidOptionError(f"chunk_size must be a whole number of rows >= 1, not {chunk_size!r}")
    if not (0 < factor_lower <= factor_upper) or not math.isfinite(factor_upper):
        raise InvalidOptionError(
            "distribution_factor_lower and distribution_factor_upper must be positive numbers with "
            f"lower <= upper (defaults 0.05 and 1000.0), not {factor_lower!r} and {factor_upper!r}"
        )


def chunk_rows(chunk_size: int, chunk_max_bytes: int, row_bytes: int) -> int:
    """The rows a chunk of a table aims at: ``chunk_size``, or fewer when that many rows of ``row_bytes``
    (the table's average, ``discovery.average_row_bytes``; 0 unknown) would exceed ``chunk_max_bytes``; at
    least one."""
    if row_bytes <= 0:
        return chunk_size
    return max(1, min(chunk_size, chunk_max_bytes // row_bytes))


def split_table(
    conn: Any,
    schema: TableSchema,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    distribution_factor_lower: float = DEFAULT_DISTRIBUTION_FACTOR_LOWER,
    distribution_factor_upper: float = DEFAULT_DISTRIBUTION_FACTOR_UPPER,
    approximate_rows: int | None = None,
) -> list[Chunk]:
    """The chunks of ``schema``'s table as it is now; the same table state gives the same chunks.
    ``approximate_rows``: InnoDB's row estimate when the caller read it already (the split reads every
    table's at once); else it is read here."""
    validate_split_options(chunk_size, distribution_factor_lower, distribution_factor_upper)
    column = check_chunk_key(schema)
    key, table = column.quoted, schema.id.quoted
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({key}), MAX({key}) FROM {table}")  # noqa: S608 (quoted names)
        low, high = cur.fetchone()
    if low is None:  # empty, or every key NULL: one chunk takes all
        return [Chunk(schema.id, 0, None, None)]
    if column.data_type in INTEGER_TYPES or column.data_type == "decimal":
        factor_bounds = (distribution_factor_lower, distribution_factor_upper)
        rows = _approximate_rows(conn, schema) if approximate_rows is None else approximate_rows
        bounds = even_bounds(column, low, high, rows, chunk_size, factor_bounds)
        if bounds is not None:
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


def even_bounds(
    column: Column, low: Any, high: Any, approximate_rows: int, chunk_size: int, factor_bounds: tuple[float, float]
) -> list[Any] | None:
    """Chunk starts ``low + step, low + 2 step, ...`` up to ``high`` (the first chunk is (-inf, low + step)),
    or None when the keys are too sparse or too dense for that, or the row estimate is 0.

    The distribution factor is ``(high - low + 1) / approximate_rows`` and the step
    ``factor * chunk_size``. Integer steps are whole numbers (at least 1); DECIMAL steps are rounded
    up to the column's scale, so no two bounds are equal and none is above MAX (BIGINT UNSIGNED near
    2^64 included, as Python integers do not overflow).
    """
    if approximate_rows <= 0:
        return None
    with localcontext(prec=_DECIMAL_DIGITS):
        factor = (Decimal(high) - Decimal(low) + 1) / approximate_rows
        if not factor_bounds[0] <= factor <= factor_bounds[1]:
            return None
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
    bound equals the current one under the column's collation (``chunk_size`` rows share one value
    of a non-unique chunk_key_column, or 'a' and 'A' under a ``_ci`` collation), jump to the next
    larger key instead, so every chunk makes progress. The window reads ``chunk_size + 1`` keys: its
    last key is the first one that does not fit, i.e. the exclusive end of a full chunk.
    """
    key, table, param = column.quoted, schema.id.quoted, key_parameter(column)
    # the equality is the server's, in the column collation; params: (start, start)
    next_sql = (
        f"SELECT m, n, m = {param} FROM (SELECT MAX({key}) AS m, COUNT(*) AS n FROM "  # noqa: S608 (quoted)
        f"(SELECT {key} FROM {table} WHERE {key} >= {param} ORDER BY {key} LIMIT {int(chunk_size) + 1}) AS w) AS a"
    )
    jump_sql = f"SELECT MIN({key}) FROM {table} WHERE {key} > {param}"  # noqa: S608 (quoted names)
    bounds: list[Any] = []
    start = low
    with conn.cursor() as cur:
        while True:
            cur.execute(next_sql, (start, start))
            end, rows, same = cur.fetchone()
            if rows <= chunk_size:  # the rest fits into the last chunk
                return bounds
            if same:
                cur.execute(jump_sql, (end,))
                (end,) = cur.fetchone()
                if end is None:  # every remaining key equals start: the last chunk takes them
                    return bounds
            bounds.append(end)
            start = end


def _chunks(schema: TableSchema, bounds: list[Any]) -> list[Chunk]:
    starts = [None, *bounds]
    ends = [*bounds, None]
    return [Chunk(schema.id, i, s, e) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
