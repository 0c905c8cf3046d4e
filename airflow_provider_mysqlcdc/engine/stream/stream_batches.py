"""The binlog stream as committed batches: read from the checkpoint, filter, write, checkpoint.

One call reads the binlog from the checkpoint's offset until it has caught up with the server,
committing a batch at a transaction boundary whenever ``max_events`` changes (times the tables it
touches, up to ``spread_factor``: a table's commit costs the same for few rows as for many),
``max_bytes`` of values or ``max_seconds`` have gathered. A transaction larger than ``max_events`` or ``max_bytes``
by itself is committed in parts, each checkpointed at the last row of a rows event (the binlog
offsets resume exactly there), so memory stays bounded whatever the transaction size; readers may
then see the first parts of that transaction before the rest. Changes are emitted through the emit
filter built from the finished chunks' high watermarks; a table past its highest HW drops its chunks
from the checkpoint. The stream runner calls this between its waits.

Changes travel as whole rows events (``BinlogReader.rows``): a batch gathers, per table, the events'
packets and where their values are (``ImageBuffer``, no Python object kept per event), and becomes
Arrow columns only when it is committed (``rows_table``), in a thread of its own while the binlog is
read on. A Python object per value or row image cost more than everything else together, and one per
event of a batch spread over many tables cost a third of its reading in garbage collection
(bench/RESULTS.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.dump import EventStream
from airflow_provider_mysqlcdc.cdc.binlog.reader import (
    BinlogReader,
    ChangeRows,
    Committed,
    Heartbeat,
    SchemaChanged,
    SchemaStatement,
)
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import Located
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.emit_filter import EmitFilter
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits
from airflow_provider_mysqlcdc.engine.stream.schema_changes import SchemaChanges
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.changelog import as_kept_columns, rows_table
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.write.stream_commit import Parts, StreamStore

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaughtUp:
    """Following the binlog: nothing pending, the server idle for the heartbeat period."""

    offset: BinlogOffset


# a transaction committed this recently (commit times have second resolution) counts as near real time
_NEAR_REAL_TIME_MS = 5_000
# the server's heartbeat period while following: how soon after the last event an idle stream commits
_IDLE_HEARTBEAT_SECONDS = 0.25


@dataclass
class StreamCommit:
    """One commit of the stream to the lake (its checkpoint ``seq``, the offset it reached, rows per table):
    what the stream calls a batch, bounded by ``CommitLimits``. Not a snapshot batch
    (``lake.documents.snapshot.Batch``)."""

    seq: int
    offset: BinlogOffset
    rows: dict[str, int]
    events_read: int
    last_ts_ms: int
    table_ts_ms: dict[str, int] = field(default_factory=dict)
    """Per table written, the commit time (ms) of its last change in this commit: its lag."""


@dataclass
class _Pending:
    """Changes of complete transactions not yet committed to the lake, per table and schema: the images of
    rows events gathered in buffers (``ImageBuffer``: no Python object kept per event), which become Arrow
    columns only when the batch is committed (``rows_table``).

    ``count`` counts the images taken; ``bytes`` their share of the events' sizes (what the values
    take in Arrow is about what they take on the wire).
    """

    parts: dict[TableId, list[ImageBuffer]] = field(default_factory=dict)
    count: int = 0
    bytes: int = 0
    _buffers: dict[int, ImageBuffer] = field(default_factory=dict)
    """Each schema's buffer taking its events, by the schema's identity (a schema's object is its version:
    a table whose columns change gets a new one; the buffer holds its schema, so the identity stays its)."""

    def add(self, schema: TableSchema, rows: ChangeRows, size: int) -> None:
        buffer = self._buffers.get(id(schema))
        if buffer is None:
            buffer = ImageBuffer(schema)
            parts = self.parts.setdefault(schema.id, [])
            if parts:  # the table's events before take no more events: its parts stay in order
                self._buffers.pop(id(parts[-1].schema), None)
            parts.append(buffer)
            self._buffers[id(schema)] = buffer
        buffer.add(rows)
        taken, count = rows.taken, rows.count
        self.count += taken
        self.bytes += size * taken // count if count else 0

    def absorb(self, transaction: _Transaction) -> None:
        """The events of a complete transaction."""
        for schema, rows, size in transaction.events:
            self.add(schema, rows, size)

    def last_ts(self) -> dict[str, int]:
        """Per table, the commit time of its last change."""
        return {str(t): buffers[-1].last_ts for t, buffers in self.parts.items()}

    def over(self, limits: CommitLimits) -> bool:
        """Past ``max_bytes``, or past ``max_events`` times its tables up to ``spread_factor`` (nothing taken
        yet, e.g. every row filtered as already in the snapshot, is never over: a transaction is cut only
        for rows it holds)."""
        return _over(self.count, self.bytes, len(self.parts), limits)


@dataclass
class _Transaction:
    """The rows events of the open transaction, kept as they came until its end adds them to a batch
    (``_Pending.absorb``), or a cut commits them as a part of their own."""

    events: list[tuple[TableSchema, ChangeRows, int]] = field(default_factory=list)
    tables: set[TableId] = field(default_factory=set)
    count: int = 0
    bytes: int = 0

    def add(self, schema: TableSchema, rows: ChangeRows, size: int) -> None:
        self.events.append((schema, rows, size))
        self.tables.add(schema.id)
        taken, count = rows.taken, rows.count
        self.count += taken
        self.bytes += size * taken // count if count else 0

    def over(self, limits: CommitLimits) -> bool:
        """As ``_Pending.over``, for the transaction alone: one too big for a batch by itself."""
        return _over(self.count, self.bytes, len(self.tables), limits)

    def batch(self) -> _Pending:
        pending = _Pending()
        pending.absorb(self)
        return pending


def _over(count: int, size: int, tables: int, limits: CommitLimits) -> bool:
    return size >= limits.max_bytes or count >= limits.max_events * min(max(1, tables), limits.spread_factor)


def stream_batches(
    config: ConnectionConfig,
    server_id: int,
    store: StreamStore,
    checkpoint: Checkpoint,
    control: Any,
    reload_schema: Callable[[TableId], TableSchema],
    limits: CommitLimits = CommitLimits(),
    follow: float | None = None,
    schema_changes: SchemaChanges | None = None,
    events: Callable[[str, int], EventStream] | None = None,
) -> Generator[StreamCommit | CaughtUp, None, None]:
    """Commit batches until caught up; ``checkpoint`` is advanced in place. Yields one report per commit.

    With ``follow`` (seconds), one binlog connection stays open and waits for new events, with server
    heartbeats every quarter second (at most ``follow``) while idle: each heartbeat commits what is
    pending and yields ``CaughtUp``, so the caller checks its conditions without reconnecting. Near
    real time a batch is committed ``follow`` seconds after it started, or once the commit before it is
    done if that takes longer (the reader reads on meanwhile), during a backlog at ``max_seconds``. A busy
    server sends no heartbeat: there a commit cut for latency that passed the binlog end the server
    reported at the last such check yields ``CaughtUp`` when it is done (commit times alone cannot tell:
    a backlog of recent transactions looks near real time).

    A DDL of a captured table (a ``SchemaStatement``) is a batch of its own: the changes before it are
    committed first, then ``schema_changes`` applies it to the lake and its records are committed with
    the checkpoint past it. Without ``schema_changes`` (a caller that drives batches alone: a test, a
    benchmark) a DDL of a captured table is an error rather than passed over.

    ``events`` reads other binlog files than the server's (``BinlogReader``'s: an archive's
    ``BinlogFiles.open``), from the checkpoint's offset in them to their end (not following).
    """
    schemas = dict(checkpoint.schemas)
    reader = _open_reader(config, server_id, checkpoint, schemas, reload_schema, follow, schema_changes, events)
    cutter = _BatchCutter(reader, store, checkpoint, control, schemas, limits, follow, schema_changes)
    try:
        for item in reader.rows():
            if isinstance(item, ChangeRows):
                if cutter.take(item):
                    yield from cutter.batch.cut(item.offset)
            elif isinstance(item, Committed):
                yield from cutter.committed(item)
            elif isinstance(item, SchemaChanged):
                cutter.schema_changed(item)
            elif isinstance(item, SchemaStatement):
                yield from cutter.statement(item)
            elif isinstance(item, Heartbeat):
                yield from cutter.heartbeat()
        yield from cutter.end()
    finally:
        cutter.close()


def _open_reader(config: ConnectionConfig, server_id: int, checkpoint: Checkpoint, schemas: dict[TableId, TableSchema],
                 reload_schema: Callable[[TableId], TableSchema], follow: float | None,
                 schema_changes: SchemaChanges | None,
                 events: Callable[[str, int], EventStream] | None = None) -> BinlogReader:
    """The binlog reader from the checkpoint's offset: blocking with heartbeats when following; watching, besides
    the captured tables, the names that may be created or renamed into the captured set (stopped tables, and
    the named tables or the patterns to match new names against)."""
    selection = schema_changes.selection if schema_changes else None
    watched = {*checkpoint.stopped, *(selection.tables if selection else ())}
    watch_new = selection.matches if selection is not None and selection.by_pattern else None
    return BinlogReader(config.replication_settings(), server_id, config.server_id, schemas, checkpoint.offset,
                        reload_schema=reload_schema, session_time_zone=config.server_time_zone,
                        blocking=follow is not None,
                        heartbeat_seconds=None if follow is None else min(follow, _IDLE_HEARTBEAT_SECONDS),
                        watched=watched, watch_new=watch_new, events=events)


class _OpenBatch:
    """The batch being gathered since the last commit: the complete transactions (``pending``), the open one
    (``transaction``) and the last transaction boundary. ``flush`` commits the complete ones at that boundary,
    ``cut`` a transaction too big for a batch by itself; both hand the batch to the committer and start the next.

    ``events`` counts the images read since the last commit (filtered ones too), ``last_ts`` is the commit time
    of the last one taken; the boundary keeps both as they were there, for a cut's first part.
    """

    def __init__(self, committer: _Committer, checkpoint: Checkpoint, schemas: dict[TableId, TableSchema],
                 limits: CommitLimits, follow: float | None) -> None:
        self._committer, self._checkpoint, self._schemas = committer, checkpoint, schemas
        self._limits, self._follow = limits, follow
        self.pending, self.transaction = _Pending(), _Transaction()
        self.events, self.last_ts, self.started = 0, 0, time.monotonic()
        self.boundary: BinlogOffset | None = None
        self._boundary_events, self._boundary_ts = 0, 0

    def add(self, rows: ChangeRows, emitted: ChangeRows | None) -> bool:
        """A rows event read (``emitted``: its images past the emit filter, None if none) into the open
        transaction; whether that transaction is now too big for a batch by itself (the cheap bounds first:
        it is over only past max_events or max_bytes)."""
        self.events += rows.count
        transaction = self.transaction
        if emitted is not None:
            transaction.add(self._schemas[rows.table], emitted, _size(rows))
            self.last_ts = rows.ts_ms
        limits = self._limits
        return (transaction.count >= limits.max_events or transaction.bytes >= limits.max_bytes) \
            and transaction.over(limits)

    def close_transaction(self) -> None:
        """The open transaction is complete: its events join the batch."""
        self.pending.absorb(self.transaction)
        self.transaction = _Transaction()

    def end_transaction(self, boundary: BinlogOffset) -> None:
        """The open transaction ended at ``boundary``: complete, and the batch may end there."""
        self.close_transaction()
        self.boundary, self._boundary_events, self._boundary_ts = boundary, self.events, self.last_ts

    def due(self, ts_ms: int) -> bool:
        """Whether the batch, just past the end of a transaction committed at ``ts_ms``, is to be committed: past
        its limits or ``max_seconds``, or near real time ``follow`` seconds old. Not for latency while the
        commit before runs: this one could only wait for it, the reader stopped meanwhile; so a batch grows for
        as long as the one before takes, and a stream over many tables, whose every batch costs each table it
        touches, commits fewer and larger batches, its readers seeing no later data than if it had cut the
        batch to wait."""
        elapsed = time.monotonic() - self.started
        follow = self._follow
        latency_due = follow is not None and elapsed >= follow and not self._committer.running \
            and time.time() * 1000 - ts_ms < _NEAR_REAL_TIME_MS
        return self.pending.over(self._limits) or elapsed >= self._limits.max_seconds or latency_due

    def flush(self, wait: bool = False) -> Iterator[StreamCommit]:
        """Commit the complete transactions up to the last boundary, if there is anything to commit: rows, or a
        boundary past the checkpoint. With ``wait``, the commit is waited for before the next batch starts."""
        if self.boundary is not None and (self.pending.count or self.boundary != self._checkpoint.offset):
            yield from self._committer.submit(self.pending, self.boundary, self._schemas, self.events, self.last_ts)
            if wait:
                yield from self._committer.finish()
            self._next()

    def cut(self, offset: BinlogOffset) -> Iterator[StreamCommit]:
        """Commit the open transaction, too big for one batch, in a part up to ``offset`` (after a whole rows
        event). The complete transactions before it are committed first, at their boundary: only a batch that
        ends at a boundary becomes visible to readers, so cutting them together with the open part would leave
        a writer whose large transactions come within max_events of each other invisible."""
        if self.pending.count and self.boundary is not None:
            yield from self._committer.submit(self.pending, self.boundary, self._schemas, self._boundary_events,
                                              self._boundary_ts)
            self.events -= self._boundary_events
        yield from self._committer.submit(self.transaction.batch(), offset, self._schemas, self.events, self.last_ts)
        self.transaction = _Transaction()
        self._next()

    def restart(self, boundary: BinlogOffset) -> None:
        """A batch of the stream's own (a DDL's) was committed up to ``boundary``: the next one starts there."""
        self.boundary, self.events, self.started = boundary, 0, time.monotonic()

    def _next(self) -> None:
        self.pending, self.events, self.started = _Pending(), 0, time.monotonic()


class _BatchCutter:
    """The binlog reader's items made into the stream's commits, a method per kind of item: the changes go into
    the open batch (``_OpenBatch``), which a transaction's end, a heartbeat, a DDL or the binlog's end flushes
    to the committer; a DDL read is applied at its ``Committed``. Following a busy server (no heartbeats),
    it tells ``CaughtUp`` by the binlog end the server reported (``_binlog_end``)."""

    def __init__(self, reader: BinlogReader, store: StreamStore, checkpoint: Checkpoint, control: Any,
                 schemas: dict[TableId, TableSchema], limits: CommitLimits, follow: float | None,
                 schema_changes: SchemaChanges | None) -> None:
        self._reader, self._store, self._checkpoint, self._control = reader, store, checkpoint, control
        self._schemas, self._schema_changes = schemas, schema_changes
        self._emit, self._orders = emit_filter_for(checkpoint, control)
        self._committer = _Committer(store, checkpoint)
        self.batch = _OpenBatch(self._committer, checkpoint, schemas, limits, follow)
        self._statement: SchemaStatement | None = None  # a DDL read, applied at its Committed
        self._server = ServerInfo.read(control) if follow is not None else None
        self._binlog_end = self._read_binlog_end()
        self._end_seq: int | None = None  # the batch being committed that reached ``_binlog_end``: CaughtUp when done

    def take(self, rows: ChangeRows) -> bool:
        """A rows event into the open batch; whether its transaction is too big for a batch (``_OpenBatch.cut``)."""
        emit = self._emit
        return self.batch.add(rows, _emitted(rows, emit, self._orders, self._schemas) if emit.tables else rows)

    def committed(self, end: Committed) -> Iterator[StreamCommit | CaughtUp]:
        """A transaction's end: the DDL read before it applied, or the transaction added to the batch, which is
        committed if due; first the report of a commit done meanwhile, at the first boundary after it."""
        if self._statement is not None:
            yield self._apply(self._statement, end)
            self._statement = None
            self.batch.restart(end.offset)
            return
        if self._committer.done():
            yield from self._committer.finish()
            if self._checkpoint.seq == self._end_seq:  # it reached the binlog's end: a busy server sends no heartbeat
                self._binlog_end = self._read_binlog_end()
                yield CaughtUp(self._checkpoint.offset)
        batch = self.batch
        batch.end_transaction(end.offset)
        if batch.due(end.ts_ms):
            yield from batch.flush()
            if self._binlog_end and not end.offset < self._binlog_end:  # CaughtUp once done (above), read on meanwhile
                self._end_seq = self._checkpoint.seq + 1

    def schema_changed(self, changed: SchemaChanged) -> None:
        _log.warning("%s changed at %s: its changes from here on have columns %s", changed.schema.id, changed.offset,
                     ", ".join(f"{c.name} {c.column_type}" for c in changed.schema.columns))
        self._schemas[changed.schema.id] = changed.schema

    def statement(self, statement: SchemaStatement) -> Iterator[StreamCommit]:
        """A DDL read: a batch of its own, so the changes before it are committed first."""
        self.batch.close_transaction()  # nothing: a DDL commits the transaction before it
        yield from self.batch.flush()
        yield from self._committer.finish()
        self._statement = statement

    def heartbeat(self) -> Iterator[StreamCommit | CaughtUp]:
        """The server is idle: what is pending committed, and ``CaughtUp``."""
        yield from self._committer.finish()
        yield from self.batch.flush(wait=True)
        yield CaughtUp(self._checkpoint.offset)

    def end(self) -> Iterator[StreamCommit]:
        """The binlog's end (not following): what is pending committed."""
        yield from self._committer.finish()
        yield from self.batch.flush(wait=True)

    def close(self) -> None:
        self._committer.close()

    def _read_binlog_end(self) -> BinlogOffset | None:
        """Where the server's binlog ends now, by file and position (GTIDs would cost a binlog read); None
        when not following."""
        return read_current_offset(self._control, self._server, with_gtid=False) if self._server else None

    def _apply(self, statement: SchemaStatement, end: Committed) -> StreamCommit:
        """The DDL's batch: applied to the lake, then its records committed with the checkpoint past it (the
        batches before it are committed: ``statement`` finished them)."""
        checkpoint, schemas, reader = self._checkpoint, self._schemas, self._reader
        if self._schema_changes is None:
            raise SchemaChangeError(f"{statement.ddl.statement!r} at {statement.offset} changes "
                                    f"{', '.join(str(c.table) for c in statement.ddl.changes)} while this reader "
                                    f"cannot follow DDL")
        target = replace(checkpoint, schemas=dict(checkpoint.schemas), chunks=dict(checkpoint.chunks),
                         stopped=dict(checkpoint.stopped), history_from=dict(checkpoint.history_from),
                         kept=dict(checkpoint.kept))
        target.advance(checkpoint.seq + 1, end.offset)
        applied = self._schema_changes.apply(statement, checkpoint, target)
        self._store.commit(target, applied.records)
        for table in applied.released:
            reader.untrack(table)
            schemas.pop(table, None)
        for schema in applied.captured:
            reader.track(schema)
            schemas[schema.id] = schema
        checkpoint.seq, checkpoint.offset, checkpoint.schemas = target.seq, target.offset, target.schemas
        checkpoint.chunks, checkpoint.stopped, checkpoint.updated_at = target.chunks, target.stopped, target.updated_at
        checkpoint.visible_seq, checkpoint.visible_offset = target.visible
        checkpoint.history_from, checkpoint.kept, checkpoint.touched = target.history_from, target.kept, target.touched
        rows = {str(t): sum(p.num_rows for p in parts) for t, parts in applied.records.items()}
        _log.info("batch %d: %r at %s applied to %s", target.seq, statement.ddl.statement, statement.offset,
                  ", ".join(sorted(rows)) or "no table")
        return StreamCommit(target.seq, end.offset, rows, self.batch.events, end.ts_ms)


