"""Which binlog events the stream emits once the snapshot chunks are done (Flink CDC's ``shouldEmit``).

A chunk's output is its state as of its high watermark (HW), so an event for a row of that chunk is
new only if it comes after that HW; events at or before it are already in the snapshot. Once an
event is past the highest HW of its table, every chunk of the table is older than it and the table
is in its pure binlog phase: no lookup at all. Otherwise the chunk holding the key is found by
``cdc.key_range.KeyRanges``, a binary search over the chunk starts.

Keys are compared through *sort keys* (see ``key_order``), so string keys follow the column's
collation exactly as the splitter's SQL did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRange, KeyRanges, SortKeys, as_they_are
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError

_RESNAPSHOT = "its snapshot manifests are incomplete or inconsistent: re-run the table's snapshot tasks"


class TableFilter:
    """The emit decision for one table (``table`` names it in errors), built once from its finished chunks:
    their key bounds turned into sort keys by ``sort_keys`` (all at once: one batch of server lookups for
    string keys), their HWs as they are."""

    def __init__(self, chunks: Iterable[FinishedChunkInfo], sort_keys: SortKeys = as_they_are,
                 table: Any = "the table") -> None:
        chunks = list(chunks)
        bounds = sort_keys([bound for c in chunks for bound in (c.start, c.end)])
        ranges = sorted(((KeyRange(bounds[2 * i], bounds[2 * i + 1]), c.high_watermark) for i, c in enumerate(chunks)),
                        key=lambda r: (r[0].start is not None, r[0].start))
        if not ranges:
            raise SnapshotStateError(f"{table} has no finished snapshot chunk: {_RESNAPSHOT}")
        if ranges[0][0].start is not None or ranges[-1][0].end is not None:
            raise SnapshotStateError(f"the chunks of {table} do not start and end unbounded: {_RESNAPSHOT}")
        for (before, _), (after, _) in zip(ranges, ranges[1:], strict=False):
            if before.end is None or before.end != after.start:
                raise SnapshotStateError(
                    f"the chunks of {table} do not tile the key space ({before.end!r} is followed by "
                    f"{after.start!r}): {_RESNAPSHOT}"
                )
        # the bounds are sort keys already: the lookup compares them as they are
        self._chunks = KeyRanges([key_range.start for key_range, _ in ranges[1:]])
        self._high_watermarks = [hw for _, hw in ranges]
        self.max_high_watermark: BinlogOffset = max(self._high_watermarks)

    def in_binlog_phase(self, offset: BinlogOffset) -> bool:
        """True once ``offset`` is after every chunk's HW: emit without looking at the key."""
        return self.max_high_watermark < offset

    def chunk_index(self, sort_key: Any) -> int:
        """The chunk holding a key (its position in key order); a NULL key (``None``) is in the first."""
        return self._chunks.position(sort_key)

    def should_emit(self, sort_key: Any, offset: BinlogOffset) -> bool:
        if self.in_binlog_phase(offset):
            return True
        return self._high_watermarks[self.chunk_index(sort_key)] < offset


class EmitFilter:
    """The emit decision for all captured tables; tables without finished chunks are not emitted.
    ``sort_keys`` gives each table's ``SortKeys`` (a table missing there compares its keys as they are)."""

    def __init__(self, chunks_by_table: Mapping[Any, Iterable[FinishedChunkInfo]],
                 sort_keys: Mapping[Any, SortKeys] | None = None) -> None:
        orders = sort_keys or {}
        self.tables: dict[Any, TableFilter] = {
            table: TableFilter(chunks, orders.get(table, as_they_are), table)
            for table, chunks in chunks_by_table.items()
        }

    def needs_key(self, table: Any, offset: BinlogOffset) -> bool:
        """Whether deciding needs the event's sort key (callers batch those server-side lookups)."""
        table_filter = self.tables.get(table)
        return table_filter is not None and not table_filter.in_binlog_phase(offset)

    def should_emit(self, table: Any, sort_key: Any, offset: BinlogOffset) -> bool:
        table_filter = self.tables.get(table)
        return table_filter is not None and table_filter.should_emit(sort_key, offset)
