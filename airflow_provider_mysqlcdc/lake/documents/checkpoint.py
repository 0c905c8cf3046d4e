"""The stream's checkpoint: where the stream is, the commit point of its batches, and its format's upgrades.

``_stream/checkpoint.json`` holds the format version, the batch's sequence number and offset, the captured
tables (their schemas named by the refs of their documents, ``lake.documents.schema_documents``), the finished
chunks of the tables still in their snapshot phase, the stopped tables, and per table the last batch that
wrote its changelog. ``StreamStore`` (``lake.write.stream_commit``) writes it after a batch's changelog
commits and reads it back; every earlier format is upgraded step by step as read (``lake.documents.versions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.exceptions import LakeFormatError
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat


def _chunk_2_to_3(chunk: Any) -> Any:
    """A finished chunk as ``[start, end, high watermark]`` (the first form of version 2) as ``{s, e, hw}``."""
    return {"s": chunk[0], "e": chunk[1], "hw": chunk[2]} if isinstance(chunk, list) else chunk


def _checkpoint_2_to_3(d: dict[str, Any]) -> dict[str, Any]:
    """Version 2 got fields one by one under the same number, none of them released: finished chunks as
    ``[start, end, hw]`` lists until 362b35d, stopped tables without ``ddl`` (and with a version of their
    own) until 05122bd, no ``visible_seq``/``visible_offset`` (visible up to its own batch) until 8756d12,
    no ``history_from`` until a517b08, no ``kept`` until f60e00f. Version 3 has every field. (Schemas
    without ``key_index``, in every document, are read by ``TableSchema.from_dict``.)"""

    def stopped(s: dict[str, Any]) -> dict[str, Any]:
        return {"schema": s["schema"], "offset": s["offset"], "chunks": [_chunk_2_to_3(c) for c in s["chunks"]],
                "ddl": s.get("ddl", "")}

    return {
        **d,
        "chunks": {t: [_chunk_2_to_3(c) for c in chunks] for t, chunks in d["chunks"].items()},
        "stopped": {t: stopped(s) for t, s in d.get("stopped", {}).items()},
        "visible_seq": d.get("visible_seq", d["seq"]),
        "visible_offset": d.get("visible_offset", d["offset"]),
        "history_from": d.get("history_from", {}),
        "kept": d.get("kept", {}),
    }


def _checkpoint_3_to_4(d: dict[str, Any]) -> dict[str, Any]:
    """Version 3 held every schema in the checkpoint; version 4 names them by the refs of their documents
    (an entry is a ref, or the schema itself as here: the next write stores the documents and names
    them). Version 3 did not track which batch last wrote each table: each table, captured or stopped, is
    taken as written by the checkpoint's last batch (the latest it can have been), so that whoever asks
    about batches before it reads the changelog's history; and the first MERGE looks at every table once."""
    written = {table: d["seq"] for table in (*d["schemas"], *d["stopped"])}
    return {**d, "touched": written, "merged_seq": None}


CHECKPOINT_FORMAT = DocumentFormat(
    "stream checkpoint", version=4, oldest=2, upgrades={2: _checkpoint_2_to_3, 3: _checkpoint_3_to_4},
    unversioned=1,
    retired={1: "the stream's changes as Parquet files beside the checkpoint, from before the changelog Delta "
                "tables, which no release wrote or reads: re-snapshot into a new base_uri (or delete the lake's "
                "folder) and run the DAG again"},
)
"""1 (no ``format_version``): the changes as Parquet files named by sequence number, never released;
2: the changes in each table's changelog Delta table, the fields added one by one (see ``_checkpoint_2_to_3``);
3: every field present; 4: schemas named by the refs of their documents, ``touched`` and ``merged_seq``."""

SchemaEntry = str | dict[str, Any]
"""A schema in the checkpoint document: the ref of its document, or (read from format 3, or written
without a lake) the schema itself."""


def _entry(schema: TableSchema, ref: Callable[[TableSchema], str] | None) -> SchemaEntry:
    return schema.to_dict() if ref is None else ref(schema)


