"""A snapshot batch's Parquet files into the current-state Delta table, as one transaction.

The Spark tasks write their files straight into the batch's partition folder
(``<table>/current/_batch=<n>/``); nothing reads them until the driver commits one Delta transaction
that replaces the partition ``_batch = n`` with exactly these files. A re-run of the batch (a retry,
one mapped task cleared in the UI) therefore replaces its rows atomically and touches no other
batch; the files of older attempts stay on disk until a vacuum, because readers of older table
versions may still need them.

Why not a write of rows: the rows never pass through the driver. The files are committed as they are,
each with its Parquet footer, from which the table format takes the statistics readers skip files by
(``TableVersion.replace_partition``; for Delta, ``lake.format.delta_table.file_stats``).

Batches of one table commit at the same time (parallel mapped tasks). delta-rs reports a commit that
raced another as a conflict (``TableCommitConflictError``) even for disjoint partitions, and only one
of two first commits can create the table, so each commit reloads the table and retries, a bounded
number of times. The first batch to commit creates the table with its files in the same commit (one
transaction, not a creation and then a replacement: a whole database's small tables are each made by
one batch). Replacing a partition does not evolve the table's schema by itself (delta-rs leaves
columns it does not know silently unread), so a batch with new columns (an ADD COLUMN during the
snapshot) adds them first, nullable; a column a batch lacks reads as null.

A column whose type changed between batches (a DDL between the reads of two batches, which the stream
applies later at its offset) takes a type holding both (``delta_schema.wider``: INT and BIGINT as BIGINT,
DECIMAL(10,2) and DECIMAL(12,4) as DECIMAL(12,4)): the table's batches are rewritten with it first, in a
commit of their own (``current_ddl.widen_current``), or this batch's files are, before they are
committed. Types no type holds exactly (VARCHAR and INT) are a ``SchemaChangeError``: the table must be
snapshotted anew.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.exceptions import SchemaChangeError, SnapshotJobError, TableCommitConflictError
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, wider
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, DataFile
from airflow_provider_mysqlcdc.lake.write.current_ddl import widen_current

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import TableVersion
    from airflow_provider_mysqlcdc.lake.handle import LakeTable

COMMIT_TRIES = 10


class BatchCommitConflictError(SnapshotJobError):
    """A batch's Delta commit kept losing to concurrent commits of the same table."""


def table_schema(file_schema: pa.Schema) -> pa.Schema:
    """The current-state table's schema for files of ``file_schema``: every column nullable (a column
    added later, or a zero date, is null in older files), then the partition column."""
    fields = [f.with_nullable(True) for f in file_schema if f.name != BATCH_COLUMN]
    return pa.schema([*fields, pa.field(BATCH_COLUMN, pa.int32())])


def data_file(table: LakeTable, relative: str) -> DataFile:
    """One Parquet file of a partition of the table's current state (path relative to it),
    with its footer, read through the lake's filesystem."""
    fs, path = table.lake.fs, f"{table.current_dir}/{relative}"
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File or info.size is None:
        raise SnapshotJobError(f"the Parquet file {path} of this attempt is missing: a Spark task's output was lost "
                               f"(a local base_uri with a cluster master?); retry the task")
    with fs.open_input_file(path) as handle:
        footer = pq.read_metadata(handle)
    modified = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
    return DataFile(relative, info.size, modified, footer)


