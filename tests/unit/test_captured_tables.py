"""Tables added to or removed from ``tables`` between runs: the checkpoint follows, nothing is dropped or doubled."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.engine.stream.captured_tables import TableStart, floored, reconcile_tables
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint

OLD, NEW = TableId("shop", "orders"), TableId("shop", "refunds")


def schema(table: TableId) -> TableSchema:
    return TableSchema(table, (Column("id", "int", "int", nullable=False),), ("id",), "id")


def at(position: int) -> BinlogOffset:
    return BinlogOffset("bin.000001", position)


def chunk(start: Any, end: Any, hw: int) -> FinishedChunkInfo:
    return FinishedChunkInfo(start, end, at(hw))


def checkpoint(position: int = 500, chunks: dict[TableId, list[FinishedChunkInfo]] | None = None) -> Checkpoint:
    return Checkpoint(7, at(position), {OLD: schema(OLD)}, dict(chunks or {}))


def snapshot_of(starts: dict[TableId, TableStart]) -> Any:
    return lambda table: starts.get(table)


def no_schema(table: TableId) -> TableSchema:
    raise AssertionError(f"no server schema read expected for {table}")


def test_unchanged_tables_change_nothing() -> None:
    cp = checkpoint()
    assert reconcile_tables(cp, [OLD], snapshot_of({}), no_schema) == []
    assert cp == checkpoint()


def test_added_table_snapshotted_after_the_checkpoint_joins_without_moving_the_stream() -> None:
    cp = checkpoint(500)
    start = TableStart(schema(NEW), [chunk(None, 10, 600), chunk(10, None, 650)])
    notes = reconcile_tables(cp, [OLD, NEW], snapshot_of({NEW: start}), no_schema)
    assert cp.offset == at(500)
    assert cp.schemas == {OLD: schema(OLD), NEW: schema(NEW)}
    assert cp.chunks == {NEW: start.chunks}
    assert len(notes) == 1 and "shop.refunds added to tables" in notes[0]


def test_added_table_behind_the_checkpoint_rewinds_and_floors_the_others() -> None:
    # OLD is still in its snapshot phase with one chunk HW below the checkpoint and one above
    cp = checkpoint(500, {OLD: [chunk(None, 5, 300), chunk(5, None, 700)]})
    start = TableStart(schema(NEW), [chunk(None, None, 400)])
    notes = reconcile_tables(cp, [OLD, NEW], snapshot_of({NEW: start}), no_schema)
    assert cp.offset == at(400)  # back to the new table's HW
    assert cp.chunks[NEW] == [chunk(None, None, 400)]
    # OLD never emits again what was committed up to 500, and keeps its HW of 700 above that
    assert cp.chunks[OLD] == [chunk(None, 5, 500), chunk(5, None, 700)]
    assert any("goes back to bin.000001:400" in n for n in notes)


def test_rewind_gives_a_table_without_chunks_one_unbounded_chunk_at_the_checkpoint() -> None:
    cp = checkpoint(500)
    reconcile_tables(cp, [OLD, NEW], snapshot_of({NEW: TableStart(schema(NEW), [chunk(None, None, 450)])}), no_schema)
    assert cp.chunks[OLD] == [chunk(None, None, 500)]


def test_removed_table_stops_and_resumes_where_it_stopped() -> None:
    cp = checkpoint(500)
    cp.schemas[NEW] = schema(NEW)
    notes = reconcile_tables(cp, [OLD], snapshot_of({}), no_schema)
    assert NEW not in cp.schemas and cp.stopped[NEW].offset == at(500)
    assert "shop.refunds is no longer in tables" in notes[0]

    cp.offset = at(900)  # the stream went on without it
    old_snapshot = TableStart(schema(NEW), [chunk(None, None, 100)])  # taken before the stop
    notes = reconcile_tables(cp, [OLD, NEW], snapshot_of({NEW: old_snapshot}), no_schema)
    assert NEW not in cp.stopped and cp.schemas[NEW] == schema(NEW)
    assert cp.offset == at(500) and cp.chunks[NEW] == [chunk(None, None, 500)]
    assert cp.chunks[OLD] == [chunk(None, None, 900)]
    assert "resumes from bin.000001:500" in notes[0]


def test_a_snapshot_taken_after_the_stop_wins_over_the_stop() -> None:
    cp = checkpoint(900)
    cp.stopped[NEW] = reconcile_stop(NEW, 500)
    fresh = TableStart(schema(NEW), [chunk(None, None, 950)])
    reconcile_tables(cp, [OLD, NEW], snapshot_of({NEW: fresh}), no_schema)
    assert cp.offset == at(900) and cp.chunks[NEW] == fresh.chunks


def reconcile_stop(table: TableId, position: int) -> Any:
    cp = Checkpoint(1, at(position), {table: schema(table)})
    reconcile_tables(cp, [], snapshot_of({}), no_schema)
    return cp.stopped[table]


def test_added_table_without_snapshot_is_captured_from_the_checkpoint_and_said_so() -> None:
    cp = checkpoint(500)
    notes = reconcile_tables(cp, [OLD, NEW], snapshot_of({}), schema)
    assert cp.offset == at(500) and cp.schemas[NEW] == schema(NEW) and NEW not in cp.chunks
    assert "its earlier changes and rows are not in the lake" in notes[0]


def test_unfinished_snapshot_of_an_added_table_fails_before_anything_changes() -> None:
    def unfinished(table: TableId) -> TableStart:
        raise InvalidOptionError(f"startup_mode 'initial' needs the finished snapshot of {table}")

    cp = checkpoint(500)
    with pytest.raises(InvalidOptionError, match="needs the finished snapshot of shop.refunds"):
        reconcile_tables(cp, [OLD, NEW], unfinished, no_schema)
    assert cp == checkpoint(500)


def test_floored_keeps_higher_watermarks() -> None:
    assert floored([chunk(1, 2, 10), chunk(2, None, 30)], at(20)) == [chunk(1, 2, 20), chunk(2, None, 30)]
    assert floored([], at(20)) == [chunk(None, None, 20)]


def test_stopped_tables_survive_the_checkpoint_document() -> None:
    cp = checkpoint(500)
    cp.stopped[NEW] = reconcile_stop(NEW, 400)
    again = Checkpoint.from_dict(cp.to_dict())
    assert again.stopped == cp.stopped and again.schema_of(NEW) == schema(NEW)
    # a checkpoint of format 2 written before tables could stop has none
    older = {**{k: v for k, v in cp.to_dict().items() if k != "stopped"}, "format_version": 2}
    assert Checkpoint.from_dict(older).stopped == {}
