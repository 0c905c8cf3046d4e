"""The lake's stores and readers on a temporary local folder, no server.

The current-state Delta table is built (``tests.lakes``) with ``deltalake`` as the snapshot and the MERGE write it
(source columns, metadata columns, ``_batch`` partitions, the MERGE's application transaction);
changes go through the stream's own writers, ``changes_table`` and ``StreamStore.commit``. A killed
stream run is a commit whose checkpoint write fails after its Delta commits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk, FinishedChunkInfo
from airflow_provider_mysqlcdc.exceptions import (
    LakeFormatError,
    NewerLakeFormatError,
    RetiredLakeFormatError,
    SchemaChangeError,
)
from airflow_provider_mysqlcdc.lake import changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.changelog import DDL_COLUMN, METADATA_FIELDS, changes_table
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable
from airflow_provider_mysqlcdc.lake.documents.schema_documents import schema_ref
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_APP_ID, STREAM_SEQ_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table, unmerged_changes
from airflow_provider_mysqlcdc.lake.write import stream_commit
from tests.lakes import ID, NAME, ORDERS, QTY, SCHEMA, Lakes, delete, insert, off, rows_of, transaction, update

NOTE = Column("note", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
META = [f.name for f in METADATA_FIELDS]


TWO_CHUNKS = [Chunk(ORDERS, 0, None, 10), Chunk(ORDERS, 1, 10, None)]


def ids_of(table: pa.Table) -> list[Any]:
    return list(table.column("id").to_pylist())


# -- the current state: the current table with the unmerged changes on top ----------------------------


def test_read_table_keeps_the_last_change_per_key(lake: Lakes) -> None:
    lake.current([(1, "a", 1), (2, "b", 2), (10, "j", 10)], off(1, 500))
    lake.commit_stream(1, off(1, 900),
                       (SCHEMA, transaction(1, 600, *update((1, "a", 1), (1, "a", 5)), insert((4, "d", 4)))),
                       (SCHEMA, transaction(1, 700, *update((1, "a", 5), (1, "A", 6)))))
    twice = [*update((4, "d", 4), (4, "D", 40)), *update((4, "D", 40), (4, "DD", 41))]
    lake.commit_stream(2, off(1, 1200), (SCHEMA, transaction(1, 900, *twice)))

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [
        (1, "A", 6), (2, "b", 2), (4, "DD", 41), (10, "j", 10),
    ]


def test_read_table_drops_a_key_whose_last_change_is_a_delete(lake: Lakes) -> None:
    lake.current([(1, "a", 1), (2, "b", 2), (10, "j", 10)], off(1, 500))
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
    lake.current([(1, "a", 1), (3, "c", 3)], off(1, 500))
    # a key change: the -U of key 3 is that key's last change; an ordinary update of key 1
    updates = [*update((3, "c", 3), (30, "c", 3)), *update((1, "a", 1), (1, "a", 2))]
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, *updates)))
    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.column("_op").to_pylist().count(ChangeKind.UPDATE_BEFORE) == 2

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 2), (30, "c", 3)]


def test_composite_primary_key_dedups_on_every_key_column(lake: Lakes) -> None:
    lines = TableSchema(TableId("shop", "lines"), (ID, QTY, NAME), ("id", "qty"))
    lake.current([(1, 1, "x"), (1, 2, "y"), (2, 1, "z")], off(1, 500), schema=lines)
    records = [ChangeRecord(ChangeKind.UPDATE_BEFORE, lines.id, (1, 2, "y"), off(1, 600, 0, 1), 1),
               ChangeRecord(ChangeKind.UPDATE_AFTER, lines.id, (1, 2, "Y"), off(1, 600, 0, 1), 1),
               ChangeRecord(ChangeKind.DELETE, lines.id, (2, 1, "z"), off(1, 600, 1, 1), 1)]
    lake.commit_stream(1, off(1, 900), (lines, records), schema=lines)

    assert rows_of(read_table(lake.base_uri, "shop.lines")) == [(1, 1, "x"), (1, 2, "Y")]


def test_an_empty_current_table_reads_as_an_empty_table(lake: Lakes) -> None:
    lake.plan([Chunk(ORDERS, 0, None, None)])  # the stream has not started: the plan knows the columns
    lake.current([], off(1, 500))

    table = read_table(lake.base_uri, "shop.orders")
    assert table.num_rows == 0 and table.column_names == ["id", "name", "qty"]
    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.num_rows == 0 and changes.column_names == ["id", "name", "qty", *META, DDL_COLUMN, STREAM_SEQ_COLUMN]


def test_a_stream_without_snapshot_reads_from_its_changelog_alone(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, insert((2, "b", 2)), insert((1, "a", 1)))))
    lake.commit_stream(2, off(1, 990), (SCHEMA, transaction(1, 950, *update((2, "b", 2), (2, "B", 3)))))
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 1), (2, "B", 3)]


def test_an_older_change_does_not_override_a_newer_current_row(lake: Lakes) -> None:
    lake.current([(1, "a", 1), (10, "j", 10)], off(1, 500), batch=0)
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, *update((1, "a", 1), (1, "a", 2)))),
                       (SCHEMA, transaction(1, 700, delete((10, "j", 10)))))
    # batch 0 re-run (one map index cleared) after those changes: its high watermark is later, its rows newer
    lake.current([(1, "a", 3), (10, "j", 11)], off(1, 1_000), batch=0)

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 3), (10, "j", 11)]
    # and a change after the re-run's high watermark wins again
    lake.commit_stream(2, off(1, 1_200), (SCHEMA, transaction(1, 1_100, delete((1, "a", 3)))))
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(10, "j", 11)]


def test_changes_merged_into_the_current_table_are_not_applied_again(lake: Lakes) -> None:
    lake.current([(1, "a", 1)], off(1, 500))
    first = transaction(1, 600, insert((2, "b", 2)), *update((1, "a", 1), (1, "a", 5)))
    lake.commit_stream(1, off(1, 700), (SCHEMA, first))
    lake.commit_stream(2, off(1, 900), (SCHEMA, transaction(1, 800, insert((3, "c", 3)))))
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 5), (2, "b", 2), (3, "c", 3)]
    # a MERGE of batch 1 (the stand-in leaves key 2 out, to see that read_table takes the MERGE's word for it)
    merged = changes_table([r for r in first if r.values[0] == 1 and r.op is ChangeKind.UPDATE_AFTER], SCHEMA)
    lake.current_rows(merged, merged=1)

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 5), (3, "c", 3)]
    unmerged = unmerged_changes(Lake.at(lake.base_uri), ORDERS, SCHEMA, 1, 2)
    assert unmerged.column_names == [*SCHEMA.column_names, *META] and ids_of(unmerged) == [3]


def test_a_merge_counts_the_rows_it_merged_also_those_a_killed_run_left(lake: Lakes) -> None:
    """The merge_rows metric counts what the MERGE took: a run killed after committing batch 1 and before
    merging it leaves those rows to the next run's merge, which counts them with its own."""
    from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger

    lake.current([(1, "a", 1)], off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)), *update((1, "a", 1),
                                                                                                    (1, "a", 5)))))
    # the next run writes batch 2, then merges everything up to its checkpoint
    checkpoint = lake.commit_stream(2, off(1, 900), (SCHEMA, transaction(1, 800, insert((3, "c", 3)))))
    merger = StateMerger(Lake.at(lake.base_uri), control=None)  # integer keys need no server for their order
    assert merger.merge(checkpoint) == {ORDERS: 4}  # +I, -U, +U of batch 1 and the +I of batch 2
    assert merger.merge(checkpoint) == {}  # nothing new: nothing merged, nothing counted
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 5), (2, "b", 2), (3, "c", 3)]


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


