"""Re-snapshotting key ranges of a replicated table while its stream keeps running: the repair.

Debezium's ad-hoc incremental snapshot, done with the snapshot's own parts. The chunks of the table's
plan that overlap the requested key ranges are read again exactly as the snapshot reads them (low
watermark, SELECT, high watermark, binlog fix-up: ``cdc.chunk_reader``), so each chunk's rows are its
state at its new high watermark (HW). They enter the current-state Delta table by the stream's own
MERGE rule (``lake.write.merge``): a row replaces the target row only when it is newer in changelog order,
and a re-read row is ordered at its chunk's HW. So:

* a damaged row (changed, deleted, or one that should not be there) is replaced, re-inserted or
  deleted, because the lake's row is older than the HW; a row that is right is left as it is, with the
  order key of the change that made it, which ``lake.read.as_of_read`` reads as the time of that change;
* a change the stream committed after the HW stays, because it is newer than the re-read row; one at
  or before the HW (merged already or not yet) loses to it, whenever it is merged.

Nothing needs to stop the stream or coordinate with it: the repair writes only the current-state
table (never the changelog or the checkpoint, the stream's alone), and a commit that races the
stream's MERGE or compaction is retried. Keys the lake has in a chunk's range but the source lacks
at the HW are deleted by a ``-D`` ordered at the HW; which chunk holds a lake row is decided in the
chunk-key column's collation order (``cdc.key_range.KeyRanges``), as the snapshot decided it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader, ChunkSnapshot
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRanges
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import batch_schema, file_rows
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_plan import plan_in_one_batch
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError, TableCommitConflictError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.current_ddl import replace_current
from airflow_provider_mysqlcdc.lake.write.merge import MergeReport, merge_changes
from airflow_provider_mysqlcdc.lake.write.multiset import check_not_keyless

_log = logging.getLogger(__name__)
MERGE_ROWS = 200_000
"""Re-read rows gathered before one MERGE: fewer Delta commits, memory bounded whatever the ranges."""
COMMIT_TRIES = 8


@dataclass(frozen=True)
class RequestedRange:
    """Chunk-key values from ``low`` to ``high``, both included; None: unbounded on that side.

    A user's input (``resnapshot_tables``), not a chunk's range: it is inclusive at both ends, as a person
    names "keys 100 to 200", and only chooses which chunks to read again. The ranges the chunks are cut in
    are ``cdc.key_range.KeyRange`` (half open)."""

    low: Any = None
    high: Any = None


@dataclass(frozen=True)
class ResnapshotRequest:
    """What to read again of one table: every chunk (``whole``), or the chunks overlapping ``ranges``, plus
    the chunks named by index in ``chunks`` (what a verification reports)."""

    table: TableId
    ranges: tuple[RequestedRange, ...] = ()
    chunks: tuple[int, ...] = ()
    whole: bool = False

    @classmethod
    def parse_all(cls, value: Any) -> list[ResnapshotRequest]:
        """``{"db.table": "all" | [[low, high], ...] | {"chunks": [i, ...], "ranges": [[low, high], ...]}}``
        as given or as a rendered template's native value; a verification summary's XCom (``{"db.table":
        {..., "differing_chunks": [i, ...]}}``) reads its differing chunks again."""
        if value is None or value == {} or value == "":
            return []
        if not isinstance(value, Mapping):
            raise InvalidOptionError(
                f"resnapshot must map 'db.table' to 'all', [[low, high], ...] or {{'chunks': [...]}}, not {value!r}"
            )
        requests = [cls.parse(str(table), spec) for table, spec in value.items()]
        return [r for r in requests if r is not None]

    @classmethod
    def parse(cls, table: str, spec: Any) -> ResnapshotRequest | None:
        """None for a verification's report of a table without differing chunks: nothing to read again."""
        table_id = TableId.parse(table)
        if spec == "all":
            return cls(table_id, whole=True)
        if isinstance(spec, Mapping) and "differing_chunks" in spec:  # MySqlVerifySummaryOperator's report
            differing = tuple(spec["differing_chunks"])
            return cls(table_id, chunks=differing) if differing else None
        ranges: Any = None
        chunks: Any = None
        if isinstance(spec, list | tuple):
            ranges, chunks = spec, ()
        if isinstance(spec, Mapping) and set(spec) <= {"ranges", "chunks"}:
            ranges, chunks = spec.get("ranges", ()), spec.get("chunks", ())
        if ranges is None or chunks is None:
            raise InvalidOptionError(f"resnapshot[{table!r}] must be 'all', [[low, high], ...] or "
                                     f"{{'chunks': [index, ...], 'ranges': [[low, high], ...]}}, not {spec!r}")
        parsed = []
        for item in ranges:
            if not isinstance(item, list | tuple) or len(item) != 2:
                raise InvalidOptionError(f"resnapshot[{table!r}]: a key range is [low, high] (both included, null "
                                         f"for unbounded), not {item!r}")
            parsed.append(RequestedRange(item[0], item[1]))
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in chunks):
            raise InvalidOptionError(f"resnapshot[{table!r}]['chunks'] must be chunk indexes (whole numbers >= 0), "
                                     f"not {chunks!r}")
        if not parsed and not chunks:
            raise InvalidOptionError(f"resnapshot[{table!r}] names no key range and no chunk: give at least one, "
                                     f"or 'all'")
        return cls(table_id, tuple(parsed), tuple(chunks))

    def chunks_of(self, plan: Plan, chunks: KeyRanges) -> list[Chunk]:
        """The plan's chunks to read again, in chunk order; ``chunks`` are the plan's chunk ranges
        (:func:`chunk_ranges`). A plan's chunks are consecutive, so a key range names the chunks from the
        one holding its low end to the one holding its high end."""
        if self.whole:
            return list(plan.chunks)
        unknown = [i for i in self.chunks if i >= len(plan.chunks)]
        if unknown:
            raise InvalidOptionError(f"resnapshot[{str(self.table)!r}]: {self.table} has chunks 0-"
                                     f"{len(plan.chunks) - 1}, not {unknown}")
        chosen = set(self.chunks)
        for key_range in self.ranges:
            first = chunks.positions([key_range.low])[0]  # None (unbounded) is in the first chunk too
            last = len(plan.chunks) - 1 if key_range.high is None else chunks.positions([key_range.high])[0]
            chosen.update(range(first, last + 1))
        return [plan.chunks[i] for i in sorted(chosen)]


