"""What a reader may take of one table: the checkpoint, then its two Delta tables, and the changelog
rows of the stream batches between them, in changelog order and as the table's current types.

Shared by every reader of committed data: ``read_table``/``read_changes`` (``lake.read.replica``), as-of reads
(``lake.read.as_of_read``) and the Spark views (``lake.read.spark_views``). It sits below them so that ``replica`` can
hand ``read_table(as_of=...)`` to ``as_of_read`` without the two importing each other. Rows written before
a column changed type are read as the current type (a value that cannot be is a ``SchemaChangeError``
naming the column); Delta-stored forms (``delta_schema.stored_type``) are cast back to the table's Arrow types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import NoSuchTableError
from airflow_provider_mysqlcdc.lake.changelog import DDL_COLUMN, METADATA_FIELDS, lake_schema
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN, cast_to
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.merge import merged_through
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import TableVersion

ORDER = [("_binlog_file", "ascending"), ("_binlog_pos", "ascending"), ("_row_seq", "ascending")]
TABLE_EVENT_OPS = pa.array([k.value for k in ChangeKind.table_events()], pa.string())
METADATA = [f.name for f in METADATA_FIELDS]


@dataclass(frozen=True)
class CommittedTable:
    """What a reader may take of one table: its current schema, its current-state Delta table and the
    stream batches on top of it (``merged`` < ``_stream_seq`` <= ``through``), and its changelog."""

    schema: TableSchema
    current: TableVersion | None
    changelog: TableVersion | None
    merged: int
    through: int


def committed_table(lake: Lake, table: TableId) -> CommittedTable:
    """The checkpoint, then both Delta tables: the schema and the batches to read agree even while the
    stream and the MERGE commit."""
    checkpoint = StreamStore(lake).read_checkpoint(shared=True)
    places = lake.table(table)
    current, changelog = places.current.open(), places.changelog.open()
    through = checkpoint.visible[0] if checkpoint is not None else 0  # whole transactions only
    merged = merged_through(current) if current is not None else -1
    schema = checkpoint.schema_of(table) if checkpoint is not None else None
    if schema is None and current is not None:  # a table the stream does not know of yet: its snapshot's
        plan = SnapshotStore(lake).read_plan(table)
        schema = plan.schema if plan is not None else None
    if current is None and (changelog is None or not _has_rows(changelog, through)):
        raise NoSuchTableError(f"the lake at {lake.base_uri} has no committed rows of {table}: run its split and "
                               f"snapshot tasks (or the stream) first, or check base_uri and the table name")
    if schema is None:
        raise NoSuchTableError(f"the lake at {lake.base_uri} has Delta tables of {table} but neither its snapshot plan "
                               f"nor the stream's checkpoint knows the table: its lake folder is from elsewhere")
    return CommittedTable(schema, current, changelog, min(merged, through), through)


def _has_rows(changelog: TableVersion, through: int) -> bool:
    return bool(_changelog_rows(changelog, -1, through, [STREAM_SEQ_COLUMN]).num_rows)


def _changelog_rows(changelog: TableVersion, after: int, through: int, columns: list[str] | None = None,
                    where: pc.Expression | None = None) -> pa.Table:
    seq = pc.field(STREAM_SEQ_COLUMN)
    condition = (seq > after) & (seq <= through)
    return changelog.read(columns, condition if where is None else condition & where)


def changes_between(committed: CommittedTable, after: int, through: int, dropped: bool,
                    where: pc.Expression | None = None) -> pa.Table:
    """``where``: a filter on the changelog's stored columns (``lake.read.as_of_read`` reads a key range)."""
    schema = committed.schema
    rows = (_changelog_rows(committed.changelog, after, through, where=where) if committed.changelog is not None
            else pa.table({STREAM_SEQ_COLUMN: pa.array([], pa.int64())}))
    current = list(schema.column_names)
    own = {*METADATA, STREAM_SEQ_COLUMN, DDL_COLUMN}
    gone = [c for c in rows.column_names if c not in current and c not in own]
    fields = lake_schema(schema)
    if dropped:  # history: a column whose old values the current type cannot hold keeps its stored type
        fields = pa.schema([_holding(rows, f) for f in fields])
    rows = conform(rows, fields, schema).sort_by(ORDER)
    if dropped:
        if DDL_COLUMN not in rows.column_names:
            rows = rows.append_column(DDL_COLUMN, pa.nulls(rows.num_rows, pa.string()))
        return rows.select([*current, *gone, *METADATA, DDL_COLUMN, STREAM_SEQ_COLUMN])
    # the records of table events (TRUNCATE, a schema change) are applied to the current table at their
    # batch (engine.stream.schema_changes), never merged as rows
    return rows.filter(pc.invert(pc.is_in(rows.column("_op"), TABLE_EVENT_OPS))).select([*current, *METADATA])


def _holding(rows: pa.Table, field: pa.Field) -> pa.Field:
    """``field``, or the column's stored type where its values do not fit ``field``'s (a DDL converted them:
    DECIMAL scale down, VARCHAR to INT); the changelog keeps the values the source had then."""
    if field.name not in rows.column_names or rows.schema.field(field.name).type == field.type:
        return field  # nothing to try: the common case casts nothing twice
    try:
        rows.column(field.name).cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return field.with_type(rows.schema.field(field.name).type)
    return field


def conform(rows: pa.Table, fields: pa.Schema, schema: TableSchema) -> pa.Table:
    """``rows`` with every field of ``fields`` in its type (a missing one NULL), other columns kept."""
    for f in fields:
        if f.name not in rows.column_names:
            rows = rows.append_column(f.name, pa.nulls(rows.num_rows, f.type))
    return _as_current_types(rows, {f.name: f.type for f in fields}, schema)


def _as_current_types(part: pa.Table, types: dict[str, pa.DataType], schema: TableSchema) -> pa.Table:
    """Rows stored before a column changed type (INT to BIGINT, a wider DECIMAL), or in a Delta-stored
    form, as the current type; a value the new type cannot hold is an error naming the column."""
    target = pa.schema([f.with_type(types.get(f.name, f.type)) for f in part.schema])
    return cast_to(part, target, str(schema.id))