def test_changelog_is_ordered_across_stream_batches_and_binlog_rotation(lake: Lakes) -> None:
    # batch 1 (mapped tasks run in parallel) finished first; batch 0's high watermark is in the next
    # binlog file, at a smaller position
    lake.current([(10, "j", 10)], off(9, 5_000), batch=1)
    lake.current([(1, "a", 1)], off(10, 300), batch=0)
    # the stream starts at the lowest HW; its first change of key 1 was already in batch 0's snapshot
    # (the emit filter would not emit it; it is here to show where it sorts)
    lake.commit_stream(1, off(10, 200), (SCHEMA, transaction(9, 6_000, *update((10, "j", 10), (10, "J", 11)))),
                       (SCHEMA, transaction(10, 150, *update((1, "x", 0), (1, "a", 1)))))
    lake.commit_stream(2, off(10, 900), (SCHEMA, transaction(10, 400, delete((1, "a", 1)), insert((2, "b", 2)))))

    changes = read_changes(lake.base_uri, "shop.orders")
    order = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_op", "id",
                                                                STREAM_SEQ_COLUMN)), strict=True))
    assert order == [  # the stream's changes only: the snapshot's rows are in the current table
        (9, 6_000, ChangeKind.UPDATE_BEFORE, 10, 1), (9, 6_000, ChangeKind.UPDATE_AFTER, 10, 1),
        (10, 150, ChangeKind.UPDATE_BEFORE, 1, 1), (10, 150, ChangeKind.UPDATE_AFTER, 1, 1),
        (10, 400, ChangeKind.DELETE, 1, 2), (10, 400, ChangeKind.INSERT, 2, 2),
    ]
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(2, "b", 2), (10, "J", 11)]


