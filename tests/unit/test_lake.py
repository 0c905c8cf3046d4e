"""The lake's stores and readers on a temporary local folder, no server.

Inputs are made by the package's own writers: ``snapshot_batch.write_chunks`` (its MySQL chunk
reader replaced by one that hands out given rows), ``SnapshotStore.commit`` with a manifest shaped
like the Spark job's, ``changes_table`` and ``StreamStore.commit``. A killed stream run is a commit
whose checkpoint write fails after the change files are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.chunk_reader import ChunkSnapshot
from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.types import arrow_schema
from airflow_provider_mysqlcdc.engine import snapshot_batch
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS, changes_table
from airflow_provider_mysqlcdc.lake.read import read_changes, read_table
from airflow_provider_mysqlcdc.lake.snapshot import Batch, Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.storage import Lake
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore

ORDERS = TableId("shop", "orders")
ID = Column("id", "int", "int(11)", nullable=False)
NAME = Column("name", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
QTY = Column("qty", "int", "int(11)")
NOTE = Column("note", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
SCHEMA = TableSchema(ORDERS, (ID, NAME, QTY), ("id",))
META = [f.name for f in METADATA_FIELDS]


def off(file: int, pos: int, events: int = 0, rows: int = 0) -> BinlogOffset:
    return BinlogOffset(f"mysql-bin.{file:06d}", pos, events_to_skip=events, rows_to_skip=rows)


def transaction(
    file: int, pos: int, *changes: tuple[ChangeKind, tuple[Any, ...]], ts_ms: int = 1_000
) -> list[ChangeRecord]:
    """The records of one transaction starting at ``file:pos``, one row event per change, as the binlog
    reader numbers them (an update is a ``-U`` and a ``+U`` of the same row)."""
    records: list[ChangeRecord] = []
    event = 0
    for op, values in changes:
        records.append(ChangeRecord(op, ORDERS, values, off(file, pos, event, 1), ts_ms))
        if op is not ChangeKind.UPDATE_BEFORE:
            event += 1
    return records


def insert(values: tuple[Any, ...]) -> tuple[ChangeKind, tuple[Any, ...]]:
    return ChangeKind.INSERT, values


def update(before: tuple[Any, ...], after: tuple[Any, ...]) -> list[tuple[ChangeKind, tuple[Any, ...]]]:
    return [(ChangeKind.UPDATE_BEFORE, before), (ChangeKind.UPDATE_AFTER, after)]


def delete(values: tuple[Any, ...]) -> tuple[ChangeKind, tuple[Any, ...]]:
    return ChangeKind.DELETE, values


# -- building a lake -----------------------------------------------------------------------------


class Lakes:
    """Writes snapshot batches and stream batches of ``shop.orders`` under one base URI."""

    def __init__(self, base_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.base_uri = base_uri
        self.monkeypatch = monkeypatch
        self.snapshots = SnapshotStore(base_uri)
        self.stream = StreamStore(base_uri)

    def plan(self, chunks: list[Chunk], chunks_per_batch: int = 1, schema: TableSchema = SCHEMA) -> Plan:
        plan = Plan(schema, chunks, group_batches(schema.id, chunks, chunks_per_batch))
        self.snapshots.write_plan(plan)
        return plan

    def attempt(
        self, plan: Plan, batch: Batch, attempt: str, rows: dict[int, list[tuple[Any, ...]]],
        high_watermarks: dict[int, BinlogOffset],
    ) -> dict[str, Any]:
        """Write the batch's chunks into ``attempt`` with ``write_chunks`` (one part per chunk, as if
        each chunk were a Spark task) and return the manifest the Spark driver would commit."""
        schema = plan.schema

        class GivenRows:
            def __init__(self, config: ConnectionConfig, table_schema: TableSchema, server_id: int) -> None:
                assert table_schema == schema

            def __enter__(self) -> GivenRows:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def read(self, chunks: list[Chunk]) -> Iterator[ChunkSnapshot]:
                for chunk in chunks:
                    values = rows.get(chunk.index, [])
                    table = pa.Table.from_pylist(
                        [dict(zip(schema.column_names, v, strict=True)) for v in values], arrow_schema(schema)
                    )
                    hw = high_watermarks[chunk.index]
                    yield ChunkSnapshot(chunk=chunk, low_watermark=hw, high_watermark=hw, table=table, changed_keys=0)

        self.monkeypatch.setattr(snapshot_batch, "ChunkReader", GivenRows)
        records: list[dict[str, Any]] = []
        for part, chunk in enumerate(plan.chunks_of(batch)):
            records += snapshot_batch.write_chunks(
                self.snapshots, batch, attempt, part, cast(ConnectionConfig, None), schema, [chunk], server_id=1
            )
        files = sorted({r["file"] for r in records})
        return {"batch": batch.to_dict(), "attempt": attempt, "chunks": records, "files": files,
                "rows": sum(r["rows"] for r in records)}

    def snapshot(
        self, plan: Plan, batch: Batch, rows: dict[int, list[tuple[Any, ...]]], high_watermark: BinlogOffset,
        attempt: str = "a1",
    ) -> dict[str, Any]:
        hws = {c.index: high_watermark for c in plan.chunks_of(batch)}
        manifest = self.attempt(plan, batch, attempt, rows, hws)
        self.snapshots.commit(batch, manifest)
        return manifest

    def commit_stream(
        self, seq: int, offset: BinlogOffset, *parts: tuple[TableSchema, list[ChangeRecord]],
        schema: TableSchema = SCHEMA,
    ) -> Checkpoint:
        """Commit stream batch ``seq`` ending at ``offset``: ``parts`` are runs of records under one schema."""
        checkpoint = Checkpoint(seq=seq, offset=offset, schemas={schema.id: schema})
        changes: dict[TableId, list[pa.Table]] = {}
        for part_schema, records in parts:
            changes.setdefault(part_schema.id, []).append(changes_table(records, part_schema))
        self.stream.commit(checkpoint, changes)
        return checkpoint

    def killed_stream(self, seq: int, offset: BinlogOffset, *parts: tuple[TableSchema, list[ChangeRecord]]) -> None:
        """A stream run killed after writing batch ``seq``'s change files, before its checkpoint."""

        def killed(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt("killed before the checkpoint")

        with self.monkeypatch.context() as m:
            m.setattr(Lake, "write_json", killed)
            with pytest.raises(KeyboardInterrupt):
                self.commit_stream(seq, offset, *parts)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lakes:
    return Lakes(str(tmp_path / "lake"), monkeypatch)


TWO_CHUNKS = [Chunk(ORDERS, 0, None, 10), Chunk(ORDERS, 1, 10, None)]


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


# -- the current state: last change per key -------------------------------------------------------


def test_read_table_keeps_the_last_change_per_key(lake: Lakes) -> None:
    plan = lake.plan(TWO_CHUNKS, chunks_per_batch=2)
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1), (2, "b", 2)], 1: [(10, "j", 10)]}, off(1, 500))
    lake.commit_stream(1, off(1, 900),
                       (SCHEMA, transaction(1, 600, *update((1, "a", 1), (1, "a", 5)), insert((4, "d", 4)))),
                       (SCHEMA, transaction(1, 700, *update((1, "a", 5), (1, "A", 6)))))
    twice = [*update((4, "d", 4), (4, "D", 40)), *update((4, "D", 40), (4, "DD", 41))]
    lake.commit_stream(2, off(1, 1200), (SCHEMA, transaction(1, 900, *twice)))

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [
        (1, "A", 6), (2, "b", 2), (4, "DD", 41), (10, "j", 10),
    ]


