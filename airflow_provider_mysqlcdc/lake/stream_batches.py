"""The binlog stream as committed batches: read from the checkpoint, filter, write, checkpoint.

One call reads the binlog from the checkpoint's offset until it has caught up with the server,
committing a batch whenever ``max_events`` changes or ``max_seconds`` have gathered, always at a
transaction boundary. Changes are emitted through the emit filter built from the finished chunks'
high watermarks; a table past its highest HW drops its chunks from the checkpoint. No Airflow here:
the stream operator calls this between deferrals.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog_reader import BinlogReader, Committed, SchemaChanged
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.chunks import Chunk, decode_key
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.emit_filter import EmitFilter, FinishedChunk
from airflow_provider_mysqlcdc.cdc.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.lake.changelog import changes_table
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore


@dataclass(frozen=True)
class BatchLimits:
    max_events: int = 100_000
    max_seconds: float = 10.0


@dataclass
class BatchReport:
    seq: int
    offset: BinlogOffset
    rows: dict[str, int]
    events_read: int
    last_ts_ms: int


def checkpoint_from_manifests(manifests: list[dict[str, Any]], schemas: dict[TableId, TableSchema]) -> Checkpoint:
    """The stream's first checkpoint after a snapshot: start at the lowest high watermark."""
    chunks: dict[TableId, list[list[Any]]] = {}
    for manifest in manifests:
        for record in manifest["chunks"]:
            chunk = Chunk.from_dict(record["chunk"])
            chunks.setdefault(chunk.table, []).append(
                [record["chunk"]["s"], record["chunk"]["e"], record["high_watermark"]]
            )
    offsets = [BinlogOffset.from_dict(c[2]) for table_chunks in chunks.values() for c in table_chunks]
    if not offsets:
        raise ValueError("no snapshot chunks to start the stream from")
    return Checkpoint(seq=0, offset=min(offsets), schemas=schemas, chunks=chunks)


@dataclass
class _Pending:
    """Changes of complete transactions not yet committed to the lake, per table and schema."""

    parts: dict[TableId, list[tuple[TableSchema, list[ChangeRecord]]]] = field(default_factory=dict)
    count: int = 0

    def add(self, schema: TableSchema, record: ChangeRecord) -> None:
        parts = self.parts.setdefault(record.table, [])
        if not parts or parts[-1][0] is not schema:
            parts.append((schema, []))
        parts[-1][1].append(record)
        self.count += 1

    def absorb(self, other: _Pending) -> None:
        for parts in other.parts.values():
            for schema, records in parts:
                for record in records:
                    self.add(schema, record)


def stream_batches(
    config: ConnectionConfig,
    server_id: int,
    store: StreamStore,
    checkpoint: Checkpoint,
    control: Any,
    reload_schema: Callable[[TableId], TableSchema],
    limits: BatchLimits = BatchLimits(),
) -> Iterator[BatchReport]:
    """Commit batches until caught up; ``checkpoint`` is advanced in place. Yields one report per commit."""
    emit, orders = _emit_filter(checkpoint, control)
    schemas = dict(checkpoint.schemas)
    reader = BinlogReader(config.replication_settings(), server_id, config.server_id, schemas, checkpoint.offset,
                          reload_schema=reload_schema, session_time_zone=config.server_time_zone)
    committed, uncommitted = _Pending(), _Pending()
    events, last_ts, started = 0, 0, time.monotonic()
    boundary: BinlogOffset | None = None
    for item in reader:
        if isinstance(item, ChangeRecord):
            events += 1
            if item.table in emit.tables:  # still in its snapshot phase: emit only after the key's chunk HW
                key = None
                if emit.needs_key(item.table, item.offset):
                    schema = schemas[item.table]
                    key = orders[item.table].sort_key(item.values[schema.column_names.index(schema.chunk_key)])
                if not emit.should_emit(item.table, key, item.offset):
                    continue
            uncommitted.add(schemas[item.table], item)
            last_ts = item.ts_ms
        elif isinstance(item, SchemaChanged):
            schemas[item.schema.id] = item.schema
        elif isinstance(item, Committed):
            committed.absorb(uncommitted)  # the transaction is complete
            uncommitted = _Pending()
            boundary = item.offset
            if committed.count >= limits.max_events or time.monotonic() - started >= limits.max_seconds:
                yield _commit(store, checkpoint, committed, boundary, schemas, events, last_ts)
                committed, events, started = _Pending(), 0, time.monotonic()
    if boundary is not None and (committed.count or boundary != checkpoint.offset):
        yield _commit(store, checkpoint, committed, boundary, schemas, events, last_ts)


def _emit_filter(checkpoint: Checkpoint, control: Any) -> tuple[EmitFilter[BinlogOffset], dict[TableId, KeyOrder]]:
    orders = {t: KeyOrder.for_column(control, s.chunk_key_column) for t, s in checkpoint.schemas.items()}
    finished = {}
    for table, chunks in checkpoint.chunks.items():
        order = orders[table]
        bounds = order.sort_keys([decode_key(v) for c in chunks for v in (c[0], c[1])])
        finished[table] = [
            FinishedChunk(bounds[2 * i], bounds[2 * i + 1], BinlogOffset.from_dict(c[2])) for i, c in enumerate(chunks)
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
    files: dict[TableId, list[pa.Table]] = {
        table: [changes_table(records, schema) for schema, records in parts] for table, parts in pending.parts.items()
    }
    checkpoint.seq += 1
    checkpoint.offset = boundary
    checkpoint.schemas = dict(schemas)
    checkpoint.chunks = {  # a table past its highest HW needs no chunk lookups any more
        t: c for t, c in checkpoint.chunks.items() if not max(BinlogOffset.from_dict(x[2]) for x in c) < boundary
    }
    store.commit(checkpoint, files)
    rows = {str(t): sum(len(r) for _, r in parts) for t, parts in pending.parts.items()}
    return BatchReport(checkpoint.seq, boundary, rows, events, last_ts)