def test_read_changes_puts_current_columns_then_dropped_columns_then_metadata(lake: Lakes) -> None:
    lake.current([(1, "a", 1)], off(1, 500))
    # ALTER TABLE orders DROP COLUMN qty, ADD COLUMN note ... AFTER id, in the middle of a batch
    altered = TableSchema(ORDERS, (ID, NOTE, NAME), ("id",))
    records = [ChangeRecord(ChangeKind.INSERT, ORDERS, (2, "new", "b"), off(1, 700, 0, 1), 5)]
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, *update((1, "a", 1), (1, "a", 2)))),
                       (altered, records), schema=altered)

    changes = read_changes(lake.base_uri, "shop.orders")
    assert changes.column_names == ["id", "note", "name", "qty", *META, DDL_COLUMN, STREAM_SEQ_COLUMN]
    assert rows_of(changes.select(["id", "note", "name", "qty", "_op"])) == [
        (1, None, "a", 1, ChangeKind.UPDATE_BEFORE), (1, None, "a", 2, ChangeKind.UPDATE_AFTER),
        (2, "new", "b", None, ChangeKind.INSERT),
    ]
    table = read_table(lake.base_uri, "shop.orders")
    assert table.column_names == ["id", "note", "name"]
    assert rows_of(table) == [(1, None, "a"), (2, "new", "b")]


def test_add_and_drop_column_across_batches_merge_the_changelogs_schema(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    wider = TableSchema(ORDERS, (ID, NAME, QTY, NOTE), ("id",))
    lake.commit_stream(2, off(1, 800), (wider, transaction(1, 700, insert((2, "b", 2, "n")))), schema=wider)
    narrower = TableSchema(ORDERS, (ID, NAME, NOTE), ("id",))
    lake.commit_stream(3, off(1, 900), (narrower, transaction(1, 800, insert((3, "c", "m")))), schema=narrower)

    stored = lake.changelog().schema().to_arrow()
    assert [f.name for f in pa.schema(stored)] == ["id", "name", "qty", *META, STREAM_SEQ_COLUMN, "note"]
    assert rows_of(read_changes(lake.base_uri, "shop.orders").select(["id", "name", "note", "qty"])) == [
        (1, "a", None, 1), (2, "b", "n", 2), (3, "c", "m", None),  # qty dropped: NULL in later rows
    ]
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", None), (2, "b", "n"), (3, "c", "m")]


# -- column type changes ----------------------------------------------------------------------------


BIG = Column("qty", "bigint", "bigint(20)")
DEC = Column("price", "decimal", "decimal(6,2)", precision=6, scale=2)
WIDE_DEC = Column("price", "decimal", "decimal(12,4)", precision=12, scale=4)


def test_a_column_type_change_rewrites_the_changelog_once_with_the_wider_type(lake: Lakes) -> None:
    import decimal

    before = TableSchema(ORDERS, (ID, QTY, DEC), ("id",))
    lake.commit_stream(1, off(1, 700), (before, transaction(1, 600, insert((1, 7, decimal.Decimal("1.25"))))),
                       schema=before)
    version = lake.changelog().version()
    # ALTER TABLE orders MODIFY qty BIGINT, MODIFY price DECIMAL(12,4), in the middle of batch 2
    after = TableSchema(ORDERS, (ID, BIG, WIDE_DEC), ("id",))
    lake.commit_stream(2, off(1, 900), (before, transaction(1, 700, insert((2, 8, decimal.Decimal("2.50"))))),
                       (after, transaction(1, 800, insert((3, 2**40, decimal.Decimal("12345678.1234"))))),
                       schema=after)

    changelog = lake.changelog()
    stored = pa.schema(changelog.schema().to_arrow())
    assert stored.field("qty").type == pa.int64() and stored.field("price").type == pa.decimal128(12, 4)
    assert changelog.version() == version + 2  # one rewrite, one append
    assert changelog.transaction_version(STREAM_APP_ID) == 2
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [
        (1, 7, decimal.Decimal("1.2500")), (2, 8, decimal.Decimal("2.5000")),
        (3, 2**40, decimal.Decimal("12345678.1234")),
    ]
    # the next batch appends without rewriting
    lake.commit_stream(3, off(1, 990), (after, transaction(1, 900, insert((4, 1, decimal.Decimal("0.0001"))))),
                       schema=after)
    assert lake.changelog().version() == version + 3


def test_a_narrower_type_keeps_the_stored_one_and_a_value_that_no_longer_fits_is_named(lake: Lakes) -> None:
    wide = TableSchema(ORDERS, (ID, BIG), ("id",))
    lake.commit_stream(1, off(1, 700), (wide, transaction(1, 600, insert((1, 5)), insert((2, 2**40)))), schema=wide)
    narrow = TableSchema(ORDERS, (ID, QTY), ("id",))  # ALTER TABLE orders MODIFY qty INT (key 2 gone before)
    lake.commit_stream(2, off(1, 900), (narrow, transaction(1, 800, insert((3, 6)))), schema=narrow)
    assert pa.schema(lake.changelog().schema().to_arrow()).field("qty").type == pa.int64()

    with pytest.raises(SchemaChangeError, match=r"shop\.orders changed column types .*qty int64 -> int32"):
        read_table(lake.base_uri, "shop.orders")


def test_values_the_new_type_cannot_hold_stop_the_stream_with_the_column_named(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "not a number", 1)))))
    numeric = TableSchema(ORDERS, (ID, Column("name", "int", "int(11)"), QTY), ("id",))
    with pytest.raises(SchemaChangeError, match=r"name string -> int32"):
        lake.commit_stream(2, off(1, 900), (numeric, transaction(1, 800, insert((2, 5, 2)))), schema=numeric)
    assert lake.stream.read_checkpoint().seq == 1  # type: ignore[union-attr]
    assert lake.changelog().transaction_version(STREAM_APP_ID) == 1


