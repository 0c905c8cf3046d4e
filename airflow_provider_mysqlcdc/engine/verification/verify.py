"""Verification: does the replica equal the source, chunk by chunk, without locks?

Each chunk of the table's snapshot plan is read from the source exactly as the snapshot reads it (the
chunk reader: low watermark, SELECT, high watermark, binlog fix-up), which gives the chunk's rows as of
its new high watermark (HW) in the canonical Arrow types. Once the stream's checkpoint has passed that
HW, the replica is read as of the same HW (``lake.read.as_of_read``: the current table's rows of the chunk's batch
and the changelog, rolled to the HW) and restricted to the chunk's key range, by the same collation-exact
sort keys the stream's emit filter uses. Both sides are then compared by key, column by column, in the
same Arrow types: the type-matrix test already holds that a value read by SELECT and the same value
from the binlog convert to the same value, so an equal table shows no difference. A chunk's verdict is
equal, or its keys missing from the replica, extra in it, and different. A table without any key is
compared as multisets of whole rows (``compare_multisets``): its chunks are read at one binlog position
each (LW = HW, ``cdc.chunk_reader``), and the replica's copies rolled to it (``lake.write.multiset``).

Why read the source again rather than checksum on the server: a server-side checksum (``CRC32`` of a
concatenation) would have to reproduce in SQL exactly the canonical conversions of every type (zero dates
to NULL, TIMESTAMP to UTC, FLOAT through ``+ 0e0``, ...), twice; reading through the snapshot's own
reader is the same code, and names the keys that differ. The cost is the snapshot's read, plus reading
the replica once per Spark task: for an integer chunk key its chunks' key range from the current table
(every partition, so a row misplaced in another batch's partition shows too) and the changelog, else the
batch's partition and the whole changelog.

The report is a typed document with a format version, per table and verification run:
``<db>/<table>/verify/<run>/batch=<n>.json`` per batch (written by its Spark job) and
``<db>/<table>/verify/<run>.json``, the whole run (written by the summary).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader, ChunkSnapshot
from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import snapshot_server_id
from airflow_provider_mysqlcdc.cdc.split.chunks import INTEGER_TYPES, Chunk, decode_key, encode_key
from airflow_provider_mysqlcdc.cdc.split.key_order import STRING_TYPES, KeyOrder
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRange, KeyRanges
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import batch_schema
from airflow_provider_mysqlcdc.exceptions import (
    AsOfError,
    InvalidOptionError,
    ReplicaMismatchError,
    SchemaChangeError,
    VerifyError,
)
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, SnapshotStore
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.as_of_read import History
from airflow_provider_mysqlcdc.lake.write.multiset import images
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

_log = logging.getLogger(__name__)

REPORT_FORMAT = DocumentFormat("verification report", version=1, oldest=1)
"""1: the first release's format (versioned from its first commit, ee7f672)."""
DEFAULT_MAX_KEYS = 1_000
"""Keys listed per chunk and kind (missing, extra, different); the counts are always complete."""


# -- the report --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyList:
    """How many keys, and the first ``DEFAULT_MAX_KEYS`` of them (tuples of the row key's values)."""

    count: int = 0
    keys: tuple[tuple[Any, ...], ...] = ()

    @classmethod
    def of(cls, keys: Sequence[tuple[Any, ...]], limit: int) -> KeyList:
        return cls(len(keys), tuple(keys[:limit]))

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "keys": [[encode_key(v) for v in key] for key in self.keys]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyList:
        return cls(d["count"], tuple(tuple(decode_key(v) for v in key) for key in d["keys"]))


@dataclass(frozen=True)
class ChunkVerdict:
    """One chunk compared at ``high_watermark``: equal when no key is missing, extra or different."""

    chunk: Chunk
    high_watermark: BinlogOffset
    source_rows: int
    replica_rows: int
    missing: KeyList = field(default_factory=KeyList)
    extra: KeyList = field(default_factory=KeyList)
    different: KeyList = field(default_factory=KeyList)

    @property
    def equal(self) -> bool:
        return not (self.missing.count or self.extra.count or self.different.count)

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk.to_dict(), "high_watermark": self.high_watermark.to_dict(),
                "source_rows": self.source_rows, "replica_rows": self.replica_rows, "equal": self.equal,
                "missing": self.missing.to_dict(), "extra": self.extra.to_dict(),
                "different": self.different.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChunkVerdict:
        return cls(Chunk.from_dict(d["chunk"]), BinlogOffset.from_dict(d["high_watermark"]), d["source_rows"],
                   d["replica_rows"], KeyList.from_dict(d["missing"]), KeyList.from_dict(d["extra"]),
                   KeyList.from_dict(d["different"]))