def chunk_ranges(plan: Plan, order: KeyOrder) -> KeyRanges:
    """Which of the plan's chunks holds a chunk-key value, in the column's collation order: a position in
    ``plan.chunks``, which is the chunk's index (the splitter numbers chunks in key order from 0)."""
    return KeyRanges([c.start for c in plan.chunks[1:]], order.sort_keys)


@dataclass(frozen=True)
class RepairedChunk:
    """One chunk read again: its rows at ``high_watermark`` and the lake's keys in its range the source lacks."""

    chunk: Chunk
    rows: int
    deleted_keys: int
    high_watermark: BinlogOffset

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk.index, "rows": self.rows, "deleted_keys": self.deleted_keys,
                "high_watermark": self.high_watermark.to_dict()}


@dataclass(frozen=True)
class ResnapshotReport:
    """A table's repair: its chunks read again and what the MERGEs changed in its current state."""

    table: TableId
    chunks: tuple[RepairedChunk, ...]
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"table": str(self.table), "chunks": [c.to_dict() for c in self.chunks],
                "rows_read": sum(c.rows for c in self.chunks), "rows_inserted": self.rows_inserted,
                "rows_updated": self.rows_updated, "rows_deleted": self.rows_deleted, "seconds": round(self.seconds, 3)}


def resnapshot_server_id(config: ConnectionConfig, conn_id: str) -> int:
    """The binlog reader id of a repair: the one below the stream's, which runs at the same time (the
    snapshot's readers take the range from its start, and a repair runs after the snapshot)."""
    ids = config.server_id
    if len(ids) < 2:
        raise InvalidOptionError(
            f"the server_id extra of the connection {conn_id!r} is {ids}: a re-snapshot reads the binlog next to the "
            f"stream and needs an id of its own; give a range like '{ids.start}-{ids.start + 9}'"
        )
    return ids.allocate(len(ids) - 2)