def test_read_table_drops_a_key_whose_last_change_is_a_delete(lake: Lakes) -> None:
    plan = lake.plan(TWO_CHUNKS, chunks_per_batch=2)
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1), (2, "b", 2)], 1: [(10, "j", 10)]}, off(1, 500))
    lake.commit_stream(1, off(1, 900),
                       (SCHEMA, transaction(1, 600, delete((2, "b", 2)), insert((5, "e", 5)))),
                       (SCHEMA, transaction(1, 700, delete((5, "e", 5)), insert((6, "f", 6)))),
                       (SCHEMA, transaction(1, 800, delete((6, "f", 6)), insert((6, "F", 60)))))
    lake.commit_stream(2, off(2, 300), (SCHEMA, transaction(2, 4, delete((10, "j", 10)))))

    table = read_table(lake.base_uri, "shop.orders")
    # 2 (snapshot row, then deleted), 5 (inserted, then deleted) and 10 (deleted in a later batch) are
    # gone; 6 was deleted and inserted again
    assert rows_of(table) == [(1, "a", 1), (6, "F", 60)]


def test_update_before_images_never_survive(lake: Lakes) -> None:
    plan = lake.plan(TWO_CHUNKS, chunks_per_batch=2)
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1), (3, "c", 3)]}, off(1, 500))
    # a key change: the -U of key 3 is that key's last change; an ordinary update of key 1
    updates = [*update((3, "c", 3), (30, "c", 3)), *update((1, "a", 1), (1, "a", 2))]
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, *updates)))
    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.column("_op").to_pylist().count(ChangeKind.UPDATE_BEFORE) == 2

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 2), (30, "c", 3)]


