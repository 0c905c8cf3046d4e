"""Reading the replica: the changelog of a table, and its current state, from committed files only.

The snapshot's rows (through its batch manifests) and the stream's change files (up to the
checkpoint) form one changelog, ordered by ``_binlog_file``, ``_binlog_pos``, ``_row_seq``. The
current state keeps the last row per primary key and drops keys whose last row is a delete.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import NoSuchTableError, SchemaChangeError
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS, lake_schema
from airflow_provider_mysqlcdc.lake.snapshot import SnapshotStore, batch_read_with
from airflow_provider_mysqlcdc.lake.storage import Lake
from airflow_provider_mysqlcdc.lake.stream_store import StreamStore

ORDER = [("_binlog_file", "ascending"), ("_binlog_pos", "ascending"), ("_row_seq", "ascending")]


@dataclass(frozen=True)
class CommittedTable:
    """What a reader may take of one table: its current schema and its committed Parquet files (the
    snapshot batches' and the stream's up to the checkpoint, as paths of the lake's filesystem)."""

    schema: TableSchema
    files: list[str]


def committed_table(base_uri: str, table: TableId) -> CommittedTable:
    """One read of the plan, the manifests and the checkpoint, so that the schema and the files agree
    even while the stream commits."""
    snapshots, streams = SnapshotStore(base_uri), StreamStore(base_uri)
    plan, checkpoint = snapshots.read_plan(table), streams.read_checkpoint()
    manifests = [m for m in snapshots.manifests(plan) if m is not None] if plan else []
    files = [f for m in manifests for f in m["files"]]
    files += streams.committed_change_files(table, checkpoint)
    if not files:
        raise NoSuchTableError(f"the lake at {base_uri} has no committed rows of {table}: run its split and "
                               f"snapshot tasks (or the stream) first, or check base_uri and the table name")
    schema = checkpoint.schema_of(table) if checkpoint is not None else None
    if schema is None and plan is not None:  # a table the stream does not know of yet: its snapshot's schema
        schema = batch_read_with(manifests, plan, latest=True)
    if schema is None:
        raise NoSuchTableError(f"the lake at {base_uri} has change files of {table} but neither its snapshot plan "
                               f"nor the stream's checkpoint knows the table: its lake folder is from elsewhere")
    return CommittedTable(schema, files)


def read_changes(base_uri: str, table: str) -> pa.Table:
    """Every committed row of the table's changelog, in order, with its metadata columns."""
    return _read_changes(base_uri, committed_table(base_uri, TableId.parse(table)))


def _read_changes(base_uri: str, committed: CommittedTable) -> pa.Table:
    fs = Lake.at(base_uri).fs
    current_types = {f.name: f.type for f in lake_schema(committed.schema)}
    parts = [_as_current_types(pq.read_table(f, filesystem=fs), current_types, committed.schema, f)
             for f in committed.files]
    changes = pa.concat_tables(parts, promote_options="default").sort_by(ORDER)
    # the current columns first, then columns dropped since, then the metadata
    current = list(committed.schema.column_names)
    metadata = [f.name for f in METADATA_FIELDS]
    dropped = [c for c in changes.column_names if c not in current and c not in metadata]
    return changes.select(current + dropped + metadata)


def _as_current_types(part: pa.Table, types: dict[str, pa.DataType], schema: TableSchema, path: str) -> pa.Table:
    """A file written before a column changed type (INT to BIGINT, a wider DECIMAL) read as the current
    type; a value the new type cannot hold is an error naming the column, never a silent change."""
    fields = [part.schema.field(name).with_type(types.get(name, part.schema.field(name).type))
              for name in part.column_names]
    if all(f.type == part.schema.field(f.name).type for f in fields):
        return part
    try:
        return part.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        changed = [f"{f.name} {part.schema.field(f.name).type} -> {f.type}" for f in fields
                   if f.type != part.schema.field(f.name).type]
        raise SchemaChangeError(
            f"{schema.id} changed column types since {path} was written ({', '.join(changed)}) and its values "
            f"cannot be read as the new types ({exc}): re-snapshot the table (delete its folder in the lake and "
            f"run the DAG again)"
        ) from exc


def read_table(base_uri: str, table: str) -> pa.Table:
    """The table as of the last commit: its current columns, one row per key, deletes dropped."""
    committed = committed_table(base_uri, TableId.parse(table))
    schema, changes = committed.schema, _read_changes(base_uri, committed)
    changes = changes.append_column("__order", pa.array(range(changes.num_rows), pa.int64()))
    last = changes.group_by(list(schema.row_key)).aggregate([("__order", "max")])
    latest = changes.take(last.column("__order_max")).sort_by("__order")
    present = latest.filter(pc.is_in(latest.column("_op"), pa.array(ChangeKind.accumulations(), pa.string())))
    return present.select(list(schema.column_names)).sort_by([(k, "ascending") for k in schema.row_key])

