"""A snapshot batch's Parquet files into the current-state Delta table, as one transaction.

The Spark tasks write their files straight into the batch's partition folder
(``<table>/current/_batch=<n>/``); nothing reads them until the driver commits one Delta transaction
that replaces the partition ``_batch = n`` with exactly these files. A re-run of the batch (a retry,
one mapped task cleared in the UI) therefore replaces its rows atomically and touches no other
batch; the files of older attempts stay on disk until a vacuum, because readers of older table
versions may still need them.

Why not ``write_deltalake``: the rows never pass through the driver. The add actions are built from
the files' Parquet footers instead, with the statistics Delta readers skip files by (``numRecords``,
and min/max/null counts where they are exact: integers, strings, dates; see ``_stat_value``).

Batches of one table commit at the same time (parallel mapped tasks). delta-rs reports a commit that
raced another as ``CommitFailedError`` even for disjoint partitions, and only one of two first
commits can create the table, so each commit reloads the table and retries, a bounded number of
times. ``create_write_transaction`` does not evolve the table's schema by itself (columns it does
not know are silently not read), so a batch with new columns (an ADD COLUMN during the snapshot)
adds them first, nullable; a column a batch lacks reads as null. A column whose type changed between
batches is a ``SchemaChangeError``: the table must be snapshotted anew.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.exceptions import SchemaChangeError, SnapshotJobError
from airflow_provider_mysqlcdc.lake.delta import BATCH_COLUMN

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

    from airflow_provider_mysqlcdc.lake.handle import DeltaLocation, LakeTable

COMMIT_TRIES = 10
MAX_STRING_STAT = 256
"""Longer strings get no min/max statistics: they would bloat the Delta log for little skipping."""


class BatchCommitConflictError(SnapshotJobError):
    """A batch's Delta commit kept losing to concurrent commits of the same table."""


def table_schema(file_schema: pa.Schema) -> pa.Schema:
    """The current-state table's schema for files of ``file_schema``: every column nullable (a column
    added later, or a zero date, is null in older files), then the partition column."""
    fields = [f.with_nullable(True) for f in file_schema if f.name != BATCH_COLUMN]
    return pa.schema([*fields, pa.field(BATCH_COLUMN, pa.int32())])


def add_action(table: LakeTable, relative: str, batch_number: int) -> AddAction:
    """The Delta add action of one Parquet file of partition ``batch_number`` of the table's current state
    (path relative to it), read through the lake's filesystem."""
    from deltalake.transaction import AddAction

    fs, path = table.lake.fs, f"{table.current_dir}/{relative}"
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File or info.size is None:
        raise SnapshotJobError(f"the Parquet file {path} of this attempt is missing: a Spark task's output was lost "
                               f"(a local base_uri with a cluster master?); retry the task")
    with fs.open_input_file(path) as handle:
        metadata = pq.read_metadata(handle)
    modified = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
    return AddAction(relative, info.size, {BATCH_COLUMN: str(batch_number)}, modified, True, file_stats(metadata))


def file_stats(metadata: pq.FileMetaData) -> str:
    """Delta's per-file statistics JSON from a Parquet footer: row count, null counts, and min/max of
    the columns whose Parquet statistics mean the same in Delta."""
    schema = metadata.schema.to_arrow_schema()
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for index, column in enumerate(schema):
        stats = [metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)]
        if any(s is None for s in stats):
            continue
        if all(s.has_null_count for s in stats):
            nulls[column.name] = sum(s.null_count for s in stats)
        bounds = _bounds(column.type, stats)
        if bounds is not None:
            minimum[column.name], maximum[column.name] = bounds
    return json.dumps({"numRecords": metadata.num_rows, "minValues": minimum, "maxValues": maximum,
                       "nullCount": nulls}, separators=(",", ":"))


def _bounds(kind: pa.DataType, stats: list[Any]) -> tuple[Any, Any] | None:
    """The file's (min, max) of one column, or None when any row group has none or they are unsafe."""
    with_values = [s for s in stats if s.has_min_max]
    if not with_values:
        return None
    if len(with_values) < len(stats) and not all(s.null_count == s.num_values for s in stats if not s.has_min_max):
        return None  # a row group with values but without bounds
    low = _stat_value(kind, min(s.min for s in with_values))
    high = _stat_value(kind, max(s.max for s in with_values))
    return None if low is None or high is None else (low, high)


def _stat_value(kind: pa.DataType, value: Any) -> Any:
    """A Parquet statistic as Delta's JSON value, or None where it could mislead a reader: unsigned
    integers (Delta's are signed; a BIGINT UNSIGNED max would wrap), floats (NaN is left out of Parquet
    bounds), decimals, timestamps (Delta keeps milliseconds, which would cut a max below its value),
    binary and booleans."""
    if pa.types.is_signed_integer(kind) and isinstance(value, int):
        return value
    if pa.types.is_string(kind) and isinstance(value, str) and len(value) <= MAX_STRING_STAT:
        return value
    if pa.types.is_date32(kind) and isinstance(value, dt.date):
        return value.isoformat()
    return None