def test_types_delta_lacks_are_stored_in_a_wider_form_and_read_back(lake: Lakes) -> None:
    import datetime as dt
    import decimal

    columns = (ID, Column("u", "bigint", "bigint(20) unsigned", unsigned=True),
               Column("t", "time", "time(6)", datetime_precision=6),
               Column("d", "decimal", "decimal(65,2)", precision=65, scale=2))
    odd = TableSchema(ORDERS, columns, ("id",))
    values = (1, 2**64 - 1, dt.timedelta(hours=-30, microseconds=5), decimal.Decimal("9" * 60 + ".25"))
    lake.commit_stream(1, off(1, 700), (odd, transaction(1, 600, insert(values))), schema=odd)

    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [values]
    assert read_changes(lake.base_uri, "shop.orders").schema.field("u").type == pa.uint64()


# -- the stream store: commits, killed runs, checkpoints ------------------------------------------------


def test_a_retried_commit_is_not_doubled(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    batch = (SCHEMA, transaction(1, 700, insert((2, "b", 2))))
    lake.killed_stream(2, off(1, 800), batch)  # its Delta commit done, its checkpoint not
    version = lake.changelog().version()
    lake.commit_stream(2, off(1, 800), batch)  # the retry of the same commit

    assert lake.changelog().version() == version  # the changelog already held batch 2
    assert lake.stream.read_checkpoint().seq == 2  # type: ignore[union-attr]
    assert ids_of(read_changes(lake.base_uri, "shop.orders")) == [1, 2]
    history = lake.changelog().history(1)[0]
    assert (history["stream_seq"], history["offset"]) == ("2", str(off(1, 800)))


def test_rows_beyond_the_checkpoint_are_not_read(lake: Lakes) -> None:
    lake.current([(1, "a", 1)], off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((3, "leftover", 3)),
                                                            delete((1, "a", 1)))))

    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None and checkpoint.seq == 1 and checkpoint.offset == off(1, 700)
    assert lake.changelog().transaction_version(STREAM_APP_ID) == 2
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 1), (2, "b", 2)]
    assert ids_of(read_changes(lake.base_uri, "shop.orders")) == [2]


