"""The snapshot's own documents: one plan per table, and a manifest per committed batch.

Layout under the base URI, per table::

    <db>/<table>/snapshot/_plan.json                   Plan: schema, chunks, batches (written once)
    <db>/<table>/snapshot/batch=<n>/_manifest.json     BatchManifest: chunks with LW/HW, schema read
    <db>/<table>/current/_batch=<n>/attempt-<id>-part-<k>.parquet   the batch's rows (Delta table)

The rows live in the table's current-state Delta table (``Lake.table(...).current``), partitioned by
batch: a batch commits in one Delta transaction that replaces its partition
(``lake.write.snapshot_commit``), so a re-run of a batch (a retry, or one map index cleared in the UI)
replaces exactly its rows, atomically, and the files of a failed or killed attempt are never part of
the table. Its manifest is written after that commit: the Delta table is the truth for the data,
the manifest for the chunks' watermarks, which the stream starts from. A batch with a manifest is
committed; the snapshot of a table is finished when every batch of its plan has one. The plan is
kept so that a re-run after a failure keeps the same chunks and batch ids and skips the committed
batches.

Both documents are typed dataclasses, versioned by ``lake.documents.versions`` (``PLAN_FORMAT``,
``MANIFEST_FORMAT``): an earlier version is upgraded as it is read, a newer one refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRanges
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.parallel import READ_THREADS, each

T = TypeVar("T")
R = TypeVar("R")

_BEFORE_DELTA = (
    "the snapshot layout from before the current-state Delta table (rows as Parquet files under "
    "snapshot/batch=<n>/attempt=<id>/), which no release wrote or reads: re-snapshot the table (delete its "
    "folder <base_uri>/<db>/<table> in the lake and run the DAG again)"
)

PLAN_FORMAT = DocumentFormat("snapshot plan", version=1, oldest=1, unversioned=0, retired={0: _BEFORE_DELTA})
"""1: schema, chunks and ``[number, first chunk, last chunk]`` batches, the first release's format (its
schemas' ``key_index`` is read by ``TableSchema.from_dict``, which tells a primary key from a chunk key
for documents without it). 0 (no ``format_version``): the layout before Delta, never released."""

MANIFEST_FORMAT = DocumentFormat("snapshot batch manifest", version=1, oldest=1, unversioned=0,
                                 retired={0: _BEFORE_DELTA})
"""1: the batch, attempt, schema, chunks with watermarks and file, sizes and Delta version: the first
release's format. 0 (no ``format_version``): the layout before Delta, never released."""


@dataclass(frozen=True)
class Batch:
    """A contiguous run of chunks of one table: one partition (``_batch=<n>``) of its current-state Delta
    table, committed in one transaction with its manifest. The split packs batches, of one table or of
    many, into the mapped snapshot tasks (``engine.snapshot.jobs.Job``), which hold the binlog
    server ids of a DAG run.
    """

    table: TableId
    number: int
    first_chunk: int
    last_chunk: int

    @property
    def batch_id(self) -> str:
        return f"{self.table}:{self.number}"

    @property
    def label(self) -> str:
        return f"{self.table} chunks {self.first_chunk}-{self.last_chunk}"

    @property
    def chunk_count(self) -> int:
        return self.last_chunk - self.first_chunk + 1

    def to_dict(self) -> dict[str, Any]:
        return {"table": str(self.table), "number": self.number, "first_chunk": self.first_chunk,
                "last_chunk": self.last_chunk, "batch_id": self.batch_id, "label": self.label}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Batch:
        """Also reads the dicts of earlier versions, whose ``first_reader``/``readers`` (the server ids a
        batch had before batches were packed) manifests keep and nothing reads."""
        return cls(TableId.parse(d["table"]), d["number"], d["first_chunk"], d["last_chunk"])


