"""A DDL applied to a table's current-state Delta table, at the stream batch that carries it.

The stream applies each DDL of a captured table at its binlog offset (``engine.schema_changes``): the
changes before it are merged first, then this module changes the current table, then the DDL's batch
(its ``!T``/``!S`` records in the changelog) and the checkpoint are committed. Each change here is one
Delta commit recording ``(MERGE_APP_ID, seq)``, the DDL batch's sequence number, like a MERGE: a run
killed between it and the checkpoint comes back to the same DDL with the same number (the batch
before ends at the DDL), finds the table at that number and does not apply it twice.

Why a rewrite and not Delta column mapping: delta-rs 1.x writes no column-mapping tables it can rename
or drop columns of, and the readers our users bring (DuckDB, Polars, older Spark) read column mapping
unevenly. A rewrite keeps the table a plain Delta table; its cost is one read and write of the table
(a column added or retyped without values costs the same, but is rare next to the changes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.delta import BATCH_COLUMN, MERGE_APP_ID, allow_types_of, open_delta, stored_type
from airflow_provider_mysqlcdc.lake.merge import ORDER_COLUMNS, merged_through, quote
from airflow_provider_mysqlcdc.lake.multiset import with_dup

if TYPE_CHECKING:
    from deltalake import CommitProperties, DeltaTable


def _at(seq: int) -> CommitProperties:
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(MERGE_APP_ID, seq)])


def _pending(uri: str, seq: int) -> DeltaTable | None:
    """The current table if it exists and has not had batch ``seq`` applied yet."""
    table = open_delta(uri)
    return table if table is not None and merged_through(table) < seq else None


def truncate_current(uri: str, seq: int, at: BinlogOffset) -> bool:
    """Empty the current table as of ``at`` (``TRUNCATE TABLE`` there, at batch ``seq``): every row ordered
    at or before it goes. A snapshot chunk read after the TRUNCATE (the stream meets it while the table is
    still in its snapshot phase) holds rows ordered at its later high watermark: they stay, and so do the
    changes after it that the stream merges later. False when there was nothing to do."""
    table = _pending(uri, seq)
    if table is None:
        return False
    file, position, row_seq = (quote(c) for c in ORDER_COLUMNS)
    index, pos, seq_at = file_index(at.file), at.position, at.events_to_skip << 32
    table.delete(f"{file} < {index} OR ({file} = {index} AND ({position} < {pos} OR ({position} = {pos} AND "
                 f"{row_seq} <= {seq_at})))", commit_properties=_at(seq))
    return True


def reshape_current(uri: str, schema: TableSchema, renamed: Mapping[str, str], cleared: Sequence[str],
                    seq: int, reread: bool = False, empty: bool = False) -> bool:
    """Give the current table the columns of ``schema`` (the table after the DDL) at batch ``seq``, in one
    rewrite: columns ``renamed`` (old name to new) keep their values, columns of ``schema`` it lacks or
    that are ``cleared`` (retyped in a way that converts values) are NULL, and columns ``schema`` no
    longer has are dropped. False when there was nothing to do.

    ``reread``: the caller reads every row again right after (``engine.resnapshot``). A row is then no
    longer the state as of its order key, so each is ordered before every change: the re-read row
    replaces it even when its high watermark is the one an earlier re-read gave the row (nothing was
    written to the binlog since). ``empty``: without rows (a table created anew under the name)."""
    from deltalake import write_deltalake

    table = _pending(uri, seq)
    if table is None:
        return False
    rows = table.to_pyarrow_table()
    rows = rows.slice(0, 0) if empty else rows
    for old, new in renamed.items():
        if old in rows.column_names and new in rows.column_names:
            # both: rows of snapshot chunks read after the DDL (the stream meets it in the table's snapshot
            # phase) have the new name, older rows the old one; each row has a value under one of them
            merged = pc.coalesce(rows.column(new), rows.column(old).cast(rows.schema.field(new).type))
            rows = rows.drop_columns([old])
            rows = rows.set_column(rows.schema.get_field_index(new), new, merged)
    rows = rows.rename_columns([renamed.get(name, name) for name in rows.column_names])
    fields = [f.with_type(stored_type(f.type)) for f in lake_schema(schema)]
    # a kept column retyped by the DDL was widened (cdc.ddl.keeps_values): the cast is exact
    arrays = [rows.column(f.name).cast(f.type) if f.name in rows.column_names and f.name not in cleared
              else pa.nulls(rows.num_rows, f.type) for f in fields]
    if reread:
        first = {"_binlog_file", "_binlog_pos", "_row_seq"}
        arrays = [pa.repeat(pa.scalar(0, f.type), rows.num_rows) if f.name in first else a
                  for f, a in zip(fields, arrays, strict=True)]
    reshaped = pa.Table.from_arrays([*arrays, rows.column(BATCH_COLUMN)],
                                    schema=pa.schema([*fields, rows.schema.field(BATCH_COLUMN)]))
    if schema.keyless:  # a dropped column can make distinct rows equal: their copies are numbered anew
        reshaped = with_dup(reshaped, [*schema.column_names, BATCH_COLUMN])
    allow_types_of(table, reshaped.schema)
    write_deltalake(uri, reshaped, mode="overwrite", schema_mode="overwrite", partition_by=[BATCH_COLUMN],
                    commit_properties=_at(seq))
    return True