def replace_partition(
    table: LakeTable, batch_number: int, adds: list[AddAction], file_schema: pa.Schema, metadata: Mapping[str, str],
) -> int:
    """One Delta transaction that makes ``adds`` the only files of partition ``batch_number`` of the table's
    current state, creating the table on first use and adding the batch's new columns first (its Delta log
    is read through the lake's filesystem). Returns the table version the commit made."""
    from deltalake.exceptions import CommitFailedError

    schema = table_schema(file_schema)
    current = table.current
    for attempt in range(1, COMMIT_TRIES + 1):
        try:
            delta = _open_or_create(current, schema)
            read_version = delta.version()
            evolved = _evolve(delta, table, schema, batch_number)
            _overwrite(delta, batch_number, adds, evolved, metadata)
            return _version_of(table.lake.fs, table.current_dir, read_version, metadata)
        except CommitFailedError as error:
            if attempt == COMMIT_TRIES:
                raise BatchCommitConflictError(
                    f"batch {batch_number} of {table.id} could not commit to {current}: {COMMIT_TRIES} tries lost to "
                    f"concurrent commits of the same table ({error}); retry the task, or run fewer of this table's "
                    f"batches at once (max_active_tis_per_dagrun on the snapshot task)"
                ) from error
            time.sleep(random.uniform(0.05, 0.2) * attempt)  # noqa: S311  (jitter, not a secret)
    raise AssertionError("unreachable")


def _open_or_create(location: DeltaLocation, schema: pa.Schema) -> DeltaTable:
    """The table at ``location``; the first batch to commit creates it (another may win that race)."""
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import CommitProperties

    delta = location.open()
    if delta is not None:
        return delta
    try:
        # no commit retries: a retried creation would land as a second CREATE TABLE on top of the winner's
        # (measured), resetting the schema a concurrent batch may have evolved already
        return location.create(schema, mode="error", partition_by=[BATCH_COLUMN],
                               commit_properties=CommitProperties(max_commit_retries=0))
    except DeltaError:
        delta = location.open()  # created by a concurrent batch meanwhile
        if delta is None:
            raise
        return delta


def _evolve(delta: DeltaTable, table: LakeTable, schema: pa.Schema, batch_number: int) -> pa.Schema:
    """Add the batch's columns the table lacks; refuse a column whose Delta type differs. Returns the
    table's schema after that (the schema to commit with: it keeps columns this batch lacks)."""
    from deltalake import Field, Schema

    current = {f.name: f for f in delta.schema().fields}
    wanted = Schema.from_arrow(schema).fields
    changed = [f"{f.name} {_type_name(current[f.name].type)} -> {_type_name(f.type)}" for f in wanted
               if f.name in current and current[f.name].type != f.type]
    if changed:
        raise SchemaChangeError(
            f"batch {batch_number} of {table.id} read columns of other types than the batches committed before it "
            f"({', '.join(changed)}), which its Delta table {table.current} cannot hold together: re-snapshot the "
            f"table (delete its folder {table.folder} and run the DAG again)"
        )
    new = [Field(f.name, f.type, nullable=True) for f in wanted if f.name not in current]
    if new:
        delta.alter.add_columns(new)
    return pa.schema(delta.schema().to_arrow())


def _type_name(kind: Any) -> str:
    """A Delta type as its protocol name (``long``, ``decimal(12,2)``, ``struct``...)."""
    return str(getattr(kind, "type", kind))


def _overwrite(
    delta: DeltaTable, batch_number: int, adds: list[AddAction], schema: pa.Schema, metadata: Mapping[str, str]
) -> None:
    from deltalake.transaction import CommitProperties

    actions: list[AddAction | RemoveAction] = list(adds)
    delta.create_write_transaction(
        actions, mode="overwrite", schema=schema, partition_by=[BATCH_COLUMN],
        partition_filters=[(BATCH_COLUMN, "=", str(batch_number))],
        commit_properties=CommitProperties(custom_metadata=dict(metadata)),
    )


def _version_of(fs: pafs.FileSystem, table_dir: str, after: int, metadata: Mapping[str, str]) -> int:
    """The version our commit made: the first after ``after`` whose commitInfo carries our metadata (other
    batches commit around it; delta-rs's ``history()`` numbers entries by the snapshot it has loaded,
    which is wrong while others commit, so the log is read directly)."""
    version = after + 1
    while True:
        path = f"{table_dir}/_delta_log/{version:020d}.json"
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            raise SnapshotJobError(f"the commit with {dict(metadata)} is not in the Delta log of {table_dir} after "
                                   f"version {after}: the table was replaced meanwhile; retry the task")
        with fs.open_input_stream(path) as stream:
            for line in stream.read().decode("utf-8").splitlines():
                info = json.loads(line).get("commitInfo")
                if info is not None and all(info.get(k) == v for k, v in metadata.items()):
                    return version
        version += 1
