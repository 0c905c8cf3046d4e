"""The stream's commits as a reader outside the stream sees them: which batch the checkpoint has made
final, and how many changelog rows of a table the batches since a given one wrote.

The stream (``lake.write.stream_commit``) writes each batch's changelog append with the custom commit metadata
``stream_seq`` and advances the checkpoint after it; the commits here are read back from the table's
history (its commit metrics, no data read) and the checkpoint, so that the lake alone tells what is new. The
asset watcher's trigger (``triggers.lake_commits``) turns them into asset events, whose extra is
written here (``offset_extra``, ``stream_extra``) so that snapshot and stream events carry one form;
the lineage of a stream run counts its rows with ``stream_rows``. Lake work, kept in the lake layer:
``assets`` and the trigger import it, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.format.table_format import Commit, TableVersion
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore


def offset_extra(offset: BinlogOffset) -> dict[str, Any]:
    """An offset as asset event extra: ``offset`` as ``file:position``, and ``gtid`` when known (None else)."""
    return {"offset": f"{offset.file}:{offset.position}", "gtid": offset.gtid}



def _appended_seq(commit: Commit) -> int | None:
    """The stream batch of a changelog commit that appended that batch's rows (``lake.write.stream_commit``:
    metadata ``stream_seq``, no ``note``), else None: the deletes of a killed run's rows, type rewrites
    and maintenance are no new data."""
    if commit.appended_rows is None or "note" in commit.metadata:
        return None
    seq = commit.metadata.get("stream_seq")
    return int(seq) if seq is not None else None


def stream_rows(lake: Lake, table: str | TableId, after_seq: int, through_seq: int) -> int:
    """The changelog rows of ``table`` that the stream batches ``after_seq < seq <= through_seq`` committed,
    from the changelog's commit history (no data read). A batch appended twice (a run killed before its
    checkpoint, whose rows the next run deleted before writing the batch again) counts once: its last
    append. Only batches up to a checkpoint's ``seq`` are final; the caller passes such a ``through_seq``."""
    if through_seq <= after_seq:
        return 0
    changelog = lake.table(table).changelog
    appended: dict[int, tuple[int, int]] = {}  # seq -> (version, rows) of its last append
    limit = through_seq - after_seq + 8  # about one commit a batch, plus maintenance
    while True:
        history = changelog.history(limit)  # newest first, without the table's state (None: no changelog yet)
        if history is None:
            return 0
        seqs = [(_appended_seq(c), c) for c in history]
        for seq, commit in seqs:
            if (seq is not None and commit.appended_rows is not None and after_seq < seq <= through_seq
                    and commit.version > appended.get(seq, (-1, 0))[0]):
                appended[seq] = (commit.version, commit.appended_rows)
        older_reached = any(seq is not None and seq <= after_seq for seq, _ in seqs)
        if older_reached or len(history) < limit:
            return sum(rows for _, rows in appended.values())
        limit *= 4


@dataclass(frozen=True)
class StreamAppend:
    """One stream batch's append to a table's changelog, from its commit history: when it was committed (ms since
    the epoch, the commit's timestamp) and how many rows it added."""

    seq: int
    version: int
    committed_ms: int
    rows: int


def appends_of(changelog: TableVersion | None, limit: int) -> list[StreamAppend]:
    """The stream batches among the changelog's last ``limit`` commits (None: no changelog yet), oldest
    first (a batch appended twice, by a killed run and again: its last append). Only batches up to the
    checkpoint's are final."""
    appends: dict[int, StreamAppend] = {}
    for commit in changelog.history(limit) if changelog is not None else []:
        seq = _appended_seq(commit)
        if (seq is not None and commit.appended_rows is not None
                and commit.version > appends.get(seq, StreamAppend(seq, -1, 0, 0)).version):
            appends[seq] = StreamAppend(seq, commit.version, commit.timestamp_ms, commit.appended_rows)
    return sorted(appends.values(), key=lambda a: a.seq)


def checkpoint_seq(lake: Lake) -> int:
    """The stream checkpoint's ``seq`` (its last committed batch), -1 before the stream's first."""
    checkpoint = StreamStore(lake).read_checkpoint(shared=True)
    return checkpoint.visible[0] if checkpoint is not None else -1


def stream_extra(lake: Lake, table: str | TableId, after_seq: int,
                 max_age: float = 0.0) -> tuple[int, dict[str, Any] | None]:
    """The stream's commits of ``table`` since the batch ``after_seq``: the checkpoint's ``seq`` now (-1
    before the stream's first), and the asset event extra for them, None when they wrote no row of the
    table. The extra: ``seq`` and ``first_seq``, the batches it covers; ``offset``/``gtid``, the
    checkpoint's (the table's changes up to there are in the lake); ``rows``, changelog rows written;
    ``stopped_by``, for a table a DDL stopped (``DROP TABLE``, ``RENAME TABLE`` away), the statement: its
    replica is kept as of ``stopped_at`` and no longer follows the source. ``max_age``: a checkpoint this
    process read that many seconds ago or less will do (``StreamStore.read_checkpoint``)."""
    checkpoint = StreamStore(lake).read_checkpoint(shared=True, max_age=max_age)
    if checkpoint is None:
        return -1, None
    seq, offset = checkpoint.visible  # whole transactions only
    table = table if isinstance(table, TableId) else TableId.parse(table)
    # a whole database watched table by table: only the tables the batches since wrote have a history to read
    rows = stream_rows(lake, table, after_seq, seq) if checkpoint.wrote_after(table, after_seq) else 0
    if not rows:
        return seq, None
    # batch 0 is the stream's first checkpoint, which writes no rows: a watcher started before it covers from 1
    extra = {"source": "stream", "table": str(table), "seq": seq, "first_seq": max(1, after_seq + 1),
             **offset_extra(offset), "rows": rows}
    stopped = checkpoint.stopped.get(table)
    if stopped is not None and stopped.ddl:
        extra.update(stopped_by=stopped.ddl, stopped_at=str(stopped.offset))
    return seq, extra