@dataclass(frozen=True)
class Plan:
    """A table's chunks and batches, as the split task cut them (``_plan.json``)."""

    schema: TableSchema
    chunks: list[Chunk]
    batches: list[Batch]
    FORMAT: ClassVar[DocumentFormat] = PLAN_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return self.FORMAT.write({
            "schema": self.schema.to_dict(),
            "chunks": [c.to_dict() for c in self.chunks],
            "batches": [[b.number, b.first_chunk, b.last_chunk] for b in self.batches],
        })

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "") -> Plan:
        d = cls.FORMAT.read(document, path)
        schema = TableSchema.from_dict(d["schema"])
        return cls(schema, [Chunk.from_dict(c) for c in d["chunks"]],
                   [Batch(schema.id, n, first, last) for n, first, last in d["batches"]])

    def chunks_of(self, batch: Batch) -> list[Chunk]:
        return self.chunks[batch.first_chunk : batch.last_chunk + 1]

    def chunks_to_read(self, batch: Batch) -> list[Chunk]:
        """The batch's chunks in the order its job reads them: an unbounded last chunk first (it grows with
        every insert above the split's maximum key until it is read), then the others in key order."""
        chunks = self.chunks_of(batch)
        return sorted(chunks, key=lambda c: c.end is not None)

    def batch_of(self, chunk: Chunk) -> int:
        """The number of the batch that holds ``chunk`` (its partition of the current state)."""
        return self.batches[self._batch_ranges.position(chunk.index)].number

    @cached_property
    def _batch_ranges(self) -> KeyRanges:
        """The batches as consecutive ranges of chunk indexes, each from its first chunk on."""
        return KeyRanges([b.first_chunk for b in self.batches[1:]])


@dataclass(frozen=True)
class ChunkResult:
    """One chunk as a Spark task wrote it: its rows (a row group of ``file``) as of its high watermark.

    ``file`` is relative to the current-state Delta table (``_batch=<n>/attempt-<id>-part-<k>.parquet``),
    as in the Delta log, so the lake can move without rewriting manifests."""

    chunk: Chunk
    rows: int
    changed_keys: int
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    file: str
    write_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk.to_dict(), "rows": self.rows, "changed_keys": self.changed_keys,
                "low_watermark": self.low_watermark.to_dict(), "high_watermark": self.high_watermark.to_dict(),
                "file": self.file, "write_seconds": self.write_seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChunkResult:
        return cls(Chunk.from_dict(d["chunk"]), d["rows"], d["changed_keys"],
                   BinlogOffset.from_dict(d["low_watermark"]), BinlogOffset.from_dict(d["high_watermark"]),
                   d["file"], d.get("write_seconds", 0.0))


@dataclass(frozen=True)
class BatchManifest:
    """A committed batch (``_manifest.json``): which attempt, the columns it read, and every chunk with
    its watermarks. ``delta_version`` is the current-state table's version that the batch's commit made.

    Its ``to_dict`` is also what the snapshot task returns to XCom (``rows``, ``bytes``, ``chunks`` with
    their ``high_watermark``, ...); the derived fields there are not read back."""

    batch: Batch
    attempt: str
    schema: TableSchema
    chunks: tuple[ChunkResult, ...]
    bytes: int
    seconds: float
    delta_version: int
    FORMAT: ClassVar[DocumentFormat] = MANIFEST_FORMAT

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.chunks)

    @property
    def changed_keys(self) -> int:
        return sum(c.changed_keys for c in self.chunks)

    @property
    def files(self) -> list[str]:
        """The batch's Parquet files, relative to the current-state table."""
        return sorted({c.file for c in self.chunks})

    @property
    def rows_per_second(self) -> int | None:
        return round(self.rows / self.seconds) if self.seconds else None

    @property
    def high_watermark(self) -> BinlogOffset:
        """The highest high watermark of the batch's chunks."""
        return max(c.high_watermark for c in self.chunks)

    def to_dict(self) -> dict[str, Any]:
        return self.FORMAT.write({
            "batch": self.batch.to_dict(), "attempt": self.attempt,
            "schema": self.schema.to_dict(), "chunks": [c.to_dict() for c in self.chunks], "files": self.files,
            "rows": self.rows, "bytes": self.bytes, "seconds": self.seconds,
            "rows_per_second": self.rows_per_second, "changed_keys": self.changed_keys,
            "delta_version": self.delta_version,
        })

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "") -> BatchManifest:
        d = cls.FORMAT.read(document, path)
        return cls(Batch.from_dict(d["batch"]), d["attempt"], TableSchema.from_dict(d["schema"]),
                   tuple(ChunkResult.from_dict(c) for c in d["chunks"]), d["bytes"], d["seconds"],
                   d["delta_version"])