def test_a_restarted_run_removes_the_killed_runs_rows_before_it_cuts_its_batches_elsewhere(lake: Lakes) -> None:
    users = TableSchema(TableId("shop", "users"), (ID, NAME), ("id",))
    lake.current([(1, "a", 1)], off(1, 500))
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    # the killed run's batch 2 went past an ALTER TABLE (two parts) and held a stopped table's change too
    altered = TableSchema(ORDERS, (ID, NAME), ("id",))
    after_alter = [ChangeRecord(ChangeKind.INSERT, ORDERS, (4, "d"), off(1, 800, 0, 1), 1)]
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((3, "c", 3)))), (altered, after_alter),
                       (users, transaction(1, 750, insert((9, "u")), table=users.id)))
    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None
    checkpoint.stopped = {users.id: StoppedTable(users, off(1, 700), [])}
    # the restarted run removes them first, then cuts batch 2 before the ALTER (batches close on time too)
    assert lake.stream.remove_uncommitted(checkpoint) == 3
    assert lake.changelog().transaction_version(STREAM_APP_ID) == 1
    assert lake.changelog(users.id).transaction_version(STREAM_APP_ID) == 1
    assert lake.stream.remove_uncommitted(checkpoint) == 0  # nothing left to remove
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, insert((3, "c", 3)))))
    lake.commit_stream(3, off(1, 900), (altered, after_alter), schema=altered)

    assert ids_of(read_changes(lake.base_uri, "shop.orders")) == [2, 3, 4]  # nothing doubled
    assert lake.changelog(users.id).to_pyarrow_table().num_rows == 0


