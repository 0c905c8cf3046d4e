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
snapshot) adds them first, nullable; a column a batch lacks reads as null. A column whose type changed
between batches is a ``SchemaChangeError``: the table must be snapshotted anew.
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
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, DataFile

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
            evolved = _evolve(opened, table, schema, batch_number)
            return opened.replace_partition(BATCH_COLUMN, batch_number, files, evolved, tag)
        except TableCommitConflictError as error:
            if attempt == COMMIT_TRIES:
                raise BatchCommitConflictError(
                    f"batch {batch_number} of {table.id} could not commit to {current.uri}: {COMMIT_TRIES} tries lost "
                    f"to concurrent commits of the same table ({error}); retry the task, or run fewer of this "
                    f"table's batches at once (max_active_tis_per_dagrun on the snapshot task)"
                ) from error
            time.sleep(random.uniform(0.05, 0.2) * attempt)  # noqa: S311  (jitter, not a secret)
    raise AssertionError("unreachable")


def _evolve(opened: TableVersion, table: LakeTable, schema: pa.Schema, batch_number: int) -> pa.Schema:
    """Add the batch's columns the table lacks; refuse a column whose stored type differs. Returns the
    table's schema after that (the schema to commit with: it keeps columns this batch lacks)."""
    changed = opened.differing_types(schema)
    if changed:
        raise SchemaChangeError(
            f"batch {batch_number} of {table.id} read columns of other types than the batches committed before it "
            f"({', '.join(changed)}), which its table {table.current.uri} cannot hold together: re-snapshot the "
            f"table (delete its folder {table.folder} and run the DAG again)"
        )
    return opened.add_columns(schema)
