"""The binlog readers of snapshot batches: which server ids a batch's Spark tasks read with.

One place for the planning of a run's readers, which the split (``engine.snapshot_plan``) and the
verification plan (``operators.verify``) both do: every batch gets its own run of consecutive indexes
of the connection's ``server_id`` range, one per Spark task it may run at once (``readers_per_batch``,
fewer for a batch with fewer chunks), by the rules of ``cdc.server_id``; the ids travel in the batch's
XCom dict (``Batch.first_reader``, ``Batch.readers``), and its Spark job takes them back here.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_mysqlcdc.cdc.server_id import ServerIdRange, assign_snapshot_readers, snapshot_server_id
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError
from airflow_provider_mysqlcdc.lake.snapshot import Batch


def assign_readers(batches: Sequence[Batch], ids: ServerIdRange, readers_per_batch: int,
                   conn_id: str | None = None) -> list[Batch]:
    """``batches`` (all the binlog readers of one run) with their runs of server ids: ``readers_per_batch``
    each, fewer for a batch with fewer chunks. Raises ``InvalidOptionError`` naming the connection
    ``conn_id``'s ``server_id`` extra when the range is too small (``cdc.server_id.assign_snapshot_readers``)."""
    counts = [min(readers_per_batch, b.chunk_count) for b in batches]
    firsts = assign_snapshot_readers(ids, counts, readers_per_batch, conn_id)
    return [b.with_readers(first, count) for b, first, count in zip(batches, firsts, counts, strict=True)]


def batch_tasks(batch: Batch, partitions: int = 0) -> int:
    """How many Spark tasks (binlog readers at once) ``batch``'s job runs: ``partitions`` if given,
    else its ``readers``; never more than its readers, nor than its chunks."""
    if batch.first_reader is None or batch.readers is None:
        raise SnapshotStateError(
            f"the batch {batch.label} has no binlog server ids assigned (no 'first_reader'/'readers' in its "
            f"XCom): it comes from a split task of an older version of this provider; clear the split task "
            f"of this DAG run with its downstream tasks (or trigger a new run) so that it assigns them"
        )
    if partitions < 0 or partitions > batch.readers:
        raise InvalidOptionError(
            f"partitions={partitions} for {batch.label}, but its Spark job may run at most {batch.readers} tasks "
            f"at once, the binlog readers the split task gave it server ids for: leave partitions at 0, or "
            f"raise readers_per_batch on the split task (and widen the connection's server_id range)"
        )
    return min(partitions or batch.readers, batch.chunk_count)


def batch_server_id(batch: Batch, ids: ServerIdRange, task: int) -> int:
    """The binlog server id of ``batch``'s Spark task ``task`` (0-based), from the connection's range."""
    batch_tasks(batch)
    assert batch.first_reader is not None and batch.readers is not None  # checked by batch_tasks
    return snapshot_server_id(ids, batch.first_reader, batch.readers, task)
