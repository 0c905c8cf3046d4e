"""Which binlog events the stream emits once the snapshot chunks are done (Flink CDC's ``shouldEmit``).

A chunk's output is its state as of its high watermark (HW), so an event for a row of that chunk is
new only if it comes after that HW; events at or before it are already in the snapshot. Once an
event is past the highest HW of its table, every chunk of the table is older than it and the table
is in its pure binlog phase: no lookup at all. Otherwise the chunk holding the key is found by a
binary search over the chunk starts (Flink CDC scanned the chunks linearly, which cost a quarter of
its CPU at 10,000 chunks).

Keys are compared through *sort keys* (see ``key_order``), so string keys follow the column's
collation exactly as the splitter's SQL did.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from airflow_provider_mysqlcdc.exceptions import SnapshotStateError

_RESNAPSHOT = "its snapshot manifests are incomplete or inconsistent: re-run the table's snapshot tasks"


class Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


OffsetT = TypeVar("OffsetT", bound=Ordered)


@dataclass(frozen=True)
class FinishedChunk(Generic[OffsetT]):
    """A chunk whose snapshot is done: its key range as sort keys (``None`` = unbounded) and its HW."""

    start: Any
    end: Any
    high_watermark: OffsetT


class TableFilter(Generic[OffsetT]):
    """The emit decision for one table (``table`` names it in errors), built once from its finished chunks."""

    def __init__(self, chunks: Iterable[FinishedChunk[OffsetT]], table: Any = "the table") -> None:
        ordered = sorted(chunks, key=lambda c: (c.start is not None, c.start))
        if not ordered:
            raise SnapshotStateError(f"{table} has no finished snapshot chunk: {_RESNAPSHOT}")
        if ordered[0].start is not None or ordered[-1].end is not None:
            raise SnapshotStateError(f"the chunks of {table} do not start and end unbounded: {_RESNAPSHOT}")
        for before, after in zip(ordered, ordered[1:], strict=False):
            if before.end is None or before.end != after.start:
                raise SnapshotStateError(
                    f"the chunks of {table} do not tile the key space ({before.end!r} is followed by "
                    f"{after.start!r}): {_RESNAPSHOT}"
                )
        # bisect over the bounded starts; chunk 0 holds everything below the first of them
        self._starts = [c.start for c in ordered[1:]]
        self._high_watermarks = [c.high_watermark for c in ordered]
        self.max_high_watermark: OffsetT = max(self._high_watermarks)

    def in_binlog_phase(self, offset: OffsetT) -> bool:
        """True once ``offset`` is after every chunk's HW: emit without looking at the key."""
        return self.max_high_watermark < offset

    def chunk_index(self, sort_key: Any) -> int:
        """The chunk holding a key; a NULL key (``None``) belongs to the first chunk, like the splitter says."""
        if sort_key is None:
            return 0
        return bisect_right(self._starts, sort_key)

    def should_emit(self, sort_key: Any, offset: OffsetT) -> bool:
        if self.in_binlog_phase(offset):
            return True
        return self._high_watermarks[self.chunk_index(sort_key)] < offset


class EmitFilter(Generic[OffsetT]):
    """The emit decision for all captured tables; tables without finished chunks are not emitted."""

    def __init__(self, chunks_by_table: Mapping[Any, Iterable[FinishedChunk[OffsetT]]]) -> None:
        self.tables: dict[Any, TableFilter[OffsetT]] = {
            table: TableFilter(chunks, table) for table, chunks in chunks_by_table.items()
        }

    def needs_key(self, table: Any, offset: OffsetT) -> bool:
        """Whether deciding needs the event's sort key (callers batch those server-side lookups)."""
        table_filter = self.tables.get(table)
        return table_filter is not None and not table_filter.in_binlog_phase(offset)

    def should_emit(self, table: Any, sort_key: Any, offset: OffsetT) -> bool:
        table_filter = self.tables.get(table)
        return table_filter is not None and table_filter.should_emit(sort_key, offset)
