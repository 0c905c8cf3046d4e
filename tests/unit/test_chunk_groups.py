"""How a snapshot task groups its tables' chunks under one pair of watermarks (``chunk_reader.chunk_groups``):
a table alone in groups of its read group, small tables together, and no group holding more than one read
group's bytes (a chunk of a table read ``g`` at a time weighs ``1/g``)."""

from __future__ import annotations

from fractions import Fraction

from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import chunk_groups


def weight(group: list[tuple[int, int, int]], sizes: list[int]) -> Fraction:
    return sum((Fraction(stop - first, sizes[table]) for table, first, stop in group), Fraction(0))


def test_one_table_is_read_its_group_at_a_time() -> None:
    assert chunk_groups([16], [40]) == [[(0, 0, 16)], [(0, 16, 32)], [(0, 32, 40)]]
    assert chunk_groups([1], [3]) == [[(0, 0, 1)], [(0, 1, 2)], [(0, 2, 3)]]


def test_small_tables_share_a_group() -> None:
    assert chunk_groups([16, 16, 16], [2, 3, 1]) == [[(0, 0, 2), (1, 0, 3), (2, 0, 1)]]


def test_a_table_continues_in_the_next_group_when_the_group_is_full() -> None:
    assert chunk_groups([16, 16], [10, 10]) == [[(0, 0, 10), (1, 0, 6)], [(1, 6, 10)]]


def test_no_group_weighs_more_than_one_read_group_and_every_chunk_is_read_once() -> None:
    sizes, counts = [16, 4, 1, 8, 16, 3, 1, 1], [5, 7, 2, 9, 1, 4, 1, 3]
    groups = chunk_groups(sizes, counts)
    assert all(0 < weight(g, sizes) <= 1 for g in groups)
    read = [(table, i) for g in groups for table, first, stop in g for i in range(first, stop)]
    assert read == [(table, i) for table, count in enumerate(counts) for i in range(count)]
    # a chunk of a table read one at a time (it may hold a whole chunk_max_bytes) shares its group with nothing
    assert all(len(g) == 1 and g[0][2] - g[0][1] == 1 for g in groups if any(sizes[t] == 1 for t, _, _ in g))
