"""The batch the stream gathers between commits (``stream_batches._OpenBatch``), on a real local lake: ``cut``
commits the complete transactions at their boundary before the open part, ``flush`` commits only what is past
the checkpoint, and ``due`` cuts for latency only near real time and while no commit runs."""

from __future__ import annotations

import time

from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits
from airflow_provider_mysqlcdc.engine.stream.stream_batches import StreamCommit, _Committer, _OpenBatch
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.lakes import ORDERS, SCHEMA, off


def open_batch(tmp_path, limits: CommitLimits,
               follow: float | None = None) -> tuple[_OpenBatch, _Committer, Checkpoint]:
    store = StreamStore(Lake.at(str(tmp_path)))
    checkpoint = Checkpoint(0, off(1, 4), {ORDERS: SCHEMA})
    store.commit(checkpoint, {})
    committer = _Committer(store, checkpoint)
    return _OpenBatch(committer, checkpoint, {ORDERS: SCHEMA}, limits, follow), committer, checkpoint


def inserts(position: int, *ids: int, ts_ms: int = 1_000) -> ChangeRows:
    """One insert event of ``ids`` at ``position`` (value tuples: the form of events the row decoder cannot read)."""
    return ChangeRows((ChangeKind.INSERT,), ORDERS, [(i, "x", 1) for i in ids], len(ids), off(1, position), ts_ms)


def summary(reports: list[StreamCommit]) -> list[tuple[int, object, dict[str, int], int]]:
    return [(r.seq, r.offset, r.rows, r.events_read) for r in reports]


def test_a_cut_commits_the_complete_transactions_first_at_their_boundary(tmp_path) -> None:
    batch, committer, checkpoint = open_batch(tmp_path, CommitLimits(max_events=3))
    assert not batch.add(first := inserts(100, 1, 2), first)
    batch.end_transaction(off(1, 200))
    assert not batch.add(part := inserts(300, 3, 4), part)
    assert batch.add(more := inserts(400, 5, 6), more)  # the open transaction holds 4 >= max_events
    reports = list(batch.cut(more.offset)) + list(committer.finish())
    committer.close()
    # the complete transaction alone at its boundary (visible to readers), then the open part up to the cut
    assert summary(reports) == [(1, off(1, 200), {"shop.orders": 2}, 2), (2, more.offset, {"shop.orders": 4}, 4)]
    assert checkpoint.offset == more.offset
    assert (batch.pending.count, batch.transaction.count, batch.events, batch.boundary) == (0, 0, 0, off(1, 200))
    # readers see the complete transaction; the part stays invisible until its transaction's end is committed
    assert sorted(read_changes(str(tmp_path), "shop.orders").column("id").to_pylist()) == [1, 2]
    assert checkpoint.visible_seq == 1


def test_a_flush_commits_what_is_past_the_checkpoint_only(tmp_path) -> None:
    batch, committer, checkpoint = open_batch(tmp_path, CommitLimits())
    assert list(batch.flush(wait=True)) == []  # no boundary read yet
    batch.end_transaction(off(1, 200))  # a transaction with nothing to take: the checkpoint still moves past it
    assert summary(list(batch.flush(wait=True))) == [(1, off(1, 200), {}, 0)]
    assert list(batch.flush(wait=True)) == []  # the checkpoint is at the boundary
    assert not batch.add(rows := inserts(300, 1), rows)
    assert list(batch.flush(wait=True)) == []  # an open transaction is not committed
    batch.end_transaction(off(1, 400))
    assert summary(list(batch.flush(wait=True))) == [(2, off(1, 400), {"shop.orders": 1}, 1)]
    committer.close()
    assert checkpoint.offset == off(1, 400)


def test_a_batch_is_due_for_latency_near_real_time_while_no_commit_runs(tmp_path) -> None:
    batch, committer, _ = open_batch(tmp_path, CommitLimits(max_events=10, max_seconds=60), follow=0.5)
    now = int(time.time() * 1000)
    assert not batch.add(rows := inserts(100, 1), rows)
    batch.end_transaction(off(1, 200))
    assert not batch.due(now)  # started less than follow seconds ago
    batch.started -= 1
    assert batch.due(now)
    assert not batch.due(now - 60_000)  # a backlog: cut at max_seconds, not for latency
    assert list(batch.flush()) == []  # submitted, still running
    batch.add(rows := inserts(300, 2), rows)
    batch.end_transaction(off(1, 400))
    batch.started -= 1
    assert not batch.due(now)  # this batch grows until the commit before it is done
    batch.started -= 60
    assert batch.due(now)  # max_seconds still cuts it
    assert summary(list(committer.finish())) == [(1, off(1, 200), {"shop.orders": 1}, 1)]
    assert batch.due(now)
    committer.close()
