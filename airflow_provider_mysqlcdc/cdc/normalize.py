"""Fixing a chunk's SELECT up with the binlog between its watermarks (DBLog's "offset signal" step).

The SELECT saw the chunk at some moment between the low (LW) and high (HW) watermark. Replaying
every change of (LW, HW] whose key lies in the chunk over those rows gives the chunk exactly as of
HW: an upsert per key where the last image wins, a delete or an update's before image removes the
row. Replaying a change the SELECT already saw is harmless because each image is a full row. Changes
whose key is outside the chunk belong to another chunk and are skipped here: that chunk's own read,
or the stream after its HW, carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.changes import UPSERT_OPS, ChangeRecord

Row = tuple[Any, ...]


@dataclass(frozen=True)
class NormalizedChunk:
    rows: list[Row]
    changed_keys: int
    """How many distinct row keys the binlog replay touched (a figure for logs and the manifest)."""


def normalize_chunk(
    rows: Sequence[Row],
    changes: Iterable[ChangeRecord],
    row_key: Callable[[Row], Hashable],
    in_chunk: Callable[[Row], bool],
) -> NormalizedChunk:
    """Apply the changes of (LW, HW], in binlog order, to the rows the chunk's SELECT returned.

    ``row_key`` gives the identity of a row (its primary key values); ``in_chunk`` tells whether a
    row image's chunk key lies in this chunk's range (collation-aware for strings, see key_order).
    The caller passes only changes of this table in (LW, HW].
    """
    relevant = [c for c in changes if in_chunk(c.values)]
    if not relevant:
        return NormalizedChunk(list(rows), 0)
    state: dict[Hashable, Row] = {row_key(r): r for r in rows}
    touched = apply_changes(state, relevant, row_key)
    return NormalizedChunk(list(state.values()), touched)


def apply_changes(
    state: dict[Hashable, Row], changes: Iterable[ChangeRecord], row_key: Callable[[Row], Hashable]
) -> int:
    """Apply changes in order to rows keyed by ``row_key``; returns how many distinct keys changed.

    The same rule serves a chunk's fix-up and a consumer replaying the changelog over a snapshot.
    """
    touched: set[Hashable] = set()
    for change in changes:
        key = row_key(change.values)
        touched.add(key)
        if change.op in UPSERT_OPS:
            state[key] = change.values
        else:
            state.pop(key, None)
    return len(touched)
