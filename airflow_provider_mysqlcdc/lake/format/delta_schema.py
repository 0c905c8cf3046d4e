"""What each replicated table's two Delta Lake tables hold, and the types Delta lacks.

Per source table (the lake handle, ``lake.handle``, says where, and opens them)::

    <db>/<table>/current/     the current state: one row per key, deletes applied,
                              partitioned by ``_batch``, the snapshot batch whose key range holds the row
    <db>/<table>/changelog/   every change the stream committed, append-only

Both are ordinary Delta tables written with ``deltalake`` (delta-rs, in ``lake.format.delta_table``), so
Spark, DuckDB, Polars and Trino read them with their own Delta readers. Delta has no unsigned integers,
no durations and no decimals over 38 digits (MySQL allows 65): such columns are stored as the nearest
Delta type that holds every value (``stored_type``, ``for_delta``), and our readers cast them back to the table's
Arrow types. Partitioning the current state by snapshot batch is
what lets a re-run of one batch replace exactly its rows in one Delta transaction (an overwrite of
its partition), and lets a MERGE of changes rewrite only the partitions whose keys changed.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_mysqlcdc.exceptions import SchemaChangeError

BATCH_COLUMN = "_batch"
"""The current state's partition column: the snapshot batch (of the table's plan) whose chunks hold the
row's key; 0 for a table captured without a snapshot."""

STREAM_SEQ_COLUMN = "_stream_seq"
"""The changelog's column naming the stream batch (checkpoint sequence number) that committed the row."""
STREAM_APP_ID = "airflow-provider-mysqlcdc-stream"
"""The application transaction id of the stream's changelog commits; its version is the batch's sequence
number, so a retried commit is recognised (``TableVersion.applied``) and never doubled."""
MERGE_APP_ID = "airflow-provider-mysqlcdc-merge"
"""The application transaction id of the MERGE commits into the current state; its version is the last
stream sequence number merged, so a reader applies only later changelog rows on top."""


_WIDER_SIGNED = {
    pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0),
}


def stored_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type a column of ``arrow_type`` is stored with in the Delta tables (the same when Delta has it):
    UNSIGNED as the next wider signed integer (BIGINT UNSIGNED as DECIMAL(20,0)), TIME as microseconds,
    a DECIMAL over 38 digits as its exact text."""
    if arrow_type in _WIDER_SIGNED:
        return _WIDER_SIGNED[arrow_type]
    if pa.types.is_duration(arrow_type):
        return pa.int64()
    if pa.types.is_decimal256(arrow_type):
        return pa.string()
    return arrow_type


def for_delta(rows: pa.Table) -> pa.Table:
    """``rows`` with the types the Delta tables store, every column nullable (a column dropped from the
    source stays in the Delta schema, NULL in later rows). A wide decimal becomes its exact text in plain
    notation (``-0.000001``, not pyarrow's ``-1E-6``)."""
    for index, field in enumerate(rows.schema):
        if pa.types.is_decimal256(field.type):
            text = pa.array([None if v is None else format(v, "f") for v in rows.column(index).to_pylist()],
                            pa.string())
            rows = rows.set_column(index, field.with_type(pa.string()), text)
    target = stored_schema(rows.schema)
    return rows if rows.schema == target else rows.cast(target)


def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The schema ``for_delta`` gives rows of ``schema``: each type as stored, every column nullable."""
    return pa.schema([pa.field(f.name, stored_type(f.type), nullable=True) for f in schema])


_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def wider(stored: pa.DataType, new: pa.DataType) -> pa.DataType:
    """A type holding every value of both (integers and decimals), else ``new`` (old values are cast)."""
    if stored == new:
        return stored
    if pa.types.is_integer(stored) and pa.types.is_integer(new):
        return stored if stored.bit_width >= new.bit_width else new
    if pa.types.is_floating(stored) and pa.types.is_floating(new):
        return pa.float64()
    if _decimal_like(stored) and _decimal_like(new):
        (whole_a, scale_a), (whole_b, scale_b) = _digits(stored), _digits(new)
        scale = max(scale_a, scale_b)
        precision = max(whole_a, whole_b) + scale
        return pa.decimal128(precision, scale) if precision <= 38 else pa.string()
    return new


def _decimal_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_decimal128(t) or pa.types.is_signed_integer(t))


def _digits(t: pa.DataType) -> tuple[int, int]:
    """Digits before and after the point."""
    if pa.types.is_integer(t):
        return _INTEGER_DIGITS[t.bit_width], 0
    return t.precision - t.scale, t.scale


def cast_to(rows: pa.Table, target: pa.Schema, what: str) -> pa.Table:
    """``rows`` with the target's types for the columns they have; a value that does not fit is a
    SchemaChangeError naming the column."""
    fields = [target.field(name) for name in rows.column_names]
    if all(f.type == rows.schema.field(f.name).type for f in fields):
        return rows
    try:
        return rows.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        changed = [f"{f.name} {rows.schema.field(f.name).type} -> {f.type}" for f in fields
                   if f.type != rows.schema.field(f.name).type]
        raise SchemaChangeError(
            f"{what} changed column types ({', '.join(changed)}) and its values cannot be cast to the new "
            f"types ({exc}): re-snapshot the table (delete its folder in the lake and run the DAG again)"
        ) from exc
