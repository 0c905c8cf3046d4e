"""The metadata columns every row of the lake carries after the table's own columns.

``_op`` is the changelog kind, a ``ChangeKind``'s value (``+I``, ``-U``, ``+U``, ``-D``); ``_op_ts``
the commit time in ms (0 for snapshot rows). ``_binlog_file``, ``_binlog_pos`` and ``_row_seq`` order
the whole changelog: a change sorts by the start of its transaction and its place inside it, and a
snapshot row takes its chunk's high watermark with ``_row_seq`` 0, so it sorts before every change
after that HW and after every change it already contains.

These are the lake's own Arrow types (``lake_schema``); the Delta tables store the few types Delta
lacks in another form (``delta.stored_type``), and readers cast back to these.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.cdc.types import arrow_schema

METADATA_FIELDS = [
    pa.field("_op", pa.string()),
    pa.field("_database", pa.string()),
    pa.field("_table", pa.string()),
    pa.field("_op_ts", pa.int64()),
    pa.field("_binlog_file", pa.int32()),
    pa.field("_binlog_pos", pa.int64()),
    pa.field("_row_seq", pa.int64()),
]


def lake_schema(schema: TableSchema) -> pa.Schema:
    return pa.schema([*arrow_schema(schema), *METADATA_FIELDS])


def with_snapshot_metadata(rows: pa.Table, schema: TableSchema, high_watermark: BinlogOffset) -> pa.Table:
    n = rows.num_rows
    constants = [
        ChangeKind.INSERT, schema.id.database, schema.id.table,
        0, file_index(high_watermark.file), high_watermark.position, 0,
    ]
    for field, value in zip(METADATA_FIELDS, constants, strict=True):
        rows = rows.append_column(field, pa.repeat(pa.scalar(value, field.type), n))
    return rows


def changes_table(records: list[ChangeRecord], schema: TableSchema) -> pa.Table:
    """Change records of one table (all with ``schema``'s columns) as lake rows, in changelog order.

    Built column by column (a dict per row costs more than decoding it). ``_row_seq`` orders the
    rows of one transaction: row event, row within it, and the before image of an update before its
    after image.
    """
    types = arrow_schema(schema)
    columns = zip(*(r.values for r in records), strict=True) if records else [()] * len(types)
    arrays = [pa.array(values, field.type) for values, field in zip(columns, types, strict=True)]
    offsets = [r.offset for r in records]
    update_after = ChangeKind.UPDATE_AFTER
    metadata = [
        [r.op for r in records],
        [schema.id.database] * len(records),
        [schema.id.table] * len(records),
        [r.ts_ms for r in records],
        [file_index(o.file) for o in offsets],
        [o.position for o in offsets],
        [(o.events_to_skip << 32) | (o.rows_to_skip << 1) | (r.op is update_after)
         for o, r in zip(offsets, records, strict=True)],
    ]
    arrays += [pa.array(values, field.type) for values, field in zip(metadata, METADATA_FIELDS, strict=True)]
    return pa.Table.from_arrays(arrays, schema=lake_schema(schema))
