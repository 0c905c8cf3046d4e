"""A key range and the lookup of the range holding a key: one shape for chunks, batches and filters.

The splitter cuts a table's chunk-key space into consecutive half-open ranges ``[start, end)``,
``None`` meaning unbounded: the first range is ``(-inf, end)`` and the last ``[start, +inf)``. Every
place that asks "which chunk (or batch) holds this key" (the emit filter, the chunk reader's fix-up,
the MERGE's partitioning, verification, the repair) must answer it exactly as the splitter's SQL
did, or a row lands in two chunks or in none. So there is one range type, ``KeyRange``, and one
lookup, ``KeyRanges``, a binary search over the ranges' starts (Flink CDC scanned its chunks
linearly, which cost a quarter of its CPU at 10,000 chunks).

Keys are compared as *sort keys* (``cdc.key_order``): values that order as the column's collation
does. A NULL chunk key (possible only with a nullable ``chunk_key_column``) belongs to the first
range, as ``cdc.chunks.chunk_where`` selects it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SortKeys = Callable[[Sequence[Any]], list[Any]]
"""Key values to their sort keys, ``None`` (unbounded, or a NULL key) staying ``None``: a table's
``KeyOrder.sort_keys``. Keys that already compare like the column (integers) need none."""


def as_they_are(values: Sequence[Any]) -> list[Any]:
    """The ``SortKeys`` of keys that compare in Python as on the server (numbers, dates, bytes)."""
    return list(values)


@dataclass(frozen=True)
class KeyRange:
    """The half-open key range ``[start, end)``; ``None`` is unbounded on that side. Its bounds are
    sort keys when :meth:`holds` compares them with sort keys (see :meth:`in_order`)."""

    start: Any = None
    end: Any = None

    def in_order(self, sort_keys: SortKeys) -> KeyRange:
        """The same range with its bounds turned into sort keys (one call: one server lookup)."""
        start, end = sort_keys([self.start, self.end])
        return KeyRange(start, end)

    def holds(self, sort_key: Any) -> bool:
        """Whether the range holds a key; a NULL key (``None``) is in the range unbounded below."""
        if sort_key is None:
            return self.start is None
        return (self.start is None or not sort_key < self.start) and (self.end is None or sort_key < self.end)


class KeyRanges:
    """Consecutive ranges tiling the key space (the first unbounded below, the last above), given by the
    key where each range after the first starts: finds the position of the range holding a key."""

    def __init__(self, starts: Sequence[Any], sort_keys: SortKeys = as_they_are) -> None:
        """``starts``: key values, ascending; ``sort_keys`` turns them and looked-up values into sort keys."""
        self.sort_keys = sort_keys
        self._starts = sort_keys(list(starts))

    def position(self, sort_key: Any) -> int:
        """The range holding a sort key; a NULL key (``None``) is in the first."""
        return 0 if sort_key is None else bisect_right(self._starts, sort_key)

    def positions(self, values: Sequence[Any]) -> list[int]:
        """The range holding each key value (turned into sort keys all at once)."""
        return [self.position(k) for k in self.sort_keys(values)]