def resnapshot(
    config: ConnectionConfig, lake: Lake, request: ResnapshotRequest, server_id: int,
    log: logging.Logger | Any = _log,
) -> ResnapshotReport:
    """Read the requested chunks of ``request.table`` again and MERGE them into its current state."""
    started = time.monotonic()
    store = SnapshotStore(lake)
    plan = store.read_plan(request.table)
    current = lake.table(request.table).current
    if plan is None or current.open() is None:
        raise SnapshotStateError(
            f"{request.table} has no snapshot in {lake.base_uri} to repair: snapshot it first (the split and snapshot "
            f"tasks of the pipeline), then re-snapshot ranges of it"
        )
    # re-read rows are merged by key, newer than the row they replace; a multiset has neither
    check_not_keyless(plan.schema, "the repair re-snapshot (resnapshot_tables)")
    schema = batch_schema(plan.schema, config, lake)
    control = config.connect()
    try:
        ranges = chunk_ranges(plan, KeyOrder.for_column(control, plan.schema.column(plan.schema.chunk_key)))
        chunks = request.chunks_of(plan, ranges)
        log.info("re-snapshot of %s: %d of its %d chunks, binlog server id %d", request.table, len(chunks),
                 len(plan.chunks), server_id)
        lake_keys = _LakeKeys(current, plan, ranges)
        repaired: list[RepairedChunk] = []
        pending: list[pa.Table] = []
        totals = [0, 0, 0]
        for snapshot, rows, batch in _chunk_rows(config, schema, plan, chunks, server_id):
            gone = lake_keys.missing_from(snapshot.chunk, rows, schema)
            deletes = _deletes(gone, rows.schema, request.table, snapshot.high_watermark)
            pending.extend(_in_batch(part, batch) for part in (rows, deletes))
            repaired.append(RepairedChunk(snapshot.chunk, rows.num_rows, gone.num_rows, snapshot.high_watermark))
            if sum(p.num_rows for p in pending) >= MERGE_ROWS:
                _add(totals, _merge(current, pending, schema))
                pending = []
                log.info("re-snapshot of %s: %d/%d chunks merged", request.table, len(repaired), len(chunks))
        if pending:
            _add(totals, _merge(current, pending, schema))
    finally:
        control.close()
    report = ResnapshotReport(request.table, tuple(repaired), totals[0], totals[1], totals[2],
                              time.monotonic() - started)
    log.info("re-snapshot of %s: %d chunks, %d rows read, %d keys the source lacks; the current state got %d rows "
             "inserted, %d updated, %d deleted in %.1f s", request.table, len(repaired),
             sum(c.rows for c in repaired), sum(c.deleted_keys for c in repaired), *totals, report.seconds)
    return report


def _chunk_rows(config: ConnectionConfig, schema: TableSchema, plan: Plan, chunks: Sequence[Chunk],
                server_id: int) -> Iterator[tuple[ChunkSnapshot, pa.Table, int]]:
    """Each chunk read again as the snapshot reads it: its rows at its new high watermark, in the lake's
    form (``file_rows``), and the plan's batch that holds it."""
    with ChunkReader(config, schema, server_id=server_id) as reader:
        for snapshot in reader.read(chunks):
            yield snapshot, file_rows(snapshot.table, schema, snapshot.high_watermark), plan.batch_of(snapshot.chunk)


def _in_batch(rows: pa.Table, batch: int) -> pa.Table:
    return rows.append_column(BATCH_COLUMN, pa.array([batch] * rows.num_rows, pa.int32()))


def read_whole_table(config: ConnectionConfig, lake: Lake, table: TableId, server_id: int,
                     log: logging.Logger | Any = _log, plan: Plan | None = None) -> tuple[pa.Table, BinlogOffset]:
    """Every chunk of ``table``'s plan read again: the current state's rows (with ``_batch``), each as of
    its chunk's new high watermark, and the highest of those watermarks. For a caller that replaces the
    whole current table with them in one commit (a DDL that gave every row new values,
    ``engine.stream.schema_changes``): nothing of the table's old rows is kept, so no key is compared and no
    delete is needed. ``plan``: the chunks to read (None: the table's snapshot plan)."""
    plan = plan or SnapshotStore(lake).read_plan(table)
    if plan is None:
        raise SnapshotStateError(f"{table} has no snapshot plan in {lake.base_uri} to read its rows again by")
    schema = batch_schema(plan.schema, config, lake)
    log.info("reading all %d chunks of %s again, binlog server id %d", len(plan.chunks), table, server_id)
    parts, highest = [], None
    for snapshot, rows, batch in _chunk_rows(config, schema, plan, plan.chunks, server_id):
        parts.append(_in_batch(rows, batch))
        highest = snapshot.high_watermark if highest is None or highest < snapshot.high_watermark else highest
    assert highest is not None  # a plan has at least one chunk
    return pa.concat_tables(parts, promote_options="default"), highest


