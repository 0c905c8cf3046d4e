"""The current-state table read as a stream, past the keys that changes touch.

Why: ``read_table`` and as-of reads apply changelog rows to the current table. The changes are few next
to the table (the rows of a MERGE interval; for as-of reads, the table's history), but the table may be
larger than memory. A key no change touches is read as the current table has it, so its rows can go
straight through batch by batch; only the rows of touched keys are held back, to be resolved with the
changes once the scan is over. Memory is then the changes, their keys' current rows and one batch, not
the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.read.committed import METADATA, conform

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import TableVersion

_INDEX = "__scan_row_index"


def current_past_keys(current: TableVersion, schema: TableSchema, changes: pa.Table,
                      touched: list[pa.Table]) -> Iterator[pa.Table]:
    """The current table's rows batch by batch, as the table's current columns and the metadata columns,
    without the rows whose key (``schema.row_key``, a keyed table's) is among ``changes``'s: those are
    appended to ``touched`` instead, for the caller to resolve once the iteration is over."""
    fields, row_key = lake_schema(schema), list(schema.row_key)
    columns = [*schema.column_names, *METADATA]
    keys = changes.select(row_key)
    for batch in current.scan():
        rows = conform(pa.Table.from_batches([batch]), fields, schema).select(columns)
        if keys.num_rows == 0 or rows.num_rows == 0:
            yield rows
            continue
        index = pa.table({**{k: rows.column(k) for k in row_key}, _INDEX: pa.array(range(rows.num_rows), pa.int64())})
        hits = index.join(keys, row_key, join_type="left semi").column(_INDEX)
        mask = pc.is_in(index.column(_INDEX), value_set=hits.combine_chunks())
        touched.append(rows.filter(mask))
        yield rows.filter(pc.invert(mask))


def as_reader(schema: pa.Schema, tables: Iterator[pa.Table]) -> pa.RecordBatchReader:
    """``tables`` (each with ``schema``'s columns and types) as one stream of record batches."""
    return pa.RecordBatchReader.from_batches(schema, (b for t in tables for b in t.cast(schema).to_batches()))