def batch_read_with(manifests: list[BatchManifest], plan: Plan, latest: bool) -> TableSchema:
    """The columns the batch with the lowest (or, ``latest``, highest) high watermark was read with: a
    table altered during its snapshot has batches of two schemas (no manifest yet: the plan's)."""
    if not manifests:
        return plan.schema
    return (max if latest else min)(manifests, key=lambda m: m.high_watermark).schema


def group_batches(table: TableId, chunks: list[Chunk], chunks_per_batch: int) -> list[Batch]:
    return [
        Batch(table, number, first, min(first + chunks_per_batch, len(chunks)) - 1)
        for number, first in enumerate(range(0, len(chunks), chunks_per_batch))
    ]


def part_file(batch: Batch, attempt: str, part: int) -> str:
    """A Spark task's Parquet file, relative to the current-state table: in the batch's Delta partition
    folder, named by attempt so that a re-run never overwrites a file an older table version reads."""
    return f"{BATCH_COLUMN}={batch.number}/attempt-{attempt}-part-{part:05d}.parquet"


class SnapshotStore:
    """Plans and batch manifests of the tables of one lake, and where batches write their files."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def _each(self, read: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``read`` of each item in order: on an object store several at once, on a filesystem one by one."""
        return each(read, items, READ_THREADS if self.lake.object_store else 1, "snapshot-read")

    def read_plans(self, tables: Sequence[TableId]) -> dict[TableId, Plan | None]:
        """Each table's plan (None where it has none)."""
        return dict(zip(tables, self._each(self.read_plan, tables), strict=True))

    def manifests_of(self, plans: Sequence[Plan]) -> list[list[BatchManifest | None]]:
        """``manifests`` of each plan, the reads of all of them at once on an object store."""
        found = iter(self.read_manifests([b for plan in plans for b in plan.batches]))
        return [[next(found) for _ in plan.batches] for plan in plans]

    def part_path(self, batch: Batch, attempt: str, part: int) -> str:
        return f"{self.lake.table(batch.table).current_dir}/{part_file(batch, attempt, part)}"

    def read_plan(self, table: TableId) -> Plan | None:
        path = self.lake.table(table).plan
        document = self.lake.read_json(path)
        return Plan.from_dict(document, path) if document is not None else None

    def write_plan(self, plan: Plan) -> None:
        self.lake.write_json(self.lake.table(plan.schema.id).plan, plan.to_dict())

    def write_plans(self, plans: Sequence[Plan]) -> None:
        """Write each plan, several at once on an object store."""
        self._each(self.write_plan, plans)

    def read_manifest(self, batch: Batch) -> BatchManifest | None:
        path = self.lake.table(batch.table).manifest(batch.number)
        document = self.lake.read_json(path)
        return BatchManifest.from_dict(document, path) if document is not None else None

    def read_manifests(self, batches: Sequence[Batch]) -> list[BatchManifest | None]:
        """``read_manifest`` of each batch, several at once on an object store."""
        return self._each(self.read_manifest, batches)

    def write_manifest(self, manifest: BatchManifest) -> None:
        """Record a batch whose rows are committed to the Delta table (``lake.write.snapshot_commit``)."""
        batch = manifest.batch
        self.lake.write_json(self.lake.table(batch.table).manifest(batch.number), manifest.to_dict())

    def manifests(self, plan: Plan) -> list[BatchManifest | None]:
        """Each batch's committed manifest, in plan order (None for a batch not committed yet)."""
        return [self.read_manifest(b) for b in plan.batches]

    def pending_batches(self, plan: Plan) -> list[Batch]:
        return [b for b in plan.batches if self.read_manifest(b) is None]
