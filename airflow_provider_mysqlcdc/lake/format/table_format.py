"""The table format seam: what the pipeline asks of a replica table's storage, whatever the format.

Each replicated table is two tables of the lake (``lake.handle.LakeTable``: its current state and its
changelog). Every module that writes or reads them does so through the two protocols here, never
through a format's own library, so the format is one choice: ``LakeTable.current`` / ``.changelog``
return a place of the one implementation there is, Delta Lake (``lake.format.delta_table``). A test checks
that no other module imports ``deltalake``.

The operations are those the callers use, no more:

* a **place** (``ReplicaTable``), which may hold no table yet: open it, create it (empty, or from rows),
  append rows under an application transaction, overwrite it whole (a new schema included);
* an **opened table** (``TableVersion``), one version of it: its version, schema, row count and data
  files, reads into Arrow (columns and a filter), which application transaction version it records
  (what makes the stream's appends and the MERGEs idempotent), its commit history, and the commits
  made on top of it: delete by predicate, MERGE by key, replace one partition with files already
  written (the snapshot batch), add columns, and the upkeep (compact, vacuum, log checkpoint, table
  properties).

Predicates and merge conditions are SQL over the table's columns, identifiers in double quotes, the
MERGE's target aliased ``t`` and its source ``s`` (``quote``). A commit that lost a race with
another writer raises ``TableCommitConflictError``; callers decide whether to retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq


@dataclass(frozen=True)
class CommitTag:
    """What a commit records besides its rows: the application transaction ``(app_id, app_version)`` (a
    reader and a retried writer find the last version an application committed; ``app_id`` None: none)
    and metadata of the writer's own (shown in the table's history)."""

    app_id: str | None = None
    app_version: int = -1
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Commit:
    """One entry of a table's history: its version and time, the rows it appended when it was a plain
    append (None otherwise: an overwrite, a MERGE, a delete, upkeep), and the writer's metadata."""

    version: int
    timestamp_ms: int
    appended_rows: int | None
    metadata: Mapping[str, str]


@dataclass(frozen=True)
class DataFile:
    """A Parquet file written into a partition's folder of a table (path relative to the table), with
    its size, time and footer: what a partition replacement commits without reading the rows."""

    path: str
    size: int
    modified_ms: int
    footer: pq.FileMetaData


@dataclass(frozen=True)
class StoredFile:
    """A data file of a table version: its URI, size, partition values, and the lowest and highest value of
    the columns the format keeps statistics of (a column missing: unknown)."""

    uri: str
    size: int
    partition: Mapping[str, Any]
    low: Mapping[str, Any]
    high: Mapping[str, Any]


@dataclass(frozen=True)
class MergeSpec:
    """A MERGE of ``source`` into the table on ``on``: matched rows are deleted where ``delete_when`` holds,
    else updated with every source column where ``update_when`` holds; unmatched source rows are inserted
    where ``insert_when`` holds (None: that clause is left out). Source columns the table lacks are added."""

    source: pa.Table
    on: str
    delete_when: str | None
    update_when: str | None
    insert_when: str | None
    tag: CommitTag