@dataclass(frozen=True)
class VerifyReport:
    """A verification of one table (all its batches, or one batch's part of it), as written to the lake."""

    table: TableId
    run: str
    verdicts: tuple[ChunkVerdict, ...]
    seconds: float
    batches: tuple[int, ...] = ()
    FORMAT: ClassVar[DocumentFormat] = REPORT_FORMAT

    @property
    def rows(self) -> int:
        return sum(v.source_rows for v in self.verdicts)

    @property
    def differing(self) -> list[ChunkVerdict]:
        return [v for v in self.verdicts if not v.equal]

    @property
    def equal(self) -> bool:
        return not self.differing

    def totals(self) -> dict[str, int]:
        return {"missing": sum(v.missing.count for v in self.verdicts),
                "extra": sum(v.extra.count for v in self.verdicts),
                "different": sum(v.different.count for v in self.verdicts)}

    def summary(self) -> str:
        rate = f"{self.rows / self.seconds:,.0f} rows/s" if self.seconds else "n/a"
        head = (f"verify {self.table} (run {self.run}): {len(self.verdicts)} chunks, {self.rows:,} source rows, "
                f"{self.seconds:.1f} s of reading ({rate}): ")
        if self.equal:
            return head + "the replica equals the source"
        totals = self.totals()
        chunks = ", ".join(str(v.chunk.index) for v in self.differing[:20])
        return (head + f"{len(self.differing)} chunks differ ({chunks}{', ...' if len(self.differing) > 20 else ''}): "
                f"{totals['missing']} keys missing from the replica, {totals['extra']} extra, "
                f"{totals['different']} with different values")

    def to_dict(self, differing_only: bool = False) -> dict[str, Any]:
        """The lake's document; ``differing_only``: XCom's form, the verdicts of differing chunks alone (the
        equal chunks' are in the lake's report)."""
        return self.FORMAT.write({
            "table": str(self.table), "run": self.run, "batches": list(self.batches),
            "seconds": round(self.seconds, 3), "rows": self.rows, "chunks": len(self.verdicts), "equal": self.equal,
            **self.totals(), "differing_chunks": [v.chunk.index for v in self.differing],
            "verdicts": [v.to_dict() for v in (self.differing if differing_only else self.verdicts)],
        })

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "") -> VerifyReport:
        d = cls.FORMAT.read(document, path)
        return cls(TableId.parse(d["table"]), d["run"], tuple(ChunkVerdict.from_dict(v) for v in d["verdicts"]),
                   d["seconds"], tuple(d["batches"]))

    @classmethod
    def combine(cls, table: TableId, run: str, parts: Iterable[VerifyReport]) -> VerifyReport:
        """The whole run from its batches' reports (batches run in parallel: seconds add up as work)."""
        parts = sorted(parts, key=lambda p: p.batches)
        verdicts = sorted((v for p in parts for v in p.verdicts), key=lambda v: v.chunk.index)
        return cls(table, run, tuple(verdicts), sum(p.seconds for p in parts),
                   tuple(b for p in parts for b in p.batches))


_RUN = re.compile(r"[^A-Za-z0-9._-]+")


def run_name(run: str) -> str:
    """A run id (e.g. Airflow's ``manual__2026-11-23T10:00:00+00:00``) as a file name."""
    name = _RUN.sub("_", run).strip("_")
    if not name:
        raise InvalidOptionError(f"a verification run needs a name of letters, digits, '.', '_' or '-', not {run!r}")
    return name