def test_composite_primary_key_dedups_on_every_key_column(lake: Lakes) -> None:
    lines = TableSchema(TableId("shop", "lines"), (ID, QTY, NAME), ("id", "qty"))
    plan = lake.plan([Chunk(lines.id, 0, None, None)], schema=lines)
    lake.snapshot(plan, plan.batches[0], {0: [(1, 1, "x"), (1, 2, "y"), (2, 1, "z")]}, off(1, 500))
    records = [ChangeRecord(ChangeKind.UPDATE_BEFORE, lines.id, (1, 2, "y"), off(1, 600, 0, 1), 1),
               ChangeRecord(ChangeKind.UPDATE_AFTER, lines.id, (1, 2, "Y"), off(1, 600, 0, 1), 1),
               ChangeRecord(ChangeKind.DELETE, lines.id, (2, 1, "z"), off(1, 600, 1, 1), 1)]
    lake.commit_stream(1, off(1, 900), (lines, records), schema=lines)

    assert rows_of(read_table(lake.base_uri, "shop.lines")) == [(1, 1, "x"), (1, 2, "Y")]


def test_an_empty_committed_snapshot_reads_as_an_empty_table(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {}, off(1, 500))

    table = read_table(lake.base_uri, "shop.orders")
    assert table.num_rows == 0 and table.column_names == ["id", "name", "qty"]


def test_op_holds_flinks_short_strings_and_only_retractions_remove_a_row() -> None:
    # the stored format: _op is a plain string column with Flink's RowKind short strings
    records = transaction(1, 600, insert((2, "b", 2)), *update((2, "b", 2), (2, "B", 2)), delete((1, "a", 1)))
    ops = changes_table(records, SCHEMA).column("_op")
    assert ops.type == pa.string() and ops.to_pylist() == ["+I", "-U", "+U", "-D"]
    assert all(type(op) is str for op in ops.to_pylist())
    assert [ChangeKind(op) for op in ops.to_pylist()] == [r.op for r in records]
    assert [k for k in ChangeKind if k.is_retraction] == [ChangeKind.UPDATE_BEFORE, ChangeKind.DELETE]
    assert ChangeKind.accumulations() == (ChangeKind.INSERT, ChangeKind.UPDATE_AFTER)
    assert f"{ChangeKind.DELETE}" == str(ChangeKind.DELETE) == ChangeKind.DELETE.value == "-D"


# -- the changelog's order -------------------------------------------------------------------------