def test_a_fenced_out_writer_makes_nothing_visible(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    version = lake.changelog().version()

    def taken_over() -> None:
        raise RuntimeError("lost the lease")

    lake.stream.fence = taken_over
    with pytest.raises(RuntimeError, match="lost the lease"):
        lake.commit_stream(2, off(1, 900), (SCHEMA, transaction(1, 800, insert((2, "b", 2)))))
    assert lake.changelog().version() == version
    assert lake.stream.read_checkpoint().seq == 1  # type: ignore[union-attr]


def test_eleven_stream_batches_all_count_in_order(lake: Lakes) -> None:
    lake.current([(1, "a", 0)], off(1, 100))
    for seq in range(1, 12):
        lake.commit_stream(seq, off(1, 100 * seq + 100),
                           (SCHEMA, transaction(1, 100 * seq + 50, *update((1, "a", seq - 1), (1, "a", seq)))))
    assert lake.changelog().transaction_version(STREAM_APP_ID) == 11
    assert read_changes(lake.base_uri, "shop.orders").column(STREAM_SEQ_COLUMN).to_pylist() == [
        s for s in range(1, 12) for _ in range(2)
    ]
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == [(1, "a", 11)]


def test_changelogs_beyond_those_kept_loaded_are_let_go_and_opened_again(lake: Lakes,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_commit, "KEPT_CHANGELOGS", 1)
    users = TableSchema(TableId("shop", "users"), (ID, NAME), ("id",))
    for seq in range(1, 5):
        checkpoint = Checkpoint(seq=seq, offset=off(1, 100 * seq + 100), schemas={ORDERS: SCHEMA, users.id: users})
        lake.stream.commit(checkpoint, {
            ORDERS: [changes_table(transaction(1, 100 * seq, insert((seq, "o", seq))), SCHEMA)],
            users.id: [changes_table(transaction(1, 100 * seq + 50, insert((seq, "u")), table=users.id), users)],
        })
        assert len(lake.stream._loaded) <= 1  # the bound is the store's own

    assert ids_of(read_changes(lake.base_uri, "shop.orders")) == [1, 2, 3, 4]
    assert ids_of(read_changes(lake.base_uri, "shop.users")) == [1, 2, 3, 4]
    assert lake.changelog(users.id).transaction_version(STREAM_APP_ID) == 4


def test_checkpoint_round_trips_through_the_lake_with_its_format_version(lake: Lakes) -> None:
    checkpoint = Checkpoint(seq=7, offset=off(4, 1234, 2, 3), schemas={ORDERS: SCHEMA},
                            chunks={ORDERS: [FinishedChunkInfo(None, 10, off(4, 1000)),
                                             FinishedChunkInfo(10, None, off(4, 1200))]},
                            stopped={TableId("shop", "old"): StoppedTable(
                                SCHEMA, off(4, 1000), [FinishedChunkInfo(None, None, off(4, 1000))])})
    lake.stream.commit(checkpoint, {})
    document = lake.stream.lake.read_json(lake.stream.checkpoint_path)
    assert document["format_version"] == 4 and "format_version" not in document["stopped"]["shop.old"]
    # both tables have one schema: one document, named by the checkpoint for each
    assert document["schemas"]["shop.orders"] == document["stopped"]["shop.old"]["schema"] == schema_ref(SCHEMA)
    assert document["chunks"]["shop.orders"][1] == {"s": 10, "e": None, "hw": off(4, 1200).to_dict()}
    assert document["stopped"]["shop.old"]["chunks"] == [{"s": None, "e": None, "hw": off(4, 1000).to_dict()}]
    read = lake.stream.read_checkpoint()
    assert read is not None
    assert (read.seq, read.offset, read.schemas, read.chunks, read.stopped) == (
        7, off(4, 1234, 2, 3), {ORDERS: SCHEMA}, checkpoint.chunks, checkpoint.stopped)
    assert read.updated_at  # set by the commit


@pytest.mark.parametrize(("change", "error", "message"), [
    (lambda d: d.pop("format_version"), RetiredLakeFormatError,
     r"checkpoint .*checkpoint\.json has no format_version \(format 1\): the stream's changes as Parquet files beside "
     r"the checkpoint.*re-snapshot"),
    (lambda d: d.update(format_version=5), NewerLakeFormatError,
     r"format_version 5, written by a newer version.*reads formats 2 to 4\. Upgrade airflow-provider-mysqlcdc"),
    (lambda d: d.update(format_version=True), LakeFormatError, r"format_version True, not a format"),
])
def test_a_checkpoint_of_another_format_is_refused(lake: Lakes, change: Any, error: type[LakeFormatError],
                                                   message: str) -> None:
    checkpoint = Checkpoint(seq=7, offset=off(4, 1234), schemas={ORDERS: SCHEMA},
                            stopped={TableId("shop", "old"): StoppedTable(SCHEMA, off(4, 1000), [])})
    document = checkpoint.to_dict()
    change(document)
    lake.stream.lake.write_json(lake.stream.checkpoint_path, document)
    with pytest.raises(error, match=message):
        lake.stream.read_checkpoint()


# -- nothing committed -------------------------------------------------------------------------------


def test_a_table_with_no_committed_rows_is_a_clear_error(lake: Lakes) -> None:
    with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
        read_table(lake.base_uri, "shop.orders")

    # a plan, a checkpoint, and changelog rows beyond the checkpoint are not rows
    lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.commit_stream(0, off(1, 100))
    lake.killed_stream(1, off(1, 300), (SCHEMA, transaction(1, 200, insert((2, "b", 2)))))
    for read in (read_table, read_changes):
        with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
            read(lake.base_uri, "shop.orders")

    # another table's rows are not this table's
    other = TableSchema(TableId("shop", "users"), (ID, NAME), ("id",))
    lake.plan([Chunk(other.id, 0, None, None)], schema=other)
    lake.current([(1, "u")], off(1, 100), schema=other)
    assert rows_of(read_table(lake.base_uri, "shop.users")) == [(1, "u")]
    with pytest.raises(ValueError, match=r"no committed rows of shop\.orders"):
        read_table(lake.base_uri, "shop.orders")


def test_a_table_name_without_a_database_is_refused(lake: Lakes) -> None:
    with pytest.raises(ValueError, match="database.table"):
        read_table(lake.base_uri, "orders")


def test_the_lake_package_exports_both_delta_uris(lake: Lakes) -> None:
    assert table_uri(lake.base_uri, "shop.orders").endswith("/shop/orders/current")
    assert changelog_uri(lake.base_uri, ORDERS).endswith("/shop/orders/changelog")


def test_a_damaged_document_is_a_lake_format_error_naming_it(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path))
    path = lake.path("_stream", "checkpoint.json")
    lake.write_json(path, {"seq": 1})
    (tmp_path / "_stream" / "checkpoint.json").write_text('{"seq": ')
    with pytest.raises(LakeFormatError) as error:
        lake.read_json(path)
    assert "checkpoint.json is not one whole JSON document" in str(error.value)
    assert "restore it from a copy" in str(error.value)
