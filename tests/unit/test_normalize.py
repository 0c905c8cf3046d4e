"""Replaying (LW, HW] over a chunk's SELECT: last image per key wins, deletes remove, other chunks' keys are skipped."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import normalize_chunk

TABLE = TableId("db", "t")
SCHEMA = TableSchema(TABLE, (Column("k", "bigint", "bigint"), Column("v", "varchar", "varchar(9)")), ("k",))
PAIR = TableSchema(TABLE, (Column("a", "int", "int"), Column("b", "int", "int"), Column("v", "varchar", "varchar(9)")),
                   ("a", "b"))


def change(op: ChangeKind, values: tuple[Any, ...], position: int) -> ChangeRecord:
    return ChangeRecord(op, TABLE, values, offset=position, ts_ms=0)  # type: ignore[arg-type]


def in_range(low: int | None, high: int | None) -> Any:
    return lambda row: (low is None or row[0] >= low) and (high is None or row[0] < high)


def table(schema: TableSchema, rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.column_names, r, strict=True)) for r in rows],
                                schema=arrow_schema(schema))


def rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


def test_no_changes_in_the_chunk_returns_the_select_as_is() -> None:
    selected = table(SCHEMA, [(10, "a"), (11, "b")])
    changes = [change(ChangeKind.INSERT, (5, "x"), 1), change(ChangeKind.DELETE, (20, "y"), 2)]
    result = normalize_chunk(selected, changes, SCHEMA, in_range(10, 20))
    assert result.table is selected and result.changed_keys == 0


def test_last_image_wins_and_deletes_remove() -> None:
    changes = [
        # an update seen or not by the SELECT
        change(ChangeKind.UPDATE_BEFORE, (10, "a"), 1), change(ChangeKind.UPDATE_AFTER, (10, "a2"), 1),
        change(ChangeKind.DELETE, (11, "b"), 2),
        change(ChangeKind.INSERT, (13, "d"), 3),
        change(ChangeKind.DELETE, (13, "d"), 4), change(ChangeKind.INSERT, (13, "d2"), 5),  # deleted, re-inserted
        change(ChangeKind.INSERT, (11, "b2"), 6),  # re-insert of a deleted key
        change(ChangeKind.DELETE, (14, "never there"), 7),
        change(ChangeKind.INSERT, (25, "outside"), 8),  # another chunk's row
    ]
    result = normalize_chunk(table(SCHEMA, [(10, "a"), (11, "b"), (12, "c")]), changes, SCHEMA, in_range(10, 20))
    assert rows(result.table) == [(10, "a2"), (11, "b2"), (12, "c"), (13, "d2")]
    assert result.changed_keys == 4


def test_key_moving_out_of_and_into_the_chunk() -> None:
    changes = [
        # a key leaving the chunk, then one arriving from outside
        change(ChangeKind.UPDATE_BEFORE, (10, "a"), 1), change(ChangeKind.UPDATE_AFTER, (30, "a"), 1),
        change(ChangeKind.UPDATE_BEFORE, (40, "z"), 2), change(ChangeKind.UPDATE_AFTER, (15, "z"), 2),
    ]
    result = normalize_chunk(table(SCHEMA, [(10, "a")]), changes, SCHEMA, in_range(10, 20))
    assert rows(result.table) == [(15, "z")]


def test_unbounded_chunk_and_composite_keys() -> None:
    changes = [change(ChangeKind.INSERT, (-(10**6), 1, "low"), 1), change(ChangeKind.INSERT, (10**6, 1, "high"), 2),
               change(ChangeKind.DELETE, (1, 2, "b"), 3), change(ChangeKind.UPDATE_AFTER, (1, 1, "a2"), 4)]
    result = normalize_chunk(table(PAIR, [(1, 1, "a"), (1, 2, "b"), (2, 1, "c")]), changes, PAIR,
                             in_range(None, None))
    assert rows(result.table) == [(-(10**6), 1, "low"), (1, 1, "a2"), (2, 1, "c"), (10**6, 1, "high")]
