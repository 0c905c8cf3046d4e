"""A lake of ``shop.orders`` built on a local folder without a server, for the tests of what reads it.

``Lakes`` writes the current state as the snapshot and the MERGE write it (source and metadata columns,
``_batch`` partitions, the MERGE's application transaction) and the stream's batches through the stream's
own writers; ``transaction`` and ``insert`` / ``update`` / ``delete`` spell a transaction's change records
as the binlog reader numbers them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.changelog import changes_table, with_snapshot_metadata
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import (
    BatchManifest,
    ChunkResult,
    Plan,
    SnapshotStore,
    group_batches,
)
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, MERGE_APP_ID, for_delta
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaVersion
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

ORDERS = TableId("shop", "orders")
ID = Column("id", "int", "int(11)", nullable=False)
NAME = Column("name", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
QTY = Column("qty", "int", "int(11)")
SCHEMA = TableSchema(ORDERS, (ID, NAME, QTY), ("id",))


def off(file: int, pos: int, events: int = 0, rows: int = 0) -> BinlogOffset:
    return BinlogOffset(f"mysql-bin.{file:06d}", pos, events_to_skip=events, rows_to_skip=rows)


def transaction(
    file: int, pos: int, *changes: tuple[ChangeKind, tuple[Any, ...]], ts_ms: int = 1_000, table: TableId = ORDERS
) -> list[ChangeRecord]:
    """The records of one transaction starting at ``file:pos``, one row event per change, as the binlog
    reader numbers them (an update is a ``-U`` and a ``+U`` of the same row)."""
    records: list[ChangeRecord] = []
    event = 0
    for op, values in changes:
        records.append(ChangeRecord(op, table, values, off(file, pos, event, 1), ts_ms))
        if op is not ChangeKind.UPDATE_BEFORE:
            event += 1
    return records


def insert(values: tuple[Any, ...]) -> tuple[ChangeKind, tuple[Any, ...]]:
    return ChangeKind.INSERT, values


def update(before: tuple[Any, ...], after: tuple[Any, ...]) -> list[tuple[ChangeKind, tuple[Any, ...]]]:
    return [(ChangeKind.UPDATE_BEFORE, before), (ChangeKind.UPDATE_AFTER, after)]


def delete(values: tuple[Any, ...]) -> tuple[ChangeKind, tuple[Any, ...]]:
    return ChangeKind.DELETE, values


class Lakes:
    """Writes the current state and stream batches of ``shop.orders`` under one base URI."""

    def __init__(self, base_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.base_uri = base_uri
        self.monkeypatch = monkeypatch
        self.snapshots = SnapshotStore(Lake.at(base_uri))
        self.stream = StreamStore(Lake.at(base_uri))

    def plan(self, chunks: list[Chunk], chunks_per_batch: int = 1, schema: TableSchema = SCHEMA) -> Plan:
        plan = Plan(schema, chunks, group_batches(schema.id, chunks, chunks_per_batch))
        self.snapshots.write_plan(plan)
        return plan

    def current(
        self, rows: list[tuple[Any, ...]], high_watermark: BinlogOffset, batch: int = 0, schema: TableSchema = SCHEMA,
    ) -> None:
        """Commit snapshot batch ``batch`` of the current state (replacing its partition), as the snapshot does."""
        table = pa.Table.from_pylist([dict(zip(schema.column_names, v, strict=True)) for v in rows],
                                     arrow_schema(schema))
        self.current_rows(with_snapshot_metadata(table, schema, high_watermark), batch, schema)

    def current_rows(self, rows: pa.Table, batch: int = 0, schema: TableSchema = SCHEMA,
                     merged: int | None = None) -> None:
        """Commit lake rows (with their metadata) as partition ``batch``; with ``merged``, as a MERGE of the
        stream batches up to that number."""
        rows = rows.append_column(BATCH_COLUMN, pa.repeat(pa.scalar(batch, pa.int32()), rows.num_rows))
        uri = table_uri(self.base_uri, schema.id)
        exists = DeltaTable.is_deltatable(uri)
        properties = CommitProperties(app_transactions=[Transaction(MERGE_APP_ID, merged)]) if merged else None
        write_deltalake(uri, for_delta(rows), mode="overwrite", partition_by=[BATCH_COLUMN],
                        predicate=f"{BATCH_COLUMN} = {batch}" if exists else None, commit_properties=properties)

    def commit_stream(
        self, seq: int, offset: BinlogOffset, *parts: tuple[TableSchema, list[ChangeRecord]],
        schema: TableSchema = SCHEMA,
    ) -> Checkpoint:
        """Commit stream batch ``seq`` ending at ``offset``: ``parts`` are runs of records under one schema. The
        batches before stay recorded as writing their tables (``touched``), as the stream's checkpoint keeps them."""
        before = self.stream.read_checkpoint()
        checkpoint = Checkpoint(seq=seq, offset=offset, schemas={schema.id: schema},
                                touched=before.touched if before is not None else {})
        changes: dict[TableId, list[pa.Table]] = {}
        for part_schema, records in parts:
            changes.setdefault(part_schema.id, []).append(changes_table(records, part_schema))
        self.stream.commit(checkpoint, changes)
        return checkpoint

    def killed_stream(self, seq: int, offset: BinlogOffset, *parts: tuple[TableSchema, list[ChangeRecord]],
                      schema: TableSchema = SCHEMA) -> None:
        """A stream run killed after batch ``seq``'s Delta commits, before its checkpoint."""

        def killed(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt("killed before the checkpoint")

        with self.monkeypatch.context() as m:
            m.setattr(Lake, "write_json", killed)
            with pytest.raises(KeyboardInterrupt):
                self.commit_stream(seq, offset, *parts, schema=schema)

    def changelog(self, table: TableId = ORDERS) -> DeltaTable:
        """The table's changelog as delta-rs opens it (these tests look at the Delta table the stream wrote)."""
        changelog = self.stream.changelog(table)
        assert isinstance(changelog, DeltaVersion)
        return changelog.delta


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def committed_batch(lake: Lakes, rows: list[tuple[int, str, int]], high_watermark: BinlogOffset) -> BatchManifest:
    """Snapshot batch 0 of shop.orders committed to the current table with its manifest, as the Spark
    driver does."""
    plan = lake.plan([Chunk(ORDERS, 0, None, None)])
    lake.current(rows, high_watermark)
    chunk = ChunkResult(plan.chunks[0], len(rows), 0, off(1, 100), high_watermark, "_batch=0/part-0.parquet")
    version = DeltaTable(table_uri(lake.base_uri, ORDERS)).version()
    manifest = BatchManifest(plan.batches[0], "a1", SCHEMA, (chunk,), 4096, 1.5, version)
    SnapshotStore(Lake.at(lake.base_uri)).write_manifest(manifest)
    return manifest