@dataclass(frozen=True)
class StoppedTable:
    """A table taken out of ``tables``: its schema, the offset up to which its changes are in the lake,
    and its chunks with HWs raised to that offset (the form of ``Checkpoint.chunks``), so that its
    replica stays readable and capturing it again resumes exactly there."""

    schema: TableSchema
    offset: BinlogOffset
    chunks: list[FinishedChunkInfo]
    ddl: str = ""
    """The statement that stopped it at ``offset`` (``DROP TABLE``, ``RENAME TABLE`` away), or empty for a
    table taken out of ``tables``. Such a table stays stopped while it is in ``tables``, until a DDL
    creates it or renames a table to its name (the stream then captures it again)."""

    def to_dict(self, ref: Callable[[TableSchema], str] | None = None) -> dict[str, Any]:
        """A part of the checkpoint (versioned with it); ``ref`` names the schema by its document."""
        return {"schema": _entry(self.schema, ref), "offset": self.offset.to_dict(),
                "chunks": [c.to_dict() for c in self.chunks], "ddl": self.ddl}

    @classmethod
    def from_dict(cls, d: dict[str, Any], schema: Callable[[SchemaEntry], TableSchema]) -> StoppedTable:
        return cls(schema(d["schema"]), BinlogOffset.from_dict(d["offset"]),
                   [FinishedChunkInfo.from_dict(c) for c in d["chunks"]], d["ddl"])