def test_row_seq_orders_the_rows_of_a_transaction() -> None:
    records = transaction(3, 100, insert((1, "a", 1)), *update((1, "a", 1), (1, "b", 1)), delete((1, "b", 1)))
    # a second row of one event, and an event with a high index: rows never overflow into events
    records.insert(1, ChangeRecord(ChangeKind.INSERT, ORDERS, (2, "x", 2), off(3, 100, 0, 2), 1))
    records.append(ChangeRecord(ChangeKind.INSERT, ORDERS, (3, "y", 3), off(3, 100, 7, 1), 1))
    records.insert(-1, ChangeRecord(ChangeKind.INSERT, ORDERS, (4, "z", 4), off(3, 100, 2, 1_000_000), 1))
    table = changes_table(records, SCHEMA)

    seqs = table.column("_row_seq").to_pylist()
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
    assert set(table.column("_binlog_file").to_pylist()) == {3}
    assert set(table.column("_binlog_pos").to_pylist()) == {100}


def test_changelog_is_ordered_across_snapshot_batches_stream_files_and_binlog_rotation(lake: Lakes) -> None:
    plan = lake.plan(TWO_CHUNKS, chunks_per_batch=1)
    # batch 1 (mapped tasks run in parallel) finished first; batch 0's high watermark is in the next
    # binlog file, at a smaller position
    lake.snapshot(plan, plan.batches[1], {1: [(10, "j", 10)]}, off(9, 5_000))
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(10, 300))
    # the stream starts at the lowest HW; its first change of key 1 was already in batch 0's snapshot
    # (the emit filter would not emit it; it is here to show where it sorts)
    lake.commit_stream(1, off(10, 200), (SCHEMA, transaction(9, 6_000, *update((10, "j", 10), (10, "J", 11)))),
                       (SCHEMA, transaction(10, 150, *update((1, "x", 0), (1, "a", 1)))))
    lake.commit_stream(2, off(10, 900), (SCHEMA, transaction(10, 400, delete((1, "a", 1)), insert((2, "b", 2)))))

    changes = read_changes(lake.base_uri, "shop.orders")
    order = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_op", "id")),
                     strict=True))
    assert order == [
        (9, 5_000, ChangeKind.INSERT, 10),  # batch 1's snapshot
        (9, 6_000, ChangeKind.UPDATE_BEFORE, 10), (9, 6_000, ChangeKind.UPDATE_AFTER, 10),
        (10, 150, ChangeKind.UPDATE_BEFORE, 1), (10, 150, ChangeKind.UPDATE_AFTER, 1),
        (10, 300, ChangeKind.INSERT, 1),  # batch 0's snapshot, after the change it contains
        (10, 400, ChangeKind.DELETE, 1), (10, 400, ChangeKind.INSERT, 2),
    ]
    keys = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_row_seq")),
                    strict=True))
    assert keys == sorted(keys)
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(2, "b", 2), (10, "J", 11)]


def test_read_changes_puts_current_columns_then_dropped_columns_then_metadata(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(1, 500))
    # ALTER TABLE orders DROP COLUMN qty, ADD COLUMN note ... AFTER id
    altered = TableSchema(ORDERS, (ID, NOTE, NAME), ("id",))
    records = [ChangeRecord(ChangeKind.INSERT, ORDERS, (2, "new", "b"), off(1, 700, 0, 1), 5)]
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, *update((1, "a", 1), (1, "a", 2)))),
                       (altered, records), schema=altered)

    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.column_names == ["id", "note", "name", "qty", *META]
    assert rows_of(changes.select(["id", "note", "name", "qty", "_op"])) == [
        (1, None, "a", 1, ChangeKind.INSERT),
        (1, None, "a", 1, ChangeKind.UPDATE_BEFORE), (1, None, "a", 2, ChangeKind.UPDATE_AFTER),
        (2, "new", "b", None, ChangeKind.INSERT),
    ]
    table = read_table(lake.base_uri, "shop.orders")
    assert table.column_names == ["id", "note", "name"]
    assert rows_of(table) == [(1, None, "a"), (2, "new", "b")]


# -- the snapshot store: plan, attempts, manifests ---------------------------------------------------


