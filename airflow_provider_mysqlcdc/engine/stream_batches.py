"""The binlog stream as committed batches: read from the checkpoint, filter, write, checkpoint.

One call reads the binlog from the checkpoint's offset until it has caught up with the server,
committing a batch at a transaction boundary whenever ``max_events`` changes, ``max_bytes`` of
values or ``max_seconds`` have gathered. A transaction larger than ``max_events`` or ``max_bytes``
by itself is committed in parts, each checkpointed at its last row (the binlog offsets resume
exactly there), so memory stays bounded whatever the transaction size; readers may then see the
first parts of that transaction before the rest. Changes are emitted through the emit filter built
from the finished chunks' high watermarks; a table past its highest HW drops its chunks from the
checkpoint. The stream runner calls this between its waits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog_reader import BinlogReader, Committed, Heartbeat, SchemaChanged
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.emit_filter import EmitFilter, FinishedChunk
from airflow_provider_mysqlcdc.cdc.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.stream_options import BatchLimits
from airflow_provider_mysqlcdc.lake.changelog import changes_table
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore

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
class BatchReport:
    seq: int
    offset: BinlogOffset
    rows: dict[str, int]
    events_read: int
    last_ts_ms: int


@dataclass
class _Pending:
    """Changes of complete transactions not yet committed to the lake, per table and schema.

    Records come in runs of one table: the list of the current table and schema is kept at hand, so
    a record costs an append. Bytes are estimated from every 64th record's values, which is cheap
    and follows the rows' size as it changes.
    """

    parts: dict[TableId, list[tuple[TableSchema, list[ChangeRecord]]]] = field(default_factory=dict)
    count: int = 0
    bytes: int = 0
    _schema: TableSchema | None = None
    _records: list[ChangeRecord] = field(default_factory=list)
    _row_bytes: int = 0

    def add(self, schema: TableSchema, record: ChangeRecord) -> None:
        if schema is not self._schema:
            parts = self.parts.setdefault(schema.id, [])
            if not parts or parts[-1][0] is not schema:
                parts.append((schema, []))
            self._schema, self._records = schema, parts[-1][1]
        self._records.append(record)
        if not self.count & 63:
            self._row_bytes = _value_bytes(record.values)
        self.count += 1
        self.bytes += self._row_bytes

    def absorb(self, other: _Pending) -> None:
        for table, parts in other.parts.items():
            mine = self.parts.setdefault(table, [])
            for schema, records in parts:
                if mine and mine[-1][0] is schema:
                    mine[-1][1].extend(records)
                else:
                    mine.append((schema, records))
        self.count += other.count
        self.bytes += other.bytes
        self._schema = None

    def over(self, limits: BatchLimits) -> bool:
        return self.count >= limits.max_events or self.bytes >= limits.max_bytes


def _value_bytes(values: tuple[Any, ...]) -> int:
    """About what a row's values take in Arrow: strings and bytes by length, 8 bytes for anything else."""
    return sum(len(v) if isinstance(v, str | bytes) else 8 for v in values)


