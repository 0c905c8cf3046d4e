"""The one key range and the one lookup of the range holding a key: half-open bounds, NULL keys first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRange, KeyRanges


def test_a_range_holds_its_start_but_not_its_end() -> None:
    middle = KeyRange(10, 20)
    assert [middle.holds(k) for k in (9, 10, 19, 20)] == [False, True, True, False]
    assert KeyRange(None, 10).holds(-(2**70)) and KeyRange(20, None).holds(2**70)


def test_a_null_key_is_in_the_range_unbounded_below_only() -> None:
    assert KeyRange(None, 10).holds(None)
    assert not KeyRange(10, 20).holds(None) and not KeyRange(20, None).holds(None)


def test_bounds_become_sort_keys_in_one_call() -> None:
    calls: list[list[Any]] = []

    def lowered(values: Sequence[Any]) -> list[Any]:
        calls.append(list(values))
        return [None if v is None else str(v).lower() for v in values]

    assert KeyRange("B", None).in_order(lowered) == KeyRange("b", None)
    assert calls == [["B", None]]


def test_the_lookup_agrees_with_the_ranges_it_stands_for() -> None:
    starts = [10, 20, 30]
    ranges = [KeyRange(s, e) for s, e in zip([None, *starts], [*starts, None], strict=True)]
    lookup = KeyRanges(starts)
    for key in [None, -1, 9, 10, 19, 20, 29, 30, 10**12]:
        assert [r.holds(key) for r in ranges].index(True) == lookup.position(key)
    assert lookup.positions([None, 10, 35]) == [0, 1, 3]


def test_one_range_holds_everything() -> None:
    assert KeyRanges([]).positions([None, -5, 5]) == [0, 0, 0]