def test_pending_batches_are_the_batches_without_a_manifest(lake: Lakes) -> None:
    chunks = [Chunk(ORDERS, i, None if i == 0 else 10 * i, None if i == 4 else 10 * (i + 1)) for i in range(5)]
    plan = lake.plan(chunks, chunks_per_batch=2)
    assert [(b.number, b.first_chunk, b.last_chunk) for b in plan.batches] == [(0, 0, 1), (1, 2, 3), (2, 4, 4)]
    assert lake.snapshots.pending_batches(plan) == plan.batches
    assert lake.snapshots.read_plan(ORDERS) == plan

    # an attempt without its manifest (a killed Spark job) leaves its batch pending
    lake.attempt(plan, plan.batches[0], "killed", {0: [(1, "a", 1)]}, {0: off(1, 100), 1: off(1, 100)})
    lake.snapshot(plan, plan.batches[1], {2: [(20, "t", 20)]}, off(1, 200))
    assert lake.snapshots.pending_batches(plan) == [plan.batches[0], plan.batches[2]]

    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(1, 300))
    lake.snapshot(plan, plan.batches[2], {}, off(1, 400))
    assert lake.snapshots.pending_batches(plan) == []


def test_commit_keeps_its_attempt_and_removes_only_the_other_attempts_of_its_batch(lake: Lakes) -> None:
    plan = lake.plan(TWO_CHUNKS, chunks_per_batch=1)
    first, second = plan.batches
    hw0, hw1 = {0: off(1, 100)}, {1: off(1, 100)}
    # batch 1: committed, and a re-run of it under way (its attempt has no manifest yet)
    lake.snapshot(plan, second, {1: [(10, "j", 10)]}, off(1, 100), attempt="b1")
    lake.attempt(plan, second, "b2", {1: [(10, "rerun", 0)]}, hw1)
    # batch 0: a killed attempt, then one that commits
    lake.attempt(plan, first, "killed", {0: [(1, "stale", 0), (2, "stale", 0)]}, hw0)
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(10, "j", 10)]  # attempts are not data

    manifest = lake.attempt(plan, first, "good", {0: [(1, "a", 1)]}, hw0)
    lake.snapshots.commit(first, manifest)

    fs = lake.snapshots.lake.fs
    assert lake.snapshots.lake.list_dirs(lake.snapshots.batch_dir(first)) == [
        lake.snapshots.attempt_dir(first, "good")
    ]
    assert lake.snapshots.lake.list_dirs(lake.snapshots.batch_dir(second)) == [
        lake.snapshots.attempt_dir(second, "b1"), lake.snapshots.attempt_dir(second, "b2"),
    ]
    assert all(fs.get_file_info(f).size for m in (manifest, lake.snapshots.read_manifest(second)) if m
               for f in m["files"])
    assert lake.snapshots.read_manifest(first) == manifest
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 1), (10, "j", 10)]

    # a re-run of batch 0 (one map index cleared) replaces it, and batch 1 still reads as before
    rerun = lake.attempt(plan, first, "again", {0: [(1, "a", 2)]}, hw0)
    lake.snapshots.commit(first, rerun)
    assert lake.snapshots.lake.list_dirs(lake.snapshots.batch_dir(first)) == [
        lake.snapshots.attempt_dir(first, "again")
    ]
    assert len(lake.snapshots.lake.list_dirs(lake.snapshots.batch_dir(second))) == 2
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 2), (10, "j", 10)]


# -- the stream store: checkpoints and change files ----------------------------------------------


def test_change_files_beyond_the_checkpoint_are_not_read(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((3, "leftover", 3)),
                                                            delete((1, "a", 1)))))

    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None and checkpoint.seq == 1 and checkpoint.offset == off(1, 700)
    assert len(lake.stream.committed_change_files(ORDERS, checkpoint)) == 1
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 1), (2, "b", 2)]
    assert read_changes(lake.base_uri, "shop.orders").num_rows == 2


