"""The binlog stream's output and checkpoint in the lake, committed so that every change lands once.

Layout under the base URI::

    _stream/checkpoint.json      format version, sequence number, offset, tables, schema refs, finished chunks
    _stream/schemas/<ref>.json   the tables' schemas, one document each (``lake.documents.schema_documents``)
    <db>/<table>/changelog/      the table's changelog Delta table (``LakeTable.changelog``)

A stream batch appends each table's change rows to that table's changelog in one Delta commit
carrying the application transaction ``(STREAM_APP_ID, seq)`` and a ``_stream_seq`` column of the
batch's sequence number, then writes the checkpoint naming that number: the commit point. One batch
touches several Delta tables, which no single Delta commit can, so the checkpoint stays the stream's
commit point across tables and readers take changelog rows up to its number only. The tables' commits
of one batch run at once on a bounded pool of threads (on an object store a commit is mostly waiting for
its log and its file; on a local lake it is CPU work, and the pool is small: ``LOCAL_COMMIT_THREADS``), and
the checkpoint is written only once all of them succeeded: one failure fails the batch, and its retry skips
the tables already committed.

The store keeps each changelog it opened across batches. On a local lake it opens it from its Delta log
alone (``TableVersion`` opened with ``appends``: what an append needs, without delta-rs's load); an append
commits at the version after the newest it knows, and a version another writer took meanwhile (upkeep's
compaction, a type rewrite) makes it read the log and take the next one. A commit that failed lets go of the
changelog: it may have landed. A changelog loaded by delta-rs holds about 85 KB (140 KB after 20 more
commits; measured with 12 columns), so the store keeps ``KEPT_CHANGELOGS`` at most.

The checkpoint names each table's schema by the ref of its document, which is written before the
first checkpoint naming it, so a batch's checkpoint does not grow with the columns of the tables it did
not touch; it keeps, per table, the last batch that wrote changelog rows of it (``touched``), which
the MERGE compares with the batch it last merged all tables through (``merged_seq``) to leave the
tables without new changes unopened (``engine.stream.state_merge``), and the asset watcher and the lineage with
the batch they count from (``Checkpoint.wrote_after``), to leave those tables' histories unread.

A retried commit skips the tables whose changelog already holds its batch (their transaction version
is at least its number), so nothing is doubled. The store asks a changelog for its transaction version
once (its first use in the process, or after a commit of it failed): later it knows it, having made every
commit with that application id since, as the lease's only writer. A changelog opened from its log has the
version in hand; delta-rs finds it by reading the log again (12% of the appends' time in a batch of 700
tables, sampled with py-spy before the log was read without it).

A run killed between its Delta commits and its checkpoint leaves rows past the checkpoint; the next run
removes them before its first commit (``remove_uncommitted``), because it may cut its batches elsewhere
(on time, before a schema change).
A run that follows one which stopped or deferred cleanly skips that scan: the lease says so
(``lake.write.lease``, ``clean_seq``).

The changelog follows the source's schema: a column added or dropped is a schema merge (a dropped
column stays, NULL in later rows); a column whose type changes so that the stored type cannot hold
the new values (INT to BIGINT, a wider DECIMAL) makes the stream rewrite that changelog once with
the wider type, in one overwrite commit that keeps its transaction version. A narrower new type
keeps the stored one; readers cast to the current types and name a column whose values no longer fit.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.schema_documents import SchemaDocuments, schema_ref
from airflow_provider_mysqlcdc.lake.format.delta_schema import (
    STREAM_APP_ID,
    STREAM_SEQ_COLUMN,
    cast_to,
    for_delta,
    wider,
)
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.parallel import each

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable, TableVersion


Parts = list[pa.Table] | Callable[[], list[pa.Table]]
"""A table's changes in one batch, one part per schema: made already, or by a function the commit runs on its
pool (the rows of one table are then made while other tables' commits wait for their storage)."""

COMMIT_THREADS = 8
"""The Delta commits of one batch made at once on a lake reached over the network, where they wait for its round
trips (bench/stream_commit_bench.py measured 4, 8 and 16); also the MERGEs of one round
(``engine.stream.state_merge``)."""
LOCAL_COMMIT_THREADS = 2
"""The same on a local lake, where a table's commit is work of the CPU that holds the GIL most of the time (its
Arrow columns, the statistics of its Parquet file, the log entry): more threads than a small machine's cores
only contend with each other and with the binlog's reading (bench/RESULTS.md "Stream over many tables")."""
_THREAD_NAME = "stream-table"
KEPT_CHANGELOGS = 1_000
"""Changelogs the store keeps loaded at most (about 85-140 KB each: module docstring); beyond them the one
loaded first is let go, and opened again when a batch needs it."""


@dataclass(frozen=True)
class _SharedRead:
    """A checkpoint read with ``shared``: its document, the checkpoint made from it, and when (monotonic)."""

    document: dict[str, Any]
    checkpoint: Checkpoint
    read_at: float


_SHARED: dict[str, _SharedRead] = {}
"""Per checkpoint path, the newest checkpoint read with ``shared`` in this process."""


class StreamStore:
    """The stream's changelogs and checkpoint in ``lake``; a writer passes its lease's check as
    ``fence``, called before a batch's first Delta commit and again before its checkpoint, so a writer
    taken over never makes anything visible. ``threads`` bounds the Delta commits made at once (by default
    ``COMMIT_THREADS``, or ``LOCAL_COMMIT_THREADS`` on a local lake)."""

    def __init__(self, lake: Lake, fence: Callable[[], None] | None = None, threads: int | None = None) -> None:
        self.lake = lake
        self.fence = fence
        self.threads = threads if threads is not None else LOCAL_COMMIT_THREADS if lake.local else COMMIT_THREADS
        self.schemas = SchemaDocuments(lake)
        self._loaded: dict[TableId, TableVersion] = {}
        self._versions: dict[TableId, int] = {}
        """Per table, the last stream batch its changelog holds, where known without asking (module docstring)."""
        self._loading = threading.Lock()  # the pool's threads add to ``_loaded`` and let go of its oldest

    @property
    def checkpoint_path(self) -> str:
        return self.lake.checkpoint

    def changelog(self, table: TableId) -> TableVersion | None:
        """The table's changelog table, or None before the stream's first change of it."""
        return self.lake.table(table).changelog.open(from_log=True)

    def _changelog(self, table: TableId, fresh: bool = False) -> TableVersion | None:
        """``changelog``, kept loaded across batches. An append through it needs no refresh: it commits at the
        version after the newest it knows, and a commit of another handle at that version (upkeep's
        compaction) makes it read the log and take the next one (``TableVersion.append``). ``fresh``: brought
        to its newest version first (reading the log entries since, not the whole log), for a use that must
        see other handles' commits. A commit that failed lets go of the table (``_append``): it may have landed."""
        changelog = self._loaded.get(table)
        if changelog is None:
            changelog = self.changelog(table)
            if changelog is not None:
                with self._loading:
                    if len(self._loaded) >= KEPT_CHANGELOGS:
                        del self._loaded[next(iter(self._loaded))]
                    self._loaded[table] = changelog
        elif fresh:
            changelog.refresh()
        return changelog

    def read_checkpoint(self, shared: bool = False, max_age: float = 0.0) -> Checkpoint | None:
        """The checkpoint in the lake now (None before the stream's first). ``shared``: for a caller that does not
        change it, the object read last in this process from the same document, when the document read now
        is equal to it: a whole database's checkpoint (1,000 tables) takes about 7 ms to make from its
        document, and the asset watcher reads it every poll for every table it watches. ``max_age`` (with
        ``shared``): a checkpoint read that many seconds ago or less is taken without reading the document (one
        read, one GET on an object store, serves every watcher of the lake polling within it). The shared
        checkpoint never goes back to an older batch: a read that finished after a newer one keeps its own."""
        last = _SHARED.get(self.checkpoint_path) if shared else None
        now = time.monotonic()
        if last is not None and now - last.read_at <= max_age:
            return last.checkpoint
        document = self.lake.read_json(self.checkpoint_path)
        if document is None:
            return None
        checkpoint = (last.checkpoint if last is not None and last.document == document
                      else Checkpoint.from_dict(document, self.checkpoint_path, self.schemas.load))
        if shared and (last is None or checkpoint.seq >= last.checkpoint.seq):
            _SHARED[self.checkpoint_path] = _SharedRead(document, checkpoint, now)
        return checkpoint

    def commit(self, checkpoint: Checkpoint, changes: Mapping[TableId, Parts]) -> None:
        """Append the batch's changes (per table, one part per schema, or a function making them) to the
        changelogs, all tables at once, then write the documents of schemas new to the checkpoint, then
        the checkpoint: the commit point. A table whose changelog holds the batch already is skipped."""
        if changes:
            self._fence()
            items = list(changes.items())
            wrote = each(lambda item: self._append(checkpoint, *item), items, self.threads, _THREAD_NAME)
            written = (table for (table, _), appended in zip(items, wrote, strict=True) if appended)
            checkpoint.touched = {**checkpoint.touched, **dict.fromkeys(written, checkpoint.seq)}
        self.schemas.store(checkpoint.all_schemas())
        self._fence()
        checkpoint.updated_at = dt.datetime.now(dt.UTC).isoformat()
        self.lake.write_json(self.checkpoint_path, checkpoint.to_dict(schema_ref))

    def _append(self, checkpoint: Checkpoint, table: TableId, parts: Parts) -> bool:
        """The table's rows of the batch appended (made here, on the pool, when given as a function), unless
        its changelog holds the batch already; whether the batch has rows of it."""
        changelog = self._changelog(table)
        rows = [p for p in (parts() if callable(parts) else parts) if p.num_rows]
        if rows and (changelog is None or self._version(table, changelog) < checkpoint.seq):
            try:
                _append(self.lake.table(table).changelog, changelog, rows, checkpoint)
            except BaseException:
                # the commit may have landed before it failed: load the changelog again and ask next time
                self._versions.pop(table, None)
                with self._loading:
                    self._loaded.pop(table, None)
                raise
            self._versions[table] = checkpoint.seq
        return bool(rows)

    def _version(self, table: TableId, changelog: TableVersion) -> int:
        """The last stream batch ``changelog`` holds: known since this store's last commit of it, else asked."""
        known = self._versions.get(table)
        if known is None:
            known = self._versions[table] = _stream_version(changelog)
        return known

    def remove_uncommitted(self, checkpoint: Checkpoint) -> int:
        """Delete from every changelog (captured and stopped tables) the rows of batches past
        ``checkpoint``, which a killed run committed to Delta before its checkpoint; returns how many.

        The restarted run writes the same sequence numbers again, but not necessarily the same rows: its
        batch may close earlier (on time) or before a schema change, so the killed run's rows would be
        doubled or left over. The stream calls this before its first commit, unless the lease says the
        last writer left the lake clean at ``checkpoint``.
        """
        def ahead(table: TableId) -> tuple[TableId, TableVersion] | None:
            changelog = self._changelog(table, fresh=True)
            return (table, changelog) if changelog is not None and self._version(table, changelog) > checkpoint.seq \
                else None

        def remove(stale: tuple[TableId, TableVersion]) -> int:
            table, changelog = stale
            self._versions.pop(table, None)  # the delete's commit sets it back: asked at the next use
            return changelog.delete(f"{STREAM_SEQ_COLUMN} > {checkpoint.seq}",
                                    _commit_tag(checkpoint.seq, checkpoint.offset, "rows of a killed run removed"))

        tables = [*checkpoint.schemas, *checkpoint.stopped]
        stale = [c for c in each(ahead, tables, self.threads, _THREAD_NAME) if c is not None]
        if not stale:
            return 0
        self._fence()
        return sum(each(remove, stale, self.threads, _THREAD_NAME))

    def _fence(self) -> None:
        if self.fence is not None:
            self.fence()


def _stream_version(changelog: TableVersion) -> int:
    """The sequence number of the last stream batch committed to ``changelog`` (-1 for none)."""
    return changelog.applied(STREAM_APP_ID)


def _commit_tag(seq: int, offset: BinlogOffset, note: str = "") -> CommitTag:
    metadata = {"stream_seq": str(seq), "offset": str(offset)}
    if note:
        metadata["note"] = note
    return CommitTag(STREAM_APP_ID, seq, metadata)


def _append(location: ReplicaTable, changelog: TableVersion | None, parts: list[pa.Table],
            checkpoint: Checkpoint) -> None:
    """One commit of a table's rows of one batch (its parts may have different schemas)."""
    stored = changelog.schema() if changelog is not None else None
    parts = [for_delta(p) for p in parts]
    target = _unified_schema(stored, parts)
    if changelog is not None and stored is not None and _types_changed(stored, target):
        _rewrite_types(location, changelog, target, checkpoint)
        changelog.refresh()  # the append below goes through it: from the rewritten version
    parts = [cast_to(p, target, f"the changes for {location.uri}") for p in parts]
    rows = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    rows = rows.append_column(pa.field(STREAM_SEQ_COLUMN, pa.int64()),
                              pa.repeat(pa.scalar(checkpoint.seq, pa.int64()), rows.num_rows))
    tag = _commit_tag(checkpoint.seq, checkpoint.offset)
    if changelog is None:
        location.append(rows, tag)  # the table's first changes: creates its changelog
    else:
        changelog.append(rows, tag)


def _unified_schema(stored: pa.Schema | None, parts: list[pa.Table]) -> pa.Schema:
    """The changelog's schema after the parts: the stored columns (types widened where a part's need
    more), then the parts' new columns."""
    types: dict[str, pa.DataType] = {f.name: f.type for f in stored} if stored is not None else {}
    for part in parts:
        for f in part.schema:
            types[f.name] = wider(types[f.name], f.type) if f.name in types else f.type
    return pa.schema([pa.field(name, t, nullable=True) for name, t in types.items()])


def _types_changed(stored: pa.Schema, target: pa.Schema) -> bool:
    return any(bool(target.field(f.name).type != f.type) for f in stored)


def _rewrite_types(location: ReplicaTable, changelog: TableVersion, target: pa.Schema, checkpoint: Checkpoint) -> None:
    """Rewrite the whole changelog with the target's types, in one commit keeping its transaction version
    (rare: a column type change the stored type cannot hold; the changelog is read into memory once)."""
    rows = changelog.read()
    stored = [f for f in target if f.name in rows.column_names]
    changed = ", ".join(f"{f.name} {rows.schema.field(f.name).type} -> {f.type}" for f in stored
                        if f.type != rows.schema.field(f.name).type)
    rows = cast_to(rows, pa.schema(stored), f"the changelog at {location.uri}")
    version = _stream_version(changelog)
    metadata = {"stream_seq": str(version), "offset": str(checkpoint.offset),
                "note": f"column types changed: {changed}"}
    location.overwrite(rows, CommitTag(STREAM_APP_ID if version >= 0 else None, version, metadata))
