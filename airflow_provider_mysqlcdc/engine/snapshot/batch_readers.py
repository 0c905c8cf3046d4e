"""The binlog readers of a run's mapped Spark tasks: which server ids a pack's Spark tasks read with.

One place for the planning of a run's readers, which the split (``engine.snapshot.snapshot_plan``) and the
verification plan (``operators.verify``) both do: every pack of batches (``engine.snapshot.jobs``, one
mapped task) gets its own run of consecutive indexes of the connection's ``server_id`` range, one per
Spark task it may run at once (``readers_per_batch``, fewer for a pack with fewer chunks), by the rules
of ``cdc.server_id``; the ids travel in the pack's XCom dict (``Job.first_reader``,
``Job.readers``), and its Spark job takes them back here. The number of tables does not count.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange, assign_snapshot_readers, snapshot_server_id
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError


def assign_readers(packs: Sequence[Job], ids: ServerIdRange, readers_per_batch: int,
                   conn_id: str | None = None) -> list[Job]:
    """``packs`` (all the binlog readers of one run) with their runs of server ids: ``readers_per_batch``
    each, fewer for a pack with fewer chunks. Raises ``InvalidOptionError`` naming the connection
    ``conn_id``'s ``server_id`` extra when the range is too small (``cdc.server_id.assign_snapshot_readers``)."""
    counts = [min(readers_per_batch, p.chunk_count) for p in packs]
    firsts = assign_snapshot_readers(ids, counts, readers_per_batch, conn_id)
    return [p.with_readers(first, count) for p, first, count in zip(packs, firsts, counts, strict=True)]


def job_tasks(pack: Job, partitions: int = 0) -> int:
    """How many Spark tasks (binlog readers at once) ``pack``'s job runs: ``partitions`` if given, else its
    ``readers``; never more than its readers, nor than its chunks."""
    if pack.first_reader is None or pack.readers is None:
        raise SnapshotStateError(
            f"{pack.label} has no binlog server ids assigned (no 'first_reader'/'readers' in its XCom): clear "
            f"the split task of this DAG run with its downstream tasks (or trigger a new run) so that it assigns them"
        )
    if partitions < 0 or partitions > pack.readers:
        raise InvalidOptionError(
            f"partitions={partitions} for {pack.label}, but its Spark job may run at most {pack.readers} tasks "
            f"at once, the binlog readers the split task gave it server ids for: leave partitions at 0, or "
            f"raise readers_per_batch on the split task (and widen the connection's server_id range)"
        )
    return min(partitions or pack.readers, pack.chunk_count)


def job_server_id(pack: Job, ids: ServerIdRange, task: int) -> int:
    """The binlog server id of ``pack``'s Spark task ``task`` (0-based), from the connection's range."""
    job_tasks(pack)
    assert pack.first_reader is not None and pack.readers is not None  # checked by job_tasks
    return snapshot_server_id(ids, pack.first_reader, pack.readers, task)