def replace_partition(
    table: LakeTable, batch_number: int, files: list[DataFile], file_schema: pa.Schema, metadata: Mapping[str, str],
) -> int:
    """One transaction that makes ``files`` the only files of partition ``batch_number`` of the table's
    current state, creating the table on first use and adding the batch's new columns first. Returns the
    table version the commit made."""
    schema = table_schema(file_schema)
    current = table.current
    tag = CommitTag(metadata=metadata)
    for attempt in range(1, COMMIT_TRIES + 1):
        try:
            # from the log: a table not there yet is found so without delta-rs's attempt to load it (1 ms of each of
            # a database's small tables); delta-rs loads an existing one at its first use below
            opened = current.open(from_log=True)
            if opened is None:  # the table's first batch to commit creates it (another may win that race)
                return current.create_with_partition(BATCH_COLUMN, batch_number, files, schema, tag)
            opened, files, schema = _common_types(opened, table, files, schema, batch_number)
            return opened.replace_partition(BATCH_COLUMN, batch_number, files, opened.add_columns(schema), tag)
        except TableCommitConflictError as error:
            if attempt == COMMIT_TRIES:
                raise BatchCommitConflictError(
                    f"batch {batch_number} of {table.id} could not commit to {current.uri}: {COMMIT_TRIES} tries lost "
                    f"to concurrent commits of the same table ({error}); retry the task, or run fewer of this "
                    f"table's batches at once (max_active_tis_per_dagrun on the snapshot task)"
                ) from error
            time.sleep(random.uniform(0.05, 0.2) * attempt)  # noqa: S311  (jitter, not a secret)
    raise AssertionError("unreachable")


def _common_types(opened: TableVersion, table: LakeTable, files: list[DataFile], schema: pa.Schema,
                  batch_number: int) -> tuple[TableVersion, list[DataFile], pa.Schema]:
    """The table (as opened), the batch's files and their schema with one type for each column both have
    (the module docstring): the table's batches widened by a commit of their own, or the batch's files
    rewritten. Refuses columns no type holds exactly."""
    if not opened.differing_types(schema):
        return opened, files, schema
    stored = opened.schema()
    changed = [f for f in schema if f.name in stored.names and opened.differing_types(pa.schema([f]))]
    common = {f.name: _holding_both(stored.field(f.name).type, f.type) for f in changed}
    refused = [f"{f.name} {stored.field(f.name).type} -> {f.type}" for f in changed if common[f.name] is None]
    if refused:
        raise SchemaChangeError(
            f"batch {batch_number} of {table.id} read columns of other types than the batches committed before it "
            f"({', '.join(refused)}), and no type holds the values of both: its table {table.current.uri} cannot "
            f"hold them together. Re-snapshot the table (delete its folder {table.folder} and run the DAG again)"
        )
    types = {name: t for name, t in common.items() if t is not None}
    widen = {name: t for name, t in types.items() if t != stored.field(name).type}
    if widen:
        widen_current(table.current, opened, widen, CommitTag(metadata={
            "mysql_cdc.operation": "snapshot batch widens columns", "mysql_cdc.table": str(table.id),
            "mysql_cdc.batch": str(batch_number), "mysql_cdc.columns": ", ".join(sorted(widen))}))
        reopened = table.current.open()
        assert reopened is not None  # it was just rewritten
        opened = reopened
    cast = {name: t for name, t in types.items() if t != schema.field(name).type}
    if cast:
        schema = pa.schema([f.with_type(cast[f.name]) if f.name in cast else f for f in schema])
        files = [_cast_file(table, file, schema) for file in files]
    return opened, files, schema


def _holding_both(stored: pa.DataType, read: pa.DataType) -> pa.DataType | None:
    """The type that holds every value of both (``wider``) when there is one: integers, floats, decimals."""
    if not (pa.types.is_floating(stored) and pa.types.is_floating(read)
            or all(pa.types.is_integer(t) or pa.types.is_decimal128(t) for t in (stored, read))):
        return None
    common = wider(stored, read)
    return None if pa.types.is_string(common) else common


def _cast_file(table: LakeTable, file: DataFile, schema: pa.Schema) -> DataFile:
    """This attempt's Parquet file (not committed yet) rewritten in place with ``schema``'s types, a row group
    at a time."""
    fs, path = table.lake.fs, f"{table.current_dir}/{file.path}"
    written = f"{path}.cast"
    with fs.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        target = pa.schema([schema.field(name) for name in parquet.schema_arrow.names])
        with pq.ParquetWriter(written, target, filesystem=fs, compression="snappy") as writer:
            for group in range(parquet.num_row_groups):
                writer.write_table(parquet.read_row_group(group).cast(target))
    fs.move(written, path)
    return data_file(table, file.path)
