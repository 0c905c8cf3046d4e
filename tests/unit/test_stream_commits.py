"""The stream's commits in their own thread (``stream_batches._Committer``), on a real local lake: the
checkpoint the caller holds advances only when a commit is done, a failed commit is raised to the
caller and leaves the checkpoint where it was, and a commit never overlaps the next one."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits
from airflow_provider_mysqlcdc.engine.stream.stream_batches import _Committer, _Pending
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, LakeLeaseError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

ORDERS = TableId("shop", "orders")
SCHEMA = TableSchema(ORDERS, (Column("id", "int", "int(11)", nullable=False),
                              Column("name", "varchar", "varchar(20)", charset="utf8mb4")), ("id",))


def offset(position: int, events: int = 0, rows: int = 0) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", position, events_to_skip=events, rows_to_skip=rows)


def pending(position: int, *images: tuple[int, str]) -> _Pending:
    """One insert event of ``images`` (as value tuples, the form of events the row decoder cannot read)."""
    base = offset(position)
    batch = _Pending()
    batch.add(SCHEMA, ChangeRows((ChangeKind.INSERT,), ORDERS, list(images), len(images), base, 1_000), 100)
    return batch


def test_the_checkpoint_advances_when_a_commit_is_done(tmp_path) -> None:
    store = StreamStore(Lake.at(str(tmp_path)))
    checkpoint = Checkpoint(0, offset(4), {ORDERS: SCHEMA})
    store.commit(checkpoint, {})
    committer = _Committer(store, checkpoint)
    assert list(committer.submit(pending(100, (1, "a"), (2, "b")), offset(200), {ORDERS: SCHEMA}, 2, 1_000)) == []
    assert checkpoint.seq == 0  # running: the caller's checkpoint is still the lake's last
    # the next commit first finishes the one before: its report comes out, then it starts
    reports = list(committer.submit(pending(300, (3, "c")), offset(400), {ORDERS: SCHEMA}, 1, 2_000))
    assert [(r.seq, r.offset, r.rows) for r in reports] == [(1, offset(200), {"shop.orders": 2})]
    assert checkpoint.seq == 1 and checkpoint.offset == offset(200)
    [last] = committer.finish()
    committer.close()
    assert (last.seq, checkpoint.seq, checkpoint.offset) == (2, 2, offset(400))
    assert store.read_checkpoint().offset == offset(400)  # type: ignore[union-attr]
    assert sorted(read_changes(str(tmp_path), "shop.orders").column("id").to_pylist()) == [1, 2, 3]


def test_a_failed_commit_is_raised_and_the_checkpoint_stays(tmp_path) -> None:
    def taken_over() -> None:
        raise LakeLeaseError("another stream holds the lake")

    store = StreamStore(Lake.at(str(tmp_path)))
    checkpoint = Checkpoint(0, offset(4), {ORDERS: SCHEMA})
    store.commit(checkpoint, {})
    store.fence = taken_over
    committer = _Committer(store, checkpoint)
    list(committer.submit(pending(100, (1, "a")), offset(200), {ORDERS: SCHEMA}, 1, 1_000))
    with pytest.raises(LakeLeaseError, match="another stream"):
        list(committer.finish())
    committer.close()
    assert (checkpoint.seq, checkpoint.offset) == (0, offset(4))
    assert store.read_checkpoint().seq == 0  # type: ignore[union-attr]


def test_a_commit_that_landed_and_then_failed_is_not_doubled_by_its_retry(tmp_path, monkeypatch) -> None:
    """The store knows each changelog's last batch from its own commits and asks delta-rs once (its first use),
    and again after a commit of it failed: that commit may have landed, and its retry must then skip it."""
    from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
    from airflow_provider_mysqlcdc.lake.changelog import changes_table
    from airflow_provider_mysqlcdc.lake.write import stream_commit

    asked: list[int] = []
    version_of, append = stream_commit._stream_version, stream_commit._append
    monkeypatch.setattr(stream_commit, "_stream_version", lambda changelog: asked.append(1) or version_of(changelog))
    store = StreamStore(Lake.at(str(tmp_path)))
    checkpoint = Checkpoint(0, offset(4), {ORDERS: SCHEMA})
    store.commit(checkpoint, {})

    def changes(seq: int) -> dict[TableId, list[pa.Table]]:
        return {ORDERS: [changes_table([ChangeRecord(ChangeKind.INSERT, ORDERS, (seq, "x"), offset(100 * seq), 1_000)],
                                       SCHEMA)]}

    def commit(seq: int) -> None:
        checkpoint.advance(seq, offset(100 * seq))
        store.commit(checkpoint, changes(seq))

    for seq in (1, 2, 3):
        commit(seq)
    assert asked == []  # batch 1 made the changelog: known since

    def lands_then_fails(*args: object) -> None:
        append(*args)  # type: ignore[arg-type]
        raise OSError("connection reset after the commit landed")

    monkeypatch.setattr(stream_commit, "_append", lands_then_fails)
    with pytest.raises(OSError, match="connection reset"):
        commit(4)
    monkeypatch.setattr(stream_commit, "_append", append)
    store.commit(checkpoint, changes(4))  # the retry of batch 4
    assert len(asked) == 1
    assert sorted(read_changes(str(tmp_path), "shop.orders").column("id").to_pylist()) == [1, 2, 3, 4]
    store = StreamStore(Lake.at(str(tmp_path)))  # another process: asks at its first use
    commit(5)
    commit(6)
    assert len(asked) == 2


def images_of(table: TableId, count: int, size: int = 100) -> tuple[TableSchema, ChangeRows, int]:
    """One insert event of ``count`` images of ``table`` (``size`` bytes on the wire), as ``_Pending.add`` takes it."""
    schema = TableSchema(table, SCHEMA.columns, ("id",))
    images = [(i, "x") for i in range(count)]
    return schema, ChangeRows((ChangeKind.INSERT,), table, images, count, offset(4), 1_000), size


def test_a_batch_over_many_tables_closes_on_max_events_times_its_tables() -> None:
    limits = CommitLimits(max_events=4, spread_factor=2)
    one = _Pending()
    one.add(*images_of(ORDERS, 4))
    assert one.over(limits)  # one table: max_events closes it as ever
    many = _Pending()
    for name in ("a", "b", "c"):
        many.add(*images_of(TableId("shop", name), 2))
    assert not many.over(limits)  # 6 events of 3 tables: past max_events, not past 4 x min(3, 2)
    many.add(*images_of(TableId("shop", "a"), 2))
    assert many.over(limits)
    wide = _Pending()
    for name in ("a", "b", "c"):
        wide.add(*images_of(TableId("shop", name), 1, size=1_000))
    assert wide.over(CommitLimits(max_events=4, max_bytes=2_000))  # bytes still close it
    # nothing taken (a transaction whose rows the emit filter dropped) is not a batch to close: it was,
    # and a stream catching up below its chunks' high watermarks committed a batch for every such event
    assert not _Pending().over(limits)


def test_spread_factor_must_be_at_least_one() -> None:
    with pytest.raises(InvalidOptionError, match="spread_factor must be >= 1, not 0"):
        CommitLimits(spread_factor=0)
