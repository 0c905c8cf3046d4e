"""Which tables the stream captures when ``tables`` changes between runs.

The checkpoint names the tables the stream captures. A DAG's ``tables`` may gain or lose tables
from one run to the next, and neither may be ignored:

- **An added table** starts where its own history in the lake ends. With a snapshot, that is the
  snapshot's chunks with their high watermarks (HW), exactly as for the tables of the first run:
  an event of a chunk is new only after that chunk's HW. A table captured before and stopped starts
  where its capture stopped. A table with neither (the stream-only startup modes) is captured from
  the checkpoint on, and the log says that earlier changes are not in the lake.
- **The stream may have to go back.** Usually the new table was snapshotted after the stream's last
  commit, so its HWs are ahead of the checkpoint and nothing moves. But when the stream has already
  passed a HW of the new table (it kept running while the snapshot was taken, or a stopped table
  is taken up again), the stream re-reads the binlog from that HW. The tables it already captured
  must not get those events twice: each of them gets the checkpoint's offset as a floor under its
  chunks' HWs (one unbounded chunk if it had none), so the same emit filter that protects the
  snapshot drops what was already committed. This is Flink CDC's newly-added-table handling, done
  with the emit filter instead of a pause of the binlog reader.
- **A removed table** is no longer captured; its schema and where its changes end are kept in the
  checkpoint, so its replica stays readable and adding it back resumes there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable


@dataclass(frozen=True)
class TableStart:
    """Where a table's capture begins: its schema and its finished chunks (what the checkpoint keeps);
    no chunks means from the checkpoint on."""

    schema: TableSchema
    chunks: list[FinishedChunkInfo]

    @property
    def lowest_high_watermark(self) -> BinlogOffset | None:
        return min((c.high_watermark for c in self.chunks), default=None)


def floored(chunks: Iterable[FinishedChunkInfo], floor: BinlogOffset) -> list[FinishedChunkInfo]:
    """Chunks whose HWs are at least ``floor`` (one unbounded chunk at ``floor`` when there are none):
    events up to ``floor`` are then never emitted again."""
    raised = [c.with_floor(floor) for c in chunks]
    return raised or [FinishedChunkInfo.unbounded(floor)]


def reconcile_tables(
    checkpoint: Checkpoint,
    wanted: Sequence[TableId],
    snapshot_start: Callable[[TableId], TableStart | None],
    current_schema: Callable[[TableId], TableSchema],
) -> list[str]:
    """Bring the checkpoint's captured tables in line with ``wanted``; returns what changed, for the log.

    ``snapshot_start(table)`` gives the table's finished snapshot (None when the startup mode takes
    none, and it raises when a snapshot is required but unfinished); ``current_schema(table)`` reads
    the table's schema from the server for a table captured without snapshot.
    """
    notes: list[str] = []
    wanted_set = set(wanted)
    for table in [t for t in checkpoint.schemas if t not in wanted_set]:
        chunks = floored(checkpoint.chunks.pop(table, []), checkpoint.offset)
        checkpoint.stopped[table] = StoppedTable(checkpoint.schemas.pop(table), checkpoint.offset, chunks)
        notes.append(f"{table} is no longer in tables: its capture stops at {checkpoint.offset}; its replica stays "
                     f"readable as of there, and adding it back resumes from there")
    starts: dict[TableId, TableStart] = {}
    for table in [t for t in wanted if t not in checkpoint.schemas]:
        stopped = checkpoint.stopped.get(table)
        if stopped is not None and stopped.ddl:  # the stream captures it again when a DDL brings it back
            notes.append(f"{table} stays stopped: {stopped.ddl!r} at {stopped.offset} ended it; it is captured "
                         f"again when a table of that name is created or renamed to it")
            continue
        start, note = _start_of(table, checkpoint, snapshot_start, current_schema)
        starts[table] = start
        notes.append(note)
    lowest = min((hw for s in starts.values() if (hw := s.lowest_high_watermark) is not None), default=None)
    if lowest is not None and lowest < checkpoint.offset:
        floor = checkpoint.offset
        for table in checkpoint.schemas:
            checkpoint.chunks[table] = floored(checkpoint.chunks.get(table, []), floor)
        for table, start in starts.items():
            if not start.chunks:
                starts[table] = TableStart(start.schema, floored([], floor))
        checkpoint.offset = lowest
        notes.append(f"the stream goes back to {lowest} for the added tables; the changes of the other tables up "
                     f"to {floor} are not written again")
    for table, start in starts.items():
        checkpoint.stopped.pop(table, None)
        checkpoint.schemas[table] = start.schema
        if start.chunks:
            checkpoint.chunks[table] = start.chunks
    return notes


def _start_of(
    table: TableId,
    checkpoint: Checkpoint,
    snapshot_start: Callable[[TableId], TableStart | None],
    current_schema: Callable[[TableId], TableSchema],
) -> tuple[TableStart, str]:
    snapshot, stopped = snapshot_start(table), checkpoint.stopped.get(table)
    if stopped is not None:
        snapshot_hw = snapshot.lowest_high_watermark if snapshot is not None else None
        # a snapshot taken after the stop (the table's lake data was removed to take it anew) wins
        if snapshot_hw is None or not stopped.offset < snapshot_hw:
            return (TableStart(stopped.schema, stopped.chunks),
                    f"{table} is back in tables: its capture resumes from {stopped.offset}, where it stopped")
    if snapshot is not None:
        return snapshot, (f"{table} added to tables: streamed from its snapshot's high watermarks "
                          f"(lowest {snapshot.lowest_high_watermark})")
    return (TableStart(current_schema(table), []),
            f"{table} added to tables: captured from {checkpoint.offset} on; it has no snapshot in this startup "
            f"mode, so its earlier changes and rows are not in the lake")
