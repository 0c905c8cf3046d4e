"""The emit filter decides by the HW of the chunk that holds the key, and stops looking after the max HW."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.emit_filter import EmitFilter, FinishedChunk, TableFilter
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError

# chunks (-inf,10) HW 100, [10,20) HW 300, [20,+inf) HW 200: offsets are plain ints here
CHUNKS = [FinishedChunk(20, None, 200), FinishedChunk(None, 10, 100), FinishedChunk(10, 20, 300)]


@pytest.mark.parametrize(
    ("key", "offset", "emit"),
    [
        (-(10**30), 101, True),  # unbounded first chunk, after its HW
        (-(10**30), 100, False),  # exactly at the HW: already in the snapshot
        (9, 100, False),
        (10, 100, False),  # a key on a boundary belongs to the chunk it starts
        (10, 299, False),
        (10, 300, False),
        (19, 250, False),
        (20, 250, True),  # the last chunk's HW is 200
        (20, 200, False),
        (10**30, 201, True),  # unbounded last chunk
        (None, 101, True),  # NULL keys live in the first chunk
        (None, 100, False),
        (15, 301, True),  # past the table's max HW: binlog phase
    ],
)
def test_emit_by_chunk_high_watermark(key: int | None, offset: int, emit: bool) -> None:
    assert TableFilter(CHUNKS).should_emit(key, offset) is emit


def test_binlog_phase() -> None:
    table_filter = TableFilter(CHUNKS)
    assert not table_filter.in_binlog_phase(300)
    assert table_filter.in_binlog_phase(301)
    emit = EmitFilter({"a": CHUNKS, "b": [FinishedChunk(None, None, 50)]})
    assert emit.needs_key("a", 300) and not emit.needs_key("a", 301)
    assert not emit.needs_key("b", 51)
    assert emit.should_emit("b", "anything", 51) and not emit.should_emit("b", "anything", 50)
    assert not emit.should_emit("not captured", 1, 10**9)


def test_many_chunks_bisect_agrees_with_a_scan() -> None:
    bounds = list(range(0, 100_000, 7))
    chunks = [FinishedChunk(None, bounds[0], 0)]
    chunks += [FinishedChunk(a, b, i + 1) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    chunks.append(FinishedChunk(bounds[-1], None, len(bounds)))
    table_filter = TableFilter(chunks)
    for key in (-1, 0, 6, 7, 8, 99_999, 50_001):
        expected = next(
            i for i, c in enumerate(chunks) if (c.start is None or c.start <= key) and (c.end is None or key < c.end)
        )
        assert table_filter.chunk_index(key) == expected


@pytest.mark.parametrize(
    "chunks",
    [
        [],
        [FinishedChunk(0, None, 1)],  # first chunk bounded
        [FinishedChunk(None, 5, 1), FinishedChunk(6, None, 1)],  # a gap
    ],
)
def test_chunks_must_tile_the_key_space(chunks: list[FinishedChunk[int]]) -> None:
    with pytest.raises(SnapshotStateError, match="shop.orders .*re-run the table's snapshot tasks"):
        EmitFilter({"shop.orders": chunks})
