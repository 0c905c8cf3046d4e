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

from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.lake.storage import Lake


@dataclass(frozen=True)
class Batch:
    """A contiguous run of chunks of one table, read by one Spark job (one mapped task)."""

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

    def to_dict(self) -> dict[str, Any]:
        return {"table": str(self.table), "number": self.number, "first_chunk": self.first_chunk,
                "last_chunk": self.last_chunk, "batch_id": self.batch_id, "label": self.label}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Batch:
        return cls(TableId.parse(d["table"]), d["number"], d["first_chunk"], d["last_chunk"])


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

    def pending_batches(self, plan: Plan) -> list[Batch]:
        return [b for b in plan.batches if self.read_manifest(b) is None]
