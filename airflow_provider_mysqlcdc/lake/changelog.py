"""The metadata columns every row of the lake carries after the table's own columns.

``_op`` is the changelog kind, a ``ChangeKind``'s value (``+I``, ``-U``, ``+U``, ``-D``); ``_op_ts``
the commit time in ms (0 for snapshot rows). ``_binlog_file``, ``_binlog_pos`` and ``_row_seq`` order
the whole changelog: a change sorts by the start of its transaction and its place inside it, and a
snapshot row takes its chunk's high watermark with ``_row_seq`` 0, so it sorts before every change
after that HW and after every change it already contains.

These are the lake's own Arrow types (``lake_schema``); the Delta tables store the few types Delta
lacks in another form (``delta_schema.stored_type``), and readers cast back to these.

The table's own columns come from the core (``cdc.change_columns``): a rows event's values are in the
binlog's wire formats, and reading those is the binlog decoder's work (``cdc.row_decoder`` locates them,
``cdc.row_columns`` reads them into Arrow), which must agree with the snapshot's SELECT whatever the
lake does with the rows. This module only lays the lake's metadata columns next to them.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import EVENT_FIELDS, ImageBuffer, tuple_columns
from airflow_provider_mysqlcdc.cdc.binlog.row_columns import arrow_array
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.lake.format.delta_schema import cast_to

METADATA_FIELDS = [
    pa.field("_op", pa.string()),
    pa.field("_database", pa.string()),
    pa.field("_table", pa.string()),
    pa.field("_op_ts", pa.int64()),
    pa.field("_binlog_file", pa.int32()),
    pa.field("_binlog_pos", pa.int64()),
    pa.field("_row_seq", pa.int64()),
]


DDL_COLUMN = "_ddl"
"""The changelog's column of a table event's statement (``!T``, ``!S`` records); NULL in rows."""


def table_event_record(schema: TableSchema, kind: ChangeKind, statement: str, offset: BinlogOffset,
                       ts_ms: int) -> pa.Table:
    """The changelog record of a table event at ``offset`` (the start of the DDL's transaction): one row of
    ``kind``, the table's columns NULL, the statement in ``_ddl``. It sorts after every change before the
    DDL and before every change after it."""
    fields = lake_schema(schema)
    values = {"_op": kind.value, "_database": schema.id.database, "_table": schema.id.table, "_op_ts": ts_ms,
              "_binlog_file": file_index(offset.file), "_binlog_pos": offset.position,
              "_row_seq": _row_seq(offset.events_to_skip, 0, 0)}
    arrays = [pa.array([values[f.name]], f.type) if f.name in values else pa.nulls(1, f.type) for f in fields]
    return pa.Table.from_arrays([*arrays, pa.array([statement], pa.string())],
                                schema=fields.append(pa.field(DDL_COLUMN, pa.string())))


@functools.lru_cache(maxsize=4096)
def lake_schema(schema: TableSchema) -> pa.Schema:
    """The lake's Arrow schema of a table's rows (kept per schema: a stream batch over many tables asks it of each
    table it touches, and making it costs more than the few rows such a table has)."""
    return pa.schema([*arrow_schema(schema), *METADATA_FIELDS])


def as_kept_columns(rows: pa.Table, schema: TableSchema) -> pa.Table:
    """Lake rows decoded with the server's columns as the columns ``schema`` keeps (``Checkpoint.kept``): a
    column it lacks left out, a column the server no longer has NULL, each value in the kept type (one
    that does not fit is a ``SchemaChangeError`` naming the column)."""
    fields = lake_schema(schema)
    arrays = [rows.column(f.name) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
              for f in fields]
    return cast_to(pa.Table.from_arrays(arrays, names=fields.names), fields,
                   f"{schema.id} (its lake keeps its columns as they were: schema_change_behavior 'ignore')")


SNAPSHOT_CONSTANTS = frozenset(f.name for f in METADATA_FIELDS)
"""The columns ``with_snapshot_metadata`` fills with one value each: all the metadata columns."""


def with_snapshot_metadata(rows: pa.Table, schema: TableSchema, high_watermark: BinlogOffset) -> pa.Table:
    n = rows.num_rows
    constants = [
        ChangeKind.INSERT, schema.id.database, schema.id.table,
        0, file_index(high_watermark.file), high_watermark.position, 0,
    ]
    for field, value in zip(METADATA_FIELDS, constants, strict=True):
        rows = rows.append_column(field, pa.repeat(pa.scalar(value, field.type), n))
    return rows


def _row_seq(events_to_skip: Any, rows_to_skip: Any, after_image: Any) -> Any:
    """``_row_seq`` orders the rows of one transaction: row event, row within it (the count of rows a
    resume after it skips), and the before image of an update before its after image."""
    return (events_to_skip << 32) | (rows_to_skip << 1) | after_image


def _with_metadata(columns: list[pa.Array], schema: TableSchema, metadata: list[Any]) -> pa.Table:
    """The lake rows of ``columns`` and the metadata columns' values (``_op``, ``_op_ts``, ``_binlog_file``,
    ``_binlog_pos``, ``_row_seq``; ``_database`` and ``_table`` are the schema's)."""
    rows = len(metadata[1])
    op, ts, file, position, row_seq = metadata
    constants = [pa.repeat(pa.scalar(name, pa.string()), rows) for name in (schema.id.database, schema.id.table)]
    values = [op, *constants, ts, file, position, row_seq]
    arrays = [v if isinstance(v, pa.Array) else pa.array(v, f.type) for v, f in zip(values, METADATA_FIELDS,
                                                                                     strict=True)]
    return pa.Table.from_arrays([*columns, *arrays], schema=lake_schema(schema))


def changes_table(records: list[ChangeRecord], schema: TableSchema) -> pa.Table:
    """Change records of one table (all with ``schema``'s columns) as lake rows, in changelog order."""
    offsets = [r.offset for r in records]
    update_after = ChangeKind.UPDATE_AFTER
    metadata = [
        [r.op for r in records],
        [r.ts_ms for r in records],
        [file_index(o.file) for o in offsets],
        [o.position for o in offsets],
        [_row_seq(o.events_to_skip, o.rows_to_skip, r.op is update_after) for o, r in zip(offsets, records,
                                                                                          strict=True)],
    ]
    return _with_metadata(tuple_columns([r.values for r in records], schema), schema, metadata)


_KIND_NAMES = pa.array([k.value for k in ChangeKind], pa.string())
_METADATA_TYPES = [(np.dtype(np.int8), pa.int8()),
                   *((np.dtype(f"i{f.type.bit_width // 8}"), f.type) for f in METADATA_FIELDS[3:])]
"""The numpy and Arrow types ``rows_table`` makes the metadata columns with (``_op`` as a kind's index first)."""


def rows_table(images: ImageBuffer) -> pa.Table:
    """The images of rows events of one table gathered in ``images`` as lake rows, in changelog order: the
    columnar stream's form of ``changes_table``, with no Python object per value or row.

    The images' values become the table's columns in the core (``cdc.change_columns``); the metadata
    columns come from one value per event, spread over its images with numpy.
    """
    schema = images.schema
    columns, keep = images.columns()
    # per event (``EVENT_FIELDS``): its first image's kind, width (2 for an update), commit time, file,
    # position, index, and its images
    per_event = np.frombuffer(images.events, np.int64).reshape(-1, EVENT_FIELDS)
    counts = per_event[:, 6]
    kind, width, ts, file, position, event_index = (np.repeat(per_event[:, i], counts) for i in range(6))
    local = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)  # image in its event
    after = local % width  # an update's images: before (UPDATE_BEFORE), then after (UPDATE_AFTER)
    metadata = [kind + after, ts, file, position, _row_seq(event_index, local // width + 1, after)]
    if keep is not None:
        metadata = [m[keep] for m in metadata]
    arrays = [arrow_array(m.astype(dtype), t) for m, (dtype, t) in zip(metadata, _METADATA_TYPES, strict=True)]
    arrays[0] = _KIND_NAMES.take(arrays[0])
    return _with_metadata(columns, schema, arrays)
