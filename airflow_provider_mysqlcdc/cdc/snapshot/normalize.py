"""Fixing a chunk's SELECT up with the binlog between its watermarks (DBLog's "offset signal" step).

The SELECT saw the chunk at some moment between the low (LW) and high (HW) watermark. Replaying
every change of (LW, HW] whose key lies in the chunk over those rows gives the chunk exactly as of
HW: an upsert per key where the last image wins, a delete or an update's before image removes the
row. Replaying a change the SELECT already saw is harmless because each image is a full row. Changes
whose key is outside the chunk belong to another chunk and are skipped here: that chunk's own read,
or the stream after its HW, carries them.

Rows are identified by their exact primary-key values; images from SELECT and binlog carry the
same stored values (the type mapping makes them equal), so this needs no collation.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema

Row = tuple[Any, ...]


def row_key_of(schema: TableSchema) -> Callable[[Row], Hashable]:
    """The identity of a row image in column order: its primary-key values as a tuple."""
    positions = [schema.column_names.index(k) for k in schema.row_key]
    getter = operator.itemgetter(*positions)
    return (lambda row: (getter(row),)) if len(positions) == 1 else getter


def apply_changes(
    state: dict[Hashable, Row], changes: Iterable[ChangeRecord], row_key: Callable[[Row], Hashable]
) -> set[Hashable]:
    """Apply changes in order to rows keyed by ``row_key``; returns the keys they touched.

    The same rule serves a chunk's fix-up and a consumer replaying the changelog over a snapshot.
    """
    touched: set[Hashable] = set()
    for change in changes:
        key = row_key(change.values)
        touched.add(key)
        if change.op.is_retraction:
            state.pop(key, None)
        else:
            state[key] = change.values
    return touched


@dataclass(frozen=True)
class NormalizedChunk:
    table: pa.Table
    changed_keys: int
    """How many distinct row keys the binlog replay touched (a figure for logs and the manifest)."""


def normalize_chunk(
    table: pa.Table,
    changes: Iterable[ChangeRecord],
    schema: TableSchema,
    in_chunk: Callable[[Row], bool],
) -> NormalizedChunk:
    """Apply the changes of (LW, HW], in binlog order, to the chunk's SELECT result.

    ``in_chunk`` tells whether a row image's chunk key lies in this chunk's range (collation-aware
    for strings, see key_order). The caller passes only changes of this table in (LW, HW]. The
    common case, no change in the chunk, returns the SELECT's table untouched.
    """
    relevant = [c for c in changes if in_chunk(c.values)]
    if not relevant:
        return NormalizedChunk(table, 0)
    row_key = row_key_of(schema)
    final: dict[Hashable, Row] = {}
    touched = apply_changes(final, relevant, row_key)
    kept = table.filter(pc.invert(_key_mask(table, schema, touched)))
    names = schema.column_names
    added = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in final.values()], schema=table.schema)
    return NormalizedChunk(pa.concat_tables([kept, added]), len(touched))


def _key_mask(table: pa.Table, schema: TableSchema, keys: set[Hashable]) -> pa.ChunkedArray:
    """True for the rows whose key is among ``keys``."""
    if len(schema.row_key) == 1:
        name = schema.row_key[0]
        wanted = pa.array([k[0] for k in keys], type=table.schema.field(name).type)  # type: ignore[index]
        return pc.is_in(table.column(name), value_set=wanted)
    columns = [table.column(k).to_pylist() for k in schema.row_key]
    return pa.chunked_array([pa.array([key in keys for key in zip(*columns, strict=True)], pa.bool_())])