def test_a_recommit_of_the_same_seq_replaces_the_killed_runs_file(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((3, "c", 3)), insert((4, "d", 4)))))
    # the restarted run reads from seq 1's offset and commits a smaller batch 2, then batch 3
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, insert((3, "c", 3)))))
    assert read_changes(lake.base_uri, "shop.orders").column("id").to_pylist() == [1, 2, 3]
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 1), (2, "b", 2), (3, "c", 3)]

    lake.commit_stream(3, off(1, 900), (SCHEMA, transaction(1, 800, insert((4, "d", 4)))))
    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.column("id").to_pylist() == [1, 2, 3, 4]  # nothing doubled


def test_a_recommit_with_fewer_parts_leaves_no_leftover_of_the_killed_run(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 1)]}, off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    # the killed run's batch 2 went past an ALTER TABLE: two parts, one per schema
    altered = TableSchema(ORDERS, (ID, NAME), ("id",))
    after_alter = [ChangeRecord(ChangeKind.INSERT, ORDERS, (4, "d"), off(1, 800, 0, 1), 1)]
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((3, "c", 3)))), (altered, after_alter))
    # the restarted run (which first discards what the killed run left past the checkpoint) cuts batch 2
    # before the ALTER: its batches close on time as well as size
    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None and lake.stream.discard_uncommitted(checkpoint) == 2
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, insert((3, "c", 3)))))
    lake.commit_stream(3, off(1, 900), (altered, after_alter), schema=altered)

    assert read_changes(lake.base_uri, "shop.orders").column("id").to_pylist() == [1, 2, 3, 4]


def test_eleven_stream_batches_all_count_in_order(lake: Lakes) -> None:
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.snapshot(plan, plan.batches[0], {0: [(1, "a", 0)]}, off(1, 100))
    for seq in range(1, 12):
        lake.commit_stream(seq, off(1, 100 * seq + 100),
                           (SCHEMA, transaction(1, 100 * seq + 50, *update((1, "a", seq - 1), (1, "a", seq)))))
    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None
    assert len(lake.stream.committed_change_files(ORDERS, checkpoint)) == 11
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 11)]


def test_checkpoint_round_trips_through_the_lake(lake: Lakes) -> None:
    checkpoint = Checkpoint(seq=7, offset=off(4, 1234, 2, 3), schemas={ORDERS: SCHEMA},
                            chunks={ORDERS: [[None, 10, off(4, 1000).to_dict()], [10, None, off(4, 1200).to_dict()]]})
    lake.stream.commit(checkpoint, {})
    read = lake.stream.read_checkpoint()
    assert read is not None
    assert (read.seq, read.offset, read.schemas, read.chunks) == (7, off(4, 1234, 2, 3), {ORDERS: SCHEMA},
                                                                  checkpoint.chunks)
    assert read.updated_at  # set by the commit


# -- nothing committed -------------------------------------------------------------------------------


def test_a_table_with_no_committed_rows_is_a_clear_error(lake: Lakes) -> None:
    with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
        read_table(lake.base_uri, "shop.orders")

    # a plan, an attempt without its manifest, and change files beyond the checkpoint are not rows
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.attempt(plan, plan.batches[0], "killed", {0: [(1, "a", 1)]}, {0: off(1, 100)})
    lake.commit_stream(0, off(1, 100))
    lake.killed_stream(1, off(1, 300), (SCHEMA, transaction(1, 200, insert((2, "b", 2)))))
    for read in (read_table, read_changes):
        with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
            read(lake.base_uri, "shop.orders")

    # another table's rows are not this table's
    other = TableSchema(TableId("shop", "users"), (ID, NAME), ("id",))
    other_plan = lake.plan([Chunk(other.id, 0, None, None)], schema=other)
    lake.snapshot(other_plan, other_plan.batches[0], {0: [(1, "u")]}, off(1, 100))
    assert rows_of(read_table(lake.base_uri, "shop.users")) == [(1, "u")]
    with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
        read_table(lake.base_uri, "shop.orders")


def test_a_table_name_without_a_database_is_refused(lake: Lakes) -> None:
    with pytest.raises(ValueError, match="database.table"):
        read_table(lake.base_uri, "orders")
