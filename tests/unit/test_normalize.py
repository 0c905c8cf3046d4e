"""Replaying (LW, HW] over a chunk's SELECT: last image per key wins, deletes remove, other chunks' keys are skipped."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc.cdc.changes import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, ChangeRecord
from airflow_provider_mysqlcdc.cdc.normalize import normalize_chunk
from airflow_provider_mysqlcdc.cdc.schema import TableId

TABLE = TableId("db", "t")


def change(op: str, key: int, value: str, position: int) -> ChangeRecord:
    return ChangeRecord(op, TABLE, (key, value), offset=position, ts_ms=0)  # type: ignore[arg-type]


def in_range(low: int | None, high: int | None) -> Any:
    return lambda row: (low is None or row[0] >= low) and (high is None or row[0] < high)


def key(row: tuple[Any, ...]) -> int:
    return int(row[0])


def test_no_changes_in_the_chunk_returns_the_select_as_is() -> None:
    rows = [(10, "a"), (11, "b")]
    result = normalize_chunk(rows, [change(INSERT, 5, "x", 1), change(DELETE, 20, "y", 2)], key, in_range(10, 20))
    assert result.rows == rows and result.changed_keys == 0


def test_last_image_wins_and_deletes_remove() -> None:
    rows = [(10, "a"), (11, "b"), (12, "c")]
    changes = [
        change(UPDATE_BEFORE, 10, "a", 1), change(UPDATE_AFTER, 10, "a2", 1),  # update seen or not by the SELECT
        change(DELETE, 11, "b", 2),
        change(INSERT, 13, "d", 3),
        change(DELETE, 13, "d", 4), change(INSERT, 13, "d2", 5),  # delete then re-insert of one key
        change(INSERT, 11, "b2", 6),  # re-insert of a deleted key
        change(INSERT, 25, "outside", 7),  # another chunk's row
    ]
    result = normalize_chunk(rows, changes, key, in_range(10, 20))
    assert sorted(result.rows) == [(10, "a2"), (11, "b2"), (12, "c"), (13, "d2")]
    assert result.changed_keys == 3


def test_key_moving_out_of_and_into_the_chunk() -> None:
    rows = [(10, "a")]
    changes = [
        change(UPDATE_BEFORE, 10, "a", 1), change(UPDATE_AFTER, 30, "a", 1),  # key update leaves the chunk
        change(UPDATE_BEFORE, 40, "z", 2), change(UPDATE_AFTER, 15, "z", 2),  # and one arrives from outside
    ]
    result = normalize_chunk(rows, changes, key, in_range(10, 20))
    assert result.rows == [(15, "z")]


def test_unbounded_chunk_takes_every_key() -> None:
    changes = [change(INSERT, -(10**20), "low", 1), change(INSERT, 10**20, "high", 2)]
    result = normalize_chunk([], changes, key, in_range(None, None))
    assert sorted(result.rows) == [(-(10**20), "low"), (10**20, "high")]