class _Committer:
    """Commits batches in a thread of its own, one at a time, while the stream reads on: building the
    Arrow columns and the Delta write (numpy and delta-rs release the GIL) overlap the reading.

    A batch's report is yielded when its commit is done, and before another commit starts or the
    stream yields ``CaughtUp``; only then is ``checkpoint`` advanced. So whenever the stream's caller
    runs (at a yield), nothing is being written and ``checkpoint`` is what the lake holds.
    """

    def __init__(self, store: StreamStore, checkpoint: Checkpoint) -> None:
        self._store, self._checkpoint = store, checkpoint
        self._executor: ThreadPoolExecutor | None = None
        self._running: tuple[Future[None], Checkpoint, StreamCommit] | None = None

    def submit(self, pending: _Pending, boundary: BinlogOffset, schemas: dict[TableId, TableSchema], events: int,
               last_ts: int) -> Iterator[StreamCommit]:
        """Start committing ``pending`` up to ``boundary``, after yielding the report of the commit before."""
        yield from self.finish()
        current = self._checkpoint
        target = replace(current, schemas=dict(schemas), chunks={
            # a table past its highest HW needs no chunk lookups any more
            t: chunks for t, chunks in current.chunks.items() if not max(c.high_watermark for c in chunks) < boundary
        })
        target.advance(current.seq + 1, boundary)
        rows = {str(t): sum(b.taken for b in buffers) for t, buffers in pending.parts.items()}
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="stream-commit")
        future = self._executor.submit(_write, self._store, target, pending)
        self._running = (future, target, StreamCommit(target.seq, boundary, rows, events, last_ts, pending.last_ts()))

    def done(self) -> bool:
        return self._running is not None and self._running[0].done()

    @property
    def running(self) -> bool:
        """Whether a commit has been submitted and not yet finished (its report not yielded)."""
        return self._running is not None

    def finish(self) -> Iterator[StreamCommit]:
        """Wait for the running commit, if any (raising its error), advance the checkpoint, yield its report."""
        if self._running is None:
            return
        future, target, report = self._running
        self._running = None
        future.result()
        checkpoint = self._checkpoint
        checkpoint.seq, checkpoint.offset, checkpoint.schemas = target.seq, target.offset, target.schemas
        checkpoint.chunks, checkpoint.updated_at, checkpoint.touched = target.chunks, target.updated_at, target.touched
        checkpoint.visible_seq, checkpoint.visible_offset = target.visible
        yield report

    def close(self) -> None:
        """Wait for a commit still running (the stream ended by an error meanwhile), so that nothing is
        written after the stream returns."""
        try:
            if self._running is not None:
                self._running[0].exception()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)


