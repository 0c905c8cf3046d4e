"""The binlog stream's output and checkpoint in the lake, committed so that every change lands once.

Layout under the base URI::

    _stream/checkpoint.json                        sequence number, offset, tables, schemas, chunk HWs
    <db>/<table>/changes/seq=<n>.<part>.parquet    the table's changes of stream batch n (a part per schema)

A stream batch writes its change files, named by the batch's sequence number, then the checkpoint
that names that number: the commit. Readers take files up to the checkpoint's number only. A run
killed anywhere restarts from the checkpoint's offset and writes the same sequence number again,
replacing any file the killed run left, so nothing is lost or doubled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.lake.storage import Lake


@dataclass(frozen=True)
class StoppedTable:
    """A table taken out of ``tables``: its schema, the offset up to which its changes are in the lake,
    and its chunks with HWs raised to that offset (the form of ``Checkpoint.chunks``), so that its
    replica stays readable and capturing it again resumes exactly there."""

    schema: TableSchema
    offset: BinlogOffset
    chunks: list[list[Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema.to_dict(), "offset": self.offset.to_dict(), "chunks": self.chunks}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StoppedTable:
        return cls(TableSchema.from_dict(d["schema"]), BinlogOffset.from_dict(d["offset"]), d["chunks"])


@dataclass
class Checkpoint:
    """Where the stream is. ``schemas`` are the captured tables; ``chunks`` holds, per table still in
    its snapshot phase, the finished chunks as ``[start, end, high watermark]`` (JSON forms); a table
    past its highest HW drops them. ``stopped`` remembers the tables no longer captured."""

    seq: int
    offset: BinlogOffset
    schemas: dict[TableId, TableSchema]
    chunks: dict[TableId, list[list[Any]]] = field(default_factory=dict)
    updated_at: str = ""
    stopped: dict[TableId, StoppedTable] = field(default_factory=dict)

    def schema_of(self, table: TableId) -> TableSchema | None:
        """The table's latest schema known to the stream, captured or stopped."""
        if table in self.schemas:
            return self.schemas[table]
        return self.stopped[table].schema if table in self.stopped else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "offset": self.offset.to_dict(),
            "schemas": {str(t): s.to_dict() for t, s in self.schemas.items()},
            "chunks": {str(t): c for t, c in self.chunks.items()},
            "updated_at": self.updated_at,
            "stopped": {str(t): s.to_dict() for t, s in self.stopped.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Checkpoint:
        return cls(
            seq=d["seq"],
            offset=BinlogOffset.from_dict(d["offset"]),
            schemas={TableId.parse(t): TableSchema.from_dict(s) for t, s in d["schemas"].items()},
            chunks={TableId.parse(t): c for t, c in d["chunks"].items()},
            updated_at=d.get("updated_at", ""),
            stopped={TableId.parse(t): StoppedTable.from_dict(s) for t, s in d.get("stopped", {}).items()},
        )


class StreamStore:
    """The stream's files under ``base_uri``; a writer passes its lease's check as ``fence``, which
    every commit calls right before the checkpoint that makes the batch visible."""

    def __init__(self, base_uri: str, fence: Callable[[], None] | None = None) -> None:
        self.base_uri = base_uri
        self.lake = Lake.at(base_uri)
        self.fence = fence

    @property
    def checkpoint_path(self) -> str:
        return self.lake.path("_stream", "checkpoint.json")

    def changes_dir(self, table: TableId) -> str:
        return self.lake.path(table.database, table.table, "changes")

    def changes_file(self, table: TableId, seq: int, part: int) -> str:
        return f"{self.changes_dir(table)}/seq={seq:010d}.{part:03d}.parquet"

    def read_checkpoint(self) -> Checkpoint | None:
        document = self.lake.read_json(self.checkpoint_path)
        return Checkpoint.from_dict(document) if document is not None else None

    def commit(self, checkpoint: Checkpoint, changes: dict[TableId, list[pa.Table]]) -> None:
        """Write the batch's change files (one per table and schema), then the checkpoint naming them."""
        for table, parts in changes.items():
            self.lake.fs.create_dir(self.changes_dir(table), recursive=True)
            for part, rows in enumerate(parts):
                pq.write_table(rows, self.changes_file(table, checkpoint.seq, part), filesystem=self.lake.fs,
                               compression="snappy")
        if self.fence is not None:
            self.fence()
        checkpoint.updated_at = dt.datetime.now(dt.timezone.utc).isoformat()
        self.lake.write_json(self.checkpoint_path, checkpoint.to_dict())

    def discard_uncommitted(self, checkpoint: Checkpoint) -> int:
        """Delete the change files a killed run wrote past ``checkpoint``; returns how many.

        A restarted run writes the same sequence numbers again, but not necessarily the same files:
        its batch may close earlier (on time) or before a schema change, so a part or a table the
        killed run wrote may not be written again, and it would count once a later checkpoint covers
        its number. The stream calls this before its first commit.
        """
        stale = [f for t in checkpoint.schemas for f in self._change_files(t) if _seq_of(f) > checkpoint.seq]
        for path in stale:
            self.lake.fs.delete_file(path)
        return len(stale)

    def committed_change_files(self, table: TableId, checkpoint: Checkpoint | None) -> list[str]:
        """The table's change files up to ``checkpoint`` (later ones are a killed run's leftovers)."""
        if checkpoint is None:
            return []
        return [f for f in self._change_files(table) if _seq_of(f) <= checkpoint.seq]

    def _change_files(self, table: TableId) -> list[str]:
        import pyarrow.fs as pafs

        if not self.lake.exists(self.changes_dir(table)):
            return []
        infos = self.lake.fs.get_file_info(pafs.FileSelector(self.changes_dir(table)))
        return sorted(i.path for i in infos if i.path.endswith(".parquet") and "/seq=" in i.path)


def _seq_of(path: str) -> int:
    return int(path.rsplit("seq=", 1)[1].split(".")[0])
