"""The emit filter decides by the HW of the chunk that holds the key, and stops looking after the max HW."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo as Finished
from airflow_provider_mysqlcdc.cdc.split.emit_filter import EmitFilter, TableFilter
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError

# chunks (-inf,10) HW 100, [10,20) HW 300, [20,+inf) HW 200: integer keys compare as they are, and
# offsets are plain ints here
CHUNKS = [Finished(20, None, 200), Finished(None, 10, 100), Finished(10, 20, 300)]


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
    emit = EmitFilter({"a": CHUNKS, "b": [Finished(None, None, 50)]})
    assert emit.needs_key("a", 300) and not emit.needs_key("a", 301)
    assert not emit.needs_key("b", 51)
    assert emit.should_emit("b", "anything", 51) and not emit.should_emit("b", "anything", 50)
    assert not emit.should_emit("not captured", 1, 10**9)


def test_many_chunks_bisect_agrees_with_a_scan() -> None:
    bounds = list(range(0, 100_000, 7))
    chunks = [Finished(None, bounds[0], 0)]
    chunks += [Finished(a, b, i + 1) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    chunks.append(Finished(bounds[-1], None, len(bounds)))
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
        [Finished(0, None, 1)],  # first chunk bounded
        [Finished(None, 5, 1), Finished(6, None, 1)],  # a gap
    ],
)
def test_chunks_must_tile_the_key_space(chunks: list[Finished]) -> None:
    with pytest.raises(SnapshotStateError, match="shop.orders .*re-run the table's snapshot tasks"):
        EmitFilter({"shop.orders": chunks})


def test_bounds_compare_by_the_tables_sort_keys() -> None:
    """String keys compare in the column's collation: here case-insensitively, through the sort keys given."""
    chunks = [Finished(None, "M", 100), Finished("m", None, 200)]  # the splitter's "M" is the same bound as "m"
    emit = EmitFilter({"t": chunks}, {"t": lambda values: [None if v is None else v.lower() for v in values]})
    assert emit.should_emit("t", "a", 101) and not emit.should_emit("t", "a", 100)
    assert emit.should_emit("t", "n", 201) and not emit.should_emit("t", "n", 150)
    with pytest.raises(SnapshotStateError, match="do not tile the key space"):
        EmitFilter({"t": chunks})  # compared as they are, "M" != "m"