def reread_current(config: ConnectionConfig, lake: Lake, table: TableId, schema_of: Callable[[TableId], TableSchema],
                   seq: int, server_id: int, since: BinlogOffset | None = None) -> BinlogOffset:
    """Replace ``table``'s current table with every row read again (``read_whole_table``), in one commit at
    stream batch ``seq`` (``lake.write.current_ddl.replace_current``, which records ``since``); returns the
    highest high watermark of its chunks. A table captured without a snapshot (by the stream alone) is read by
    chunks planned now, of its columns ``schema_of`` reads from the server."""
    plan = SnapshotStore(lake).read_plan(table)
    if plan is None:
        conn = config.connect()
        try:
            plan = plan_in_one_batch(conn, schema_of(table))
        finally:
            conn.close()
    return replace_current(lake.table(table).current, seq, lambda: read_whole_table(
        config, lake, table, server_id, log=_log, plan=plan), since)


class _LakeKeys:
    """The keys the current state holds, per chunk of the plan: read per batch partition, once."""

    def __init__(self, current: ReplicaTable, plan: Plan, ranges: KeyRanges) -> None:
        self.current, self.plan, self.ranges = current, plan, ranges
        self._batch: tuple[int, pa.Table] | None = None  # the last partition read: chunks come in order

    def missing_from(self, chunk: Chunk, rows: pa.Table, schema: TableSchema) -> pa.Table:
        """The row keys the lake holds in ``chunk``'s range that ``rows`` (the source's) lack."""
        keys = self._in_chunk(chunk, schema)
        row_key = list(schema.row_key)
        source = rows.select(row_key)
        if keys.num_rows == 0:
            return keys
        source = source.cast(pa.schema([keys.schema.field(k) for k in row_key]))
        return keys.join(source, row_key, join_type="left anti").select(row_key)

    def _in_chunk(self, chunk: Chunk, schema: TableSchema) -> pa.Table:
        batch = self.plan.batch_of(chunk)
        if self._batch is None or self._batch[0] != batch:
            self._batch = (batch, self._read(batch, schema))
        keys = self._batch[1]
        return keys.filter(pc.equal(keys.column("__chunk"), chunk.index)).select(list(schema.row_key))

    def _read(self, batch: int, schema: TableSchema) -> pa.Table:
        key = self.plan.schema.chunk_key
        columns = list(dict.fromkeys([*schema.row_key, key]))
        table = self.current.open()
        if table is None:
            raise SnapshotStateError(
                f"the current table at {self.current.uri} is gone: repair needs the snapshot's rows")
        keys = table.read(columns, pc.field(BATCH_COLUMN) == batch)
        indexes = self.ranges.positions(keys.column(key).to_pylist())
        return keys.append_column("__chunk", pa.array(indexes, pa.int64()))


def _deletes(keys: pa.Table, schema: pa.Schema, table: TableId, high_watermark: BinlogOffset) -> pa.Table:
    """``-D`` rows for ``keys`` in the re-read rows' schema, ordered at the chunk's high watermark like them
    (``lake.changelog.with_snapshot_metadata``); their other columns are null (a delete needs the key)."""
    n = keys.num_rows
    metadata = {"_op": ChangeKind.DELETE.value, "_database": table.database, "_table": table.table, "_op_ts": 0,
                "_binlog_file": file_index(high_watermark.file), "_binlog_pos": high_watermark.position,
                "_row_seq": 0}
    arrays = [
        pc.cast(keys.column(field.name), field.type) if field.name in keys.column_names
        else pa.array([metadata[field.name]] * n, field.type) if field.name in metadata
        else pa.nulls(n, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _merge(current: ReplicaTable, parts: Sequence[pa.Table], schema: TableSchema) -> MergeReport:
    """One MERGE of the gathered rows, retried when the stream's MERGE or compaction committed first."""
    changes, attempt = pa.concat_tables(parts), 1
    while True:
        try:
            return merge_changes(current, changes, list(schema.row_key), through_seq=None, changed_only=True)
        except TableCommitConflictError:
            if attempt == COMMIT_TRIES:
                raise
            time.sleep(0.2 * attempt)
            attempt += 1


def _add(totals: list[int], report: MergeReport) -> None:
    totals[0] += report.rows_inserted
    totals[1] += report.rows_updated
    totals[2] += report.rows_deleted