@dataclass(frozen=True)
class MergeCounts:
    """What a MERGE did: rows inserted, updated and deleted, files scanned, added and removed (rewritten)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    files_scanned: int = 0
    files_added: int = 0
    files_removed: int = 0


@dataclass(frozen=True)
class Compaction:
    """What a compaction did: the files it rewrote and the files it wrote instead."""

    files_removed: int
    files_added: int
    metrics: Mapping[str, Any]


SCAN_BATCH_BYTES = 16 * 1024 * 1024
"""About how many stored bytes one batch of ``TableVersion.scan`` holds (rows of megabytes: a few a batch)."""
SCAN_BATCH_ROWS = 65_536
"""Rows of one batch of ``TableVersion.scan`` at most (narrow rows: few batches, little cost per batch)."""


def quote(name: str) -> str:
    """``name`` as an identifier of predicates and merge conditions: in double quotes (unquoted names are
    folded to lower case by delta-rs's SQL, DataFusion)."""
    return '"' + name.replace('"', '""') + '"'


class LakeFiles(Protocol):
    """The lake's filesystem as a format implementation may need it (its log read directly): ``lake.handle.Lake``."""

    @property
    def fs(self) -> pafs.FileSystem: ...

    def path(self, *parts: str) -> str: ...


class TableVersion(Protocol):
    """One version of a replica table, opened; commits made through it land on the newest version."""

    @property
    def uri(self) -> str: ...

    def version(self) -> int: ...

    def schema(self) -> pa.Schema: ...

    def count(self) -> int:
        """The rows, from the files' statistics (no data read)."""
        ...

    def files(self) -> list[StoredFile]: ...

    def read(self, columns: Sequence[str] | None = None, where: pc.Expression | None = None) -> pa.Table: ...

    def scan(self, columns: Sequence[str] | None = None, where: pc.Expression | None = None) -> pa.RecordBatchReader:
        """``read`` as a stream of record batches of about ``SCAN_BATCH_BYTES`` (at most ``SCAN_BATCH_ROWS``
        rows), one row group of one file read at a time: what reads a table larger than memory."""
        ...

    def applied(self, app_id: str) -> int:
        """The last version the application ``app_id`` committed (``CommitTag``), -1 for none."""
        ...

    def history(self, limit: int | None = None) -> list[Commit]:
        """The newest ``limit`` commits (None: all the log keeps), newest first."""
        ...

    def append(self, rows: pa.Table, tag: CommitTag) -> None:
        """``ReplicaTable.append`` to this table (which exists), from this version as loaded (its log is not
        read again: an append that finds the version after taken by another writer reads the log then, and
        commits at the next one, since appends commute)."""
        ...

    def delete(self, predicate: str, tag: CommitTag) -> int:
        """Delete the rows matching ``predicate`` in one commit; the rows deleted."""
        ...

    def merge(self, spec: MergeSpec) -> MergeCounts: ...

    def replace_partition(self, column: str, value: int, files: Sequence[DataFile], schema: pa.Schema,
                          tag: CommitTag) -> int:
        """One commit making ``files`` the only files of the partition ``column = value``, with ``schema`` the
        table's (``differing_types`` empty, ``add_columns`` done); the version that commit made."""
        ...

    def differing_types(self, schema: pa.Schema) -> list[str]:
        """The columns of ``schema`` the table has with another type, as ``"name old -> new"`` in the format's
        type names."""
        ...

    def add_columns(self, schema: pa.Schema) -> pa.Schema:
        """Add ``schema``'s columns the table lacks (nullable); the table's schema after."""
        ...

    def properties(self) -> Mapping[str, str]: ...

    def set_properties(self, properties: Mapping[str, str]) -> bool:
        """Set table properties no table feature depends on, the table's protocol unchanged; False (nothing set)
        where the format cannot do that for this table."""
        ...

    def refresh(self) -> None:
        """Load the newest version."""
        ...

    def compact(self, target_file_bytes: int) -> Compaction: ...

    def vacuum(self, retention_hours: int, full: bool) -> list[str]:
        """Delete the files no version of the last ``retention_hours`` references; the files deleted."""
        ...

    def checkpoint(self) -> None:
        """Write a checkpoint of the log at this version."""
        ...

    def cleanup_log(self) -> None:
        """Delete the log entries the table's retention lets go (and a killed writer's leftovers in the log)."""
        ...


class ReplicaTable(Protocol):
    """Where one replica table is (``LakeTable.current`` / ``.changelog``), whether it exists yet or not."""

    @property
    def uri(self) -> str: ...

    def open(self, from_log: bool = False) -> TableVersion | None:
        """The table's newest version, or None when none has been created yet. ``from_log``: a handle for appends
        and the schema (the stream's changelogs, lineage, a snapshot batch's commit), which may read what those
        need alone and load the rest at its first other use."""
        ...

    def history(self, limit: int | None = None) -> list[Commit] | None:
        """``open().history(limit)``, or None when there is no table: where the format can, read from the history
        alone (an asset watcher's poll and the lineage want a changelog's commits, not its state)."""
        ...

    def commit(self, version: int) -> Commit | None:
        """The commit of ``version`` as ``history`` gives it, read alone; None when the log no longer holds it (or
        does not yet): an as-of read wants one commit's time, not a long-lived table's whole history."""
        ...

    def create_with_partition(self, column: str, value: int, files: Sequence[DataFile], schema: pa.Schema,
                              tag: CommitTag) -> int:
        """A new table, partitioned by ``column``, whose first commit holds ``files`` (written already) as its
        partition ``value``: one commit, version 0, returned. ``TableCommitConflictError`` when another writer
        made the table first."""
        ...

    def create_from(self, rows: pa.Table, partition_by: Sequence[str], tag: CommitTag) -> None:
        """A new table holding ``rows``; an error when there is one already."""
        ...

    def append(self, rows: pa.Table, tag: CommitTag) -> None:
        """Append ``rows`` in one commit (creating the table if there is none); columns the table lacks are
        added."""
        ...

    def overwrite(self, rows: pa.Table | pa.RecordBatchReader, tag: CommitTag,
                  partition_by: Sequence[str] = ()) -> None:
        """Replace the whole table, its schema included, with ``rows`` in one commit (creating it if needed);
        a reader is written as it is read (a table rewritten from its own ``scan``, file by file)."""
        ...