class VerifyStore:
    """Verification reports under ``<db>/<table>/verify/`` of the lake."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def _dir(self, table: TableId, run: str) -> str:
        return self.lake.table(table).verification_dir(run_name(run))

    def batch_path(self, table: TableId, run: str, batch: int) -> str:
        return f"{self._dir(table, run)}/batch={batch}.json"

    def report_path(self, table: TableId, run: str) -> str:
        return f"{self._dir(table, run)}.json"

    def write_batch(self, report: VerifyReport) -> None:
        (batch,) = report.batches
        self.lake.write_json(self.batch_path(report.table, report.run, batch), report.to_dict())

    def read_batch(self, table: TableId, run: str, batch: int) -> VerifyReport | None:
        path = self.batch_path(table, run, batch)
        document = self.lake.read_json(path)
        return VerifyReport.from_dict(document, path) if document is not None else None

    def write_report(self, report: VerifyReport) -> str:
        path = self.report_path(report.table, report.run)
        self.lake.write_json(path, report.to_dict())
        return path


# -- comparing ---------------------------------------------------------------------------------------


def _keys(table: pa.Table, row_key: Sequence[str]) -> list[tuple[Any, ...]]:
    return list(zip(*(table.column(k).to_pylist() for k in row_key), strict=True)) if table.num_rows else []


def _by_key(table: pa.Table, row_key: Sequence[str]) -> pa.Table:
    """``table`` in key order (Arrow's order: both sides the same); untouched when it is already."""
    order = pc.sort_indices(table, [(k, "ascending") for k in row_key])
    in_order = pc.all(pc.equal(order, pa.array(range(table.num_rows), pa.uint64()))).as_py()
    return table if in_order or not table.num_rows else table.take(order)


def _differing_rows(source: pa.Table, replica: pa.Table) -> pa.Array:
    """Row by row (aligned tables of one schema): does any column differ (NULL equals NULL only)."""
    differs = pa.array([False] * source.num_rows, pa.bool_())
    for column in source.column_names:
        a, b = source.column(column), replica.column(column)
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        differs = pc.or_(differs, pc.invert(same))
    return differs


def compare(schema: TableSchema, source: pa.Table, replica: pa.Table,
            max_keys: int = DEFAULT_MAX_KEYS) -> tuple[KeyList, KeyList, KeyList]:
    """Keys missing from ``replica``, extra in it, and present in both with a different value in any
    column; both tables in the table's canonical Arrow types (the replica is cast to the source's).

    Both sides in key order: when they hold the same keys (the usual case) the columns are compared as
    they stand, without a Python object per row; otherwise keys are matched one by one."""
    columns = list(schema.column_names)
    if set(replica.column_names) != set(columns) or set(source.column_names) != set(columns):
        raise SchemaChangeError(
            f"{schema.id}: the source has columns {source.column_names}, the replica {replica.column_names}: the "
            f"stream has not followed a schema change yet (it does at the table's next change), verify again later; "
            f"or its schema_change_behavior 'ignore' keeps the lake's columns, which verify cannot compare"
        )
    if schema.keyless:
        return compare_multisets(columns, source, replica, max_keys)
    row_key = list(schema.row_key)
    source = _by_key(source.select(columns), row_key)
    replica = _by_key(replica.select(columns).cast(source.schema), row_key)
    if source.num_rows == replica.num_rows and not pc.any(_differing_rows(source.select(row_key),
                                                                          replica.select(row_key))).as_py():
        changed = source.filter(_differing_rows(source, replica))
        return KeyList(), KeyList(), KeyList.of(_keys(changed, row_key), max_keys)
    source_keys, replica_keys = _keys(source, row_key), _keys(replica, row_key)
    in_replica = {k: i for i, k in enumerate(replica_keys)}
    in_source = set(source_keys)
    missing = [k for k in source_keys if k not in in_replica]
    extra = [k for k in replica_keys if k not in in_source]
    both = [(i, in_replica[k]) for i, k in enumerate(source_keys) if k in in_replica]
    different: list[tuple[Any, ...]] = []
    if both:
        left, right = (pa.array([pair[side] for pair in both], pa.int64()) for side in (0, 1))
        differs = _differing_rows(source.take(left), replica.take(right))
        different = [source_keys[both[i][0]] for i in pc.indices_nonzero(differs).to_pylist()]
    return KeyList.of(missing, max_keys), KeyList.of(extra, max_keys), KeyList.of(different, max_keys)


def compare_multisets(columns: Sequence[str], source: pa.Table, replica: pa.Table,
                      max_keys: int = DEFAULT_MAX_KEYS) -> tuple[KeyList, KeyList, KeyList]:
    """A keyless table's chunk compared as multisets of whole rows: an image with more copies in the
    source is listed as missing once per copy the replica lacks, one with more in the replica as extra once
    per copy too many (the listed "keys" are whole images); nothing is "different", as a changed row is
    another image."""
    replica = replica.select(list(columns)).cast(source.select(list(columns)).schema)
    have, want = Counter(images(replica, columns)), Counter(images(source, columns))
    missing = sorted((want - have).elements(), key=repr)
    extra = sorted((have - want).elements(), key=repr)
    return KeyList.of(missing, max_keys), KeyList.of(extra, max_keys), KeyList()


# -- one Spark task's share of a batch ---------------------------------------------------------------


def wait_for_checkpoint(lake: Lake, table: TableId, offset: BinlogOffset, wait_seconds: float,
                        poll_seconds: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> None:
    """Until the stream's checkpoint has passed ``offset`` for ``table`` (at most ``wait_seconds``)."""
    store = StreamStore(lake)
    deadline = time.monotonic() + wait_seconds
    while True:
        checkpoint = store.read_checkpoint()
        if checkpoint is not None and table in checkpoint.schemas and checkpoint.visible[1] >= offset:
            return
        if time.monotonic() >= deadline:
            where = (f"its checkpoint is at {checkpoint.offset} (updated {checkpoint.updated_at})"
                     if checkpoint is not None else "the lake has no stream checkpoint")
            captured = "" if checkpoint is None or table in checkpoint.schemas else f", and it does not capture {table}"
            raise AsOfError(
                f"verify waited {wait_seconds:.0f} s for the stream to commit past {offset} (the source's high "
                f"watermark of the chunks read), but {where}{captured}: verification compares with the replica as "
                f"of that point, so the stream must run meanwhile; start the stream task (or raise wait_seconds)"
            )
        sleep(poll_seconds)


def verify_chunks(
    lake: Lake,
    config: ConnectionConfig,
    schema: TableSchema,
    plan_chunks: Sequence[Chunk],
    batch: Batch,
    chunks: Sequence[Chunk],
    server_id: int,
    wait_seconds: float,
    max_keys: int = DEFAULT_MAX_KEYS,
    session: SourceSession | None = None,
) -> list[ChunkVerdict]:
    """Verify ``chunks`` (of ``batch``; ``plan_chunks`` all chunks of the table's plan): read them from the
    source (binlog reader id ``server_id``; through ``session``, a Spark task's for all its batches, or
    one of the reader's own), wait for the stream to pass their high watermarks, read the replica once and
    compare each chunk as of its own high watermark."""
    if not chunks:
        return []
    with ChunkReader(config, schema, server_id=server_id, session=session) as reader:
        snapshots: list[ChunkSnapshot] = list(reader.read(sorted(chunks, key=lambda c: c.index)))
    wait_for_checkpoint(lake, schema.id, max(s.high_watermark for s in snapshots), wait_seconds)
    # a key's rows share its chunk when the chunk key is part of the row key: then each chunk's history
    # alone gives its state, and the current table's rows are all in the batch's partition; otherwise a
    # key can move between chunks and batches, and the whole table's state is rolled for each chunk
    by_key = schema.keyless or schema.chunk_key in schema.row_key  # a keyless row's image holds its chunk key
    column = schema.chunk_key_column
    if by_key and column.data_type in INTEGER_TYPES:  # the chunks' keys from every partition: a misplaced row shows
        ordered = sorted(chunks, key=lambda c: c.index)
        history = History.load(lake, schema.id, key_range=KeyRange(ordered[0].start, ordered[-1].end))
    else:
        history = History.load(lake, schema.id, batch=batch.number if by_key else None)
    control = config.connect() if column.data_type in STRING_TYPES else None  # collation weights from the server
    try:
        starts = [c.start for c in plan_chunks[1:]]
        ranges = KeyRanges(starts, KeyOrder.for_column(control, column).sort_keys)
        indexes = np.array([c.index for c in plan_chunks])

        def chunk_of(rows: pa.Table) -> pa.Array:
            values = rows.column(schema.chunk_key)
            if pa.types.is_integer(values.type) and not values.null_count:
                # KeyRanges' bisection done by numpy over the whole column: no Python object per row
                found = np.searchsorted(np.array(starts, dtype=values.type.to_pandas_dtype()), values.to_numpy(),
                                        side="right")
            else:
                found = np.array(ranges.positions(values.to_pylist()), dtype=np.int64)
            return pa.array(indexes[found], pa.int32())

        rows = history.rows
        numbers = chunk_of(rows) if by_key else None
        verdicts = []
        for snapshot in snapshots:
            index = snapshot.chunk.index
            if numbers is not None:
                mine = rows.filter(pc.equal(numbers, index))
                replica = history.at(snapshot.high_watermark, mine)
            else:
                state = history.at(snapshot.high_watermark)
                replica = state.filter(pc.equal(chunk_of(state), index))
            missing, extra, different = compare(schema, snapshot.table, replica, max_keys)
            verdicts.append(ChunkVerdict(snapshot.chunk, snapshot.high_watermark, snapshot.table.num_rows,
                                         replica.num_rows, missing, extra, different))
    finally:
        if control is not None:
            control.close()
    return verdicts


def verify_batch_locally(lake: Lake, config: ConnectionConfig, batch: Batch, run: str, parts: int,
                         wait_seconds: float) -> VerifyReport:
    """One batch in this process, in ``parts`` sequential parts as its Spark tasks would cut it (part ``i``
    reading with the ``i``-th id of the connection's range): for tests and benchmarks without Spark; the
    Spark job runs the parts in parallel and writes the same report."""
    plan = SnapshotStore(lake).read_plan(batch.table)
    if plan is None:
        raise VerifyError(f"no snapshot plan of {batch.table} under {lake.base_uri}: nothing to verify against; "
                          f"run its split and snapshot tasks first")
    schema = batch_schema(plan.schema, config, lake)
    mine = plan.chunks_of(batch)
    started = time.monotonic()
    verdicts = [v for part in range(parts)
                for v in verify_chunks(lake, config, schema, plan.chunks, batch,
                                       mine[len(mine) * part // parts: len(mine) * (part + 1) // parts],
                                       snapshot_server_id(config.server_id, 0, parts, part), wait_seconds)]
    report = VerifyReport(batch.table, run, tuple(verdicts), time.monotonic() - started, (batch.number,))
    VerifyStore(lake).write_batch(report)
    return report


def summarize(lake: Lake, table: TableId, run: str, batches: Iterable[int], fail_on_difference: bool,
              log: Any = _log) -> VerifyReport:
    """The run's batch reports as one report in the lake, its summary in ``log`` (a logger, or a task's);
    ``ReplicaMismatchError`` when chunks differ and ``fail_on_difference``."""
    store = VerifyStore(lake)
    wanted = sorted(set(batches))
    parts = [store.read_batch(table, run, b) for b in wanted]
    absent = [b for b, p in zip(wanted, parts, strict=True) if p is None]
    if absent:
        raise VerifyError(f"verify run {run} of {table} has no report of batches {absent} in the lake: their verify "
                        f"tasks did not finish; clear them (or the whole run) and summarize again")
    report = VerifyReport.combine(table, run, [p for p in parts if p is not None])
    path = store.write_report(report)
    log.info("%s; report: %s", report.summary(), path)
    for verdict in report.differing[:20]:
        log.warning("chunk %d [%r, %r) as of %s: missing %s, extra %s, different %s", verdict.chunk.index,
                    verdict.chunk.start, verdict.chunk.end, verdict.high_watermark, list(verdict.missing.keys[:10]),
                    list(verdict.extra.keys[:10]), list(verdict.different.keys[:10]))
    if fail_on_difference and not report.equal:
        raise ReplicaMismatchError(f"{report.summary()}; the keys are in {path}")
    return report