def _size(rows: ChangeRows) -> int:
    """The bytes of the event's images on the wire (about what their values take in Arrow)."""
    images = rows.images
    if isinstance(images, Located):
        return len(images.data)
    return sum(len(v) if isinstance(v, str | bytes) else 8 for image in images for v in image)


def _emitted(
    rows: ChangeRows, emit: EmitFilter, orders: dict[TableId, KeyOrder],
    schemas: dict[TableId, TableSchema],
) -> ChangeRows | None:
    """The event's images past their chunks' high watermarks (all once its table is past every one of
    them, which costs no look at the rows), or None if there are none. Before that, the chunk keys of
    the event's images are turned into sort keys at once (one ``WEIGHT_STRING`` query for string keys)."""
    table = rows.table
    if table not in emit.tables or not emit.needs_key(table, rows.image_offset(0)):
        return rows
    schema = schemas[table]
    keys = orders[table].sort_keys(rows.column(schema.column_names.index(schema.chunk_key)))
    keep = tuple((rows.keep is None or rows.keep[i]) and emit.should_emit(table, key, rows.image_offset(i))
                 for i, key in enumerate(keys))
    if not any(keep):
        return None
    return rows if all(keep) else replace(rows, keep=keep)


def emit_filter_for(checkpoint: Checkpoint, control: Any) -> tuple[EmitFilter, dict[TableId, KeyOrder]]:
    """The emit filter of the checkpoint's finished chunks, and each table's key order (the sort keys it
    compares, in the column's collation)."""
    orders = {t: KeyOrder.for_column(control, s.chunk_key_column) for t, s in checkpoint.schemas.items()}
    return EmitFilter(checkpoint.chunks, {t: o.sort_keys for t, o in orders.items()}), orders


def _write(store: StreamStore, target: Checkpoint, pending: _Pending) -> None:
    """The batch's lake rows (per table, a part per schema: a batch may pass an ALTER), committed with
    ``target`` (the changelogs, then the checkpoint); each table's rows are made on the commit's pool."""
    changes: dict[TableId, Parts] = {
        table: partial(_lake_rows, parts, target.kept.get(table)) for table, parts in pending.parts.items()
    }
    store.commit(target, changes)


def _lake_rows(parts: list[ImageBuffer], kept: TableSchema | None) -> list[pa.Table]:
    return [_as_lake_rows(rows_table(images), kept) for images in parts]


def _as_lake_rows(rows: pa.Table, kept: TableSchema | None) -> pa.Table:
    return rows if kept is None else as_kept_columns(rows, kept)