def stream_batches(
    config: ConnectionConfig,
    server_id: int,
    store: StreamStore,
    checkpoint: Checkpoint,
    control: Any,
    reload_schema: Callable[[TableId], TableSchema],
    limits: BatchLimits = BatchLimits(),
    follow: float | None = None,
) -> Generator[BatchReport | CaughtUp, None, None]:
    """Commit batches until caught up; ``checkpoint`` is advanced in place. Yields one report per commit.

    With ``follow`` (seconds), one binlog connection stays open and waits for new events, with server
    heartbeats every quarter second (at most ``follow``) while idle: each heartbeat commits what is
    pending and yields ``CaughtUp``, so the caller checks its conditions without reconnecting. Near
    real time a batch is committed ``follow`` seconds after it started, during a backlog at
    ``max_seconds``. A busy server sends no heartbeat: there a commit cut for latency yields
    ``CaughtUp`` once the stream has passed the binlog end the server reported at the last such check
    (commit times alone cannot tell: a backlog of recent transactions looks near real time).
    """
    emit, orders = emit_filter_for(checkpoint, control)
    schemas = dict(checkpoint.schemas)
    reader = BinlogReader(config.replication_settings(), server_id, config.server_id, schemas, checkpoint.offset,
                          reload_schema=reload_schema, session_time_zone=config.server_time_zone,
                          blocking=follow is not None,
                          heartbeat_seconds=None if follow is None else min(follow, _IDLE_HEARTBEAT_SECONDS))
    server = ServerInfo.read(control) if follow is not None else None
    binlog_end = _binlog_end(control, server) if server else None
    committed, uncommitted = _Pending(), _Pending()
    events, last_ts, started = 0, 0, time.monotonic()
    boundary: BinlogOffset | None = None
    update_before = ChangeKind.UPDATE_BEFORE
    for item in reader:
        if isinstance(item, ChangeRecord):
            events += 1
            if not emit.tables or _emitted(item, emit, orders, schemas):
                uncommitted.add(schemas[item.table], item)
                last_ts = item.ts_ms
            # a transaction too big for one batch is cut after a whole row (never between -U and +U)
            if item.op is not update_before and uncommitted.over(limits):
                committed.absorb(uncommitted)
                uncommitted = _Pending()
                yield _commit(store, checkpoint, committed, item.offset, schemas, events, last_ts)
                committed, events, started = _Pending(), 0, time.monotonic()
        elif isinstance(item, SchemaChanged):
            _log.warning("%s changed at %s: its changes from here on have columns %s", item.schema.id, item.offset,
                         ", ".join(f"{c.name} {c.column_type}" for c in item.schema.columns))
            schemas[item.schema.id] = item.schema
        elif isinstance(item, Committed):
            committed.absorb(uncommitted)  # the transaction is complete
            uncommitted = _Pending()
            boundary = item.offset
            elapsed = time.monotonic() - started
            near_real_time = time.time() * 1000 - item.ts_ms < _NEAR_REAL_TIME_MS
            latency_due = follow is not None and near_real_time and elapsed >= follow
            if committed.over(limits) or elapsed >= limits.max_seconds or latency_due:
                yield _commit(store, checkpoint, committed, boundary, schemas, events, last_ts)
                committed, events, started = _Pending(), 0, time.monotonic()
                if server and binlog_end and not boundary < binlog_end:  # a busy server: no heartbeat comes
                    binlog_end = _binlog_end(control, server)
                    yield CaughtUp(checkpoint.offset)
        elif isinstance(item, Heartbeat):
            if boundary is not None and (committed.count or boundary != checkpoint.offset):
                yield _commit(store, checkpoint, committed, boundary, schemas, events, last_ts)
                committed, events, started = _Pending(), 0, time.monotonic()
            yield CaughtUp(checkpoint.offset)
    if boundary is not None and (committed.count or boundary != checkpoint.offset):
        yield _commit(store, checkpoint, committed, boundary, schemas, events, last_ts)


def _binlog_end(control: Any, server: ServerInfo) -> BinlogOffset:
    """Where the server's binlog ends now, by file and position (GTIDs would cost a binlog read)."""
    return read_current_offset(control, server, with_gtid=False)


def _emitted(
    record: ChangeRecord, emit: EmitFilter[BinlogOffset], orders: dict[TableId, KeyOrder],
    schemas: dict[TableId, TableSchema],
) -> bool:
    """Whether the record is past its chunk's high watermark (always, once its table is past all of them)."""
    if record.table not in emit.tables:
        return True
    key = None
    if emit.needs_key(record.table, record.offset):
        schema = schemas[record.table]
        key = orders[record.table].sort_key(record.values[schema.column_names.index(schema.chunk_key)])
    return emit.should_emit(record.table, key, record.offset)


def emit_filter_for(checkpoint: Checkpoint, control: Any) -> tuple[EmitFilter[BinlogOffset], dict[TableId, KeyOrder]]:
    """The emit filter of the checkpoint's chunks, and each table's key order (the sort keys it compares):
    each ``FinishedChunkInfo``'s key bounds become sort keys (one batch per table), its HW stays."""
    orders = {t: KeyOrder.for_column(control, s.chunk_key_column) for t, s in checkpoint.schemas.items()}
    finished = {}
    for table, chunks in checkpoint.chunks.items():
        bounds = orders[table].sort_keys([bound for c in chunks for bound in (c.start, c.end)])
        finished[table] = [
            FinishedChunk(bounds[2 * i], bounds[2 * i + 1], c.high_watermark) for i, c in enumerate(chunks)
        ]
    return EmitFilter(finished), orders


def _commit(
    store: StreamStore,
    checkpoint: Checkpoint,
    pending: _Pending,
    boundary: BinlogOffset,
    schemas: dict[TableId, TableSchema],
    events: int,
    last_ts: int,
) -> BatchReport:
    changes: dict[TableId, list[pa.Table]] = {  # per table, a part per schema (a batch may pass an ALTER)
        table: [changes_table(records, schema) for schema, records in parts] for table, parts in pending.parts.items()
    }
    checkpoint.seq += 1
    checkpoint.offset = boundary
    checkpoint.schemas = dict(schemas)
    checkpoint.chunks = {  # a table past its highest HW needs no chunk lookups any more
        t: chunks for t, chunks in checkpoint.chunks.items()
        if not max(c.high_watermark for c in chunks) < boundary
    }
    store.commit(checkpoint, changes)  # the changelogs, then the checkpoint
    rows = {str(t): sum(len(r) for _, r in parts) for t, parts in pending.parts.items()}
    return BatchReport(checkpoint.seq, boundary, rows, events, last_ts)