@dataclass
class Checkpoint:
    """Where the stream is. ``schemas`` are the captured tables; ``chunks`` holds, per table still in
    its snapshot phase, its finished chunks (key range and HW; in the JSON ``{"s", "e", "hw"}``); a
    table past its highest HW drops them. ``stopped`` remembers the tables no longer captured."""

    seq: int
    offset: BinlogOffset
    schemas: dict[TableId, TableSchema]
    chunks: dict[TableId, list[FinishedChunkInfo]] = field(default_factory=dict)
    updated_at: str = ""
    stopped: dict[TableId, StoppedTable] = field(default_factory=dict)
    visible_seq: int | None = None
    """The last batch that ends at a transaction boundary (None: ``seq``). A transaction larger than a batch
    is committed in parts, each checkpointed (memory stays bounded and a restart resumes inside it); the
    MERGE and the readers take the changelog up to this batch only, so nobody sees part of a transaction."""
    visible_offset: BinlogOffset | None = None
    """Where ``visible_seq`` ends (None: ``offset``)."""
    history_from: dict[TableId, BinlogOffset] = field(default_factory=dict)
    """Per table whose rows a DDL replaced without row events (TRUNCATE; a re-read after a DDL that gave
    rows values): the position from which its changelog and current table tell its whole history. As-of
    reads before it are refused (``lake.read.as_of_read``): the rows it replaced have no before images."""
    kept: dict[TableId, TableSchema] = field(default_factory=dict)
    """Per table whose DDL ``schema_change_behavior='ignore'`` passed over: the columns its lake tables keep
    (its schema before the first DDL ignored). Its changes are decoded with ``schemas`` (the server's
    columns) and written as these: a column the source added is left out, one it dropped is NULL."""
    touched: dict[TableId, int] = field(default_factory=dict)
    """Per table, the last batch that wrote changelog rows of it (read from format 3: every table at the
    checkpoint's ``seq``, not known better). A table not in it has no changelog rows."""
    merged_seq: int | None = None
    """Every table's changelog rows up to this batch are merged into its current table (None: not known,
    the next MERGE looks at every table). A table ``touched`` at or before it has nothing to merge."""
    FORMAT: ClassVar[DocumentFormat] = CHECKPOINT_FORMAT

    def __post_init__(self) -> None:
        if self.visible_seq is None or self.visible_offset is None:
            self.visible_seq, self.visible_offset = self.seq, self.offset

    @property
    def visible(self) -> tuple[int, BinlogOffset]:
        """``visible_seq`` and ``visible_offset``: what readers may take of the changelog, and up to where."""
        assert self.visible_seq is not None and self.visible_offset is not None  # set in __post_init__
        return self.visible_seq, self.visible_offset

    def wrote_after(self, table: TableId, seq: int) -> bool:
        """Whether a batch after ``seq`` may have written changelog rows of ``table`` (False: none did, its
        changelog's history need not be read; True: it is where they are counted)."""
        return self.touched.get(table, -1) > seq

    def advance(self, seq: int, offset: BinlogOffset) -> None:
        """Batch ``seq`` committed up to ``offset``: visible too if ``offset`` is a transaction boundary."""
        self.seq, self.offset = seq, offset
        if offset.events_to_skip == 0 and offset.rows_to_skip == 0:
            self.visible_seq, self.visible_offset = seq, offset

    def schema_of(self, table: TableId) -> TableSchema | None:
        """The columns of the table's lake tables, captured or stopped: its latest schema known to the
        stream, or the one its lake keeps (``kept``)."""
        if table in self.kept:
            return self.kept[table]
        if table in self.schemas:
            return self.schemas[table]
        return self.stopped[table].schema if table in self.stopped else None

    def all_schemas(self) -> list[TableSchema]:
        """Every schema the checkpoint names: captured, stopped and kept tables'."""
        return [*self.schemas.values(), *(s.schema for s in self.stopped.values()), *self.kept.values()]

    def to_dict(self, ref: Callable[[TableSchema], str] | None = None) -> dict[str, Any]:
        """The document; ``ref`` names each schema by its document (the store's writes), else each is inline."""
        return self.FORMAT.write({
            "seq": self.seq,
            "offset": self.offset.to_dict(),
            "schemas": {str(t): _entry(s, ref) for t, s in self.schemas.items()},
            "chunks": {str(t): [c.to_dict() for c in chunks] for t, chunks in self.chunks.items()},
            "updated_at": self.updated_at,
            "stopped": {str(t): s.to_dict(ref) for t, s in self.stopped.items()},
            "visible_seq": self.visible[0],
            "visible_offset": self.visible[1].to_dict(),
            "history_from": {str(t): o.to_dict() for t, o in self.history_from.items()},
            "kept": {str(t): _entry(s, ref) for t, s in self.kept.items()},
            "touched": {str(t): seq for t, seq in self.touched.items()},
            "merged_seq": self.merged_seq,
        })

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "",
                  load: Callable[[Iterable[str], str], Mapping[str, TableSchema]] | None = None) -> Checkpoint:
        """The checkpoint of ``document`` (read from ``path``); ``load`` reads the schema documents its refs name."""
        d = cls.FORMAT.read(document, path)
        entries = [*d["schemas"].values(), *(s["schema"] for s in d["stopped"].values()), *d["kept"].values()]
        refs = {e for e in entries if isinstance(e, str)}
        if refs and load is None:
            raise LakeFormatError(f"the stream checkpoint {path} names its schemas by their documents, and none "
                                  f"were given to read them")
        loaded = load(refs, path) if refs and load is not None else {}

        def schema(entry: SchemaEntry) -> TableSchema:
            return loaded[entry] if isinstance(entry, str) else TableSchema.from_dict(entry)

        return cls(
            seq=d["seq"],
            offset=BinlogOffset.from_dict(d["offset"]),
            schemas={TableId.parse(t): schema(s) for t, s in d["schemas"].items()},
            chunks={TableId.parse(t): [FinishedChunkInfo.from_dict(c) for c in chunks]
                    for t, chunks in d["chunks"].items()},
            updated_at=d["updated_at"],
            stopped={TableId.parse(t): StoppedTable.from_dict(s, schema) for t, s in d["stopped"].items()},
            visible_seq=d["visible_seq"],
            visible_offset=BinlogOffset.from_dict(d["visible_offset"]),
            history_from={TableId.parse(t): BinlogOffset.from_dict(o) for t, o in d["history_from"].items()},
            kept={TableId.parse(t): schema(s) for t, s in d["kept"].items()},
            touched={TableId.parse(t): seq for t, seq in d["touched"].items()},
            merged_seq=d["merged_seq"],
        )
