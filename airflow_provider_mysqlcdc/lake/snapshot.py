"""The snapshot in the lake: one plan per table, batches of chunks, and a manifest per batch.

Layout under the base URI, per table::

    <db>/<table>/snapshot/_plan.json                     schema, chunks, batches (written once)
    <db>/<table>/snapshot/batch=<n>/attempt=<id>/*.parquet
    <db>/<table>/snapshot/batch=<n>/_manifest.json       the committed attempt: files, chunks, LW/HW

A batch commits by writing its manifest, after its Parquet files: a reader follows manifests only,
so the files of a failed or killed attempt are never mistaken for data, and a re-run of the batch
(a retry, or one map index cleared in the UI) replaces the manifest and then removes every other
attempt of that batch, and touches nothing else. The plan is kept so that a re-run after a failure
keeps the same chunks and batch ids and skips the batches already committed; the snapshot of a
table is finished when every batch of its plan has a manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.server_id import ServerIdRange, snapshot_server_id
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError
from airflow_provider_mysqlcdc.lake.storage import Lake


@dataclass(frozen=True)
class Batch:
    """A contiguous run of chunks of one table, read by one Spark job (one mapped task).

    ``first_reader`` and ``readers`` are the binlog server ids of one DAG run (not part of the plan,
    and not compared): the split task gives the batch ``readers`` indexes of the connection's
    ``server_id`` range from ``first_reader`` on (``cdc.server_id.assign_snapshot_readers``), and its
    Spark job runs at most that many tasks, task ``i`` reading with index ``first_reader + i``. They
    travel in the batch's XCom dict, so a re-run of one cleared batch keeps its ids.
    """

    table: TableId
    number: int
    first_chunk: int
    last_chunk: int
    first_reader: int | None = field(default=None, compare=False)
    readers: int | None = field(default=None, compare=False)

    @property
    def batch_id(self) -> str:
        return f"{self.table}:{self.number}"

    @property
    def label(self) -> str:
        return f"{self.table} chunks {self.first_chunk}-{self.last_chunk}"

    @property
    def chunk_count(self) -> int:
        return self.last_chunk - self.first_chunk + 1

    def with_readers(self, first_reader: int, readers: int) -> Batch:
        return replace(self, first_reader=first_reader, readers=readers)

    def spark_tasks(self, partitions: int = 0) -> int:
        """How many Spark tasks (binlog readers at once) the batch's job runs: ``partitions`` if given,
        else its ``readers``; never more than its readers, nor than its chunks."""
        if self.first_reader is None or self.readers is None:
            raise SnapshotStateError(
                f"the batch {self.label} has no binlog server ids assigned (no 'first_reader'/'readers' in its "
                f"XCom): it comes from a split task of an older version of this provider; clear the split task "
                f"of this DAG run with its downstream tasks (or trigger a new run) so that it assigns them"
            )
        if partitions < 0 or partitions > self.readers:
            raise InvalidOptionError(
                f"partitions={partitions} for {self.label}, but its Spark job may run at most {self.readers} tasks "
                f"at once, the binlog readers the split task gave it server ids for: leave partitions at 0, or "
                f"raise readers_per_batch on the split task (and widen the connection's server_id range)"
            )
        return min(partitions or self.readers, self.chunk_count)

    def server_id(self, ids: ServerIdRange, task: int) -> int:
        """The binlog server id of the job's Spark task ``task`` (0-based), from the connection's range."""
        self.spark_tasks()
        assert self.first_reader is not None and self.readers is not None  # checked by spark_tasks
        return snapshot_server_id(ids, self.first_reader, self.readers, task)

    def to_dict(self) -> dict[str, Any]:
        return {"table": str(self.table), "number": self.number, "first_chunk": self.first_chunk,
                "last_chunk": self.last_chunk, "batch_id": self.batch_id, "label": self.label,
                "first_reader": self.first_reader, "readers": self.readers}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Batch:
        """Also reads dicts of older versions, without ``first_reader``/``readers`` (manifests keep
        them); :meth:`spark_tasks` refuses to run such a batch."""
        return cls(TableId.parse(d["table"]), d["number"], d["first_chunk"], d["last_chunk"],
                   d.get("first_reader"), d.get("readers"))


@dataclass(frozen=True)
class Plan:
    schema: TableSchema
    chunks: list[Chunk]
    batches: list[Batch]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema.to_dict(),
            "chunks": [c.to_dict() for c in self.chunks],
            "batches": [[b.number, b.first_chunk, b.last_chunk] for b in self.batches],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        schema = TableSchema.from_dict(d["schema"])
        return cls(schema, [Chunk.from_dict(c) for c in d["chunks"]],
                   [Batch(schema.id, n, first, last) for n, first, last in d["batches"]])

    def chunks_of(self, batch: Batch) -> list[Chunk]:
        return self.chunks[batch.first_chunk : batch.last_chunk + 1]


def batch_read_with(manifests: list[dict[str, Any]], plan: Plan, latest: bool) -> TableSchema:
    """The columns the batch with the lowest (or, ``latest``, highest) high watermark was read with: a
    table altered during its snapshot has batches of two schemas (a manifest without one: the plan's)."""
    def high_watermark(manifest: dict[str, Any]) -> BinlogOffset:
        return max(BinlogOffset.from_dict(r["high_watermark"]) for r in manifest["chunks"])

    if not manifests:
        return plan.schema
    chosen = (max if latest else min)(manifests, key=high_watermark)
    return TableSchema.from_dict(chosen["schema"]) if "schema" in chosen else plan.schema


def group_batches(table: TableId, chunks: list[Chunk], chunks_per_batch: int) -> list[Batch]:
    return [
        Batch(table, number, first, min(first + chunks_per_batch, len(chunks)) - 1)
        for number, first in enumerate(range(0, len(chunks), chunks_per_batch))
    ]


class SnapshotStore:
    """Plans and batch manifests of the tables under one base URI."""

    def __init__(self, base_uri: str) -> None:
        self.base_uri = base_uri
        self.lake = Lake.at(base_uri)

    def _dir(self, table: TableId) -> str:
        return self.lake.path(table.database, table.table, "snapshot")

    def batch_dir(self, batch: Batch) -> str:
        return f"{self._dir(batch.table)}/batch={batch.number}"

    def attempt_dir(self, batch: Batch, attempt: str) -> str:
        return f"{self.batch_dir(batch)}/attempt={attempt}"

    def read_plan(self, table: TableId) -> Plan | None:
        document = self.lake.read_json(f"{self._dir(table)}/_plan.json")
        return Plan.from_dict(document) if document is not None else None

    def write_plan(self, plan: Plan) -> None:
        self.lake.write_json(f"{self._dir(plan.schema.id)}/_plan.json", plan.to_dict())

    def read_manifest(self, batch: Batch) -> dict[str, Any] | None:
        document = self.lake.read_json(f"{self.batch_dir(batch)}/_manifest.json")
        return document if isinstance(document, dict) else None

    def commit(self, batch: Batch, manifest: dict[str, Any]) -> None:
        """Make ``manifest`` (naming its attempt) the batch's output, then drop the other attempts."""
        self.lake.write_json(f"{self.batch_dir(batch)}/_manifest.json", manifest)
        keep = self.attempt_dir(batch, manifest["attempt"])
        for directory in self.lake.list_dirs(self.batch_dir(batch)):
            if directory.rstrip("/") != keep:
                self.lake.delete_dir(directory)

    def manifests(self, plan: Plan) -> list[dict[str, Any] | None]:
        """Each batch's committed manifest, in plan order (None for a batch not committed yet)."""
        return [self.read_manifest(b) for b in plan.batches]

    def pending_batches(self, plan: Plan) -> list[Batch]:
        return [b for b in plan.batches if self.read_manifest(b) is None]
