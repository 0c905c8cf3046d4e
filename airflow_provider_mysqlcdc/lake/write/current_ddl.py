"""A DDL applied to a table's current-state Delta table, at the stream batch that carries it.

The stream applies each DDL of a captured table at its binlog offset (``engine.stream.schema_changes``): the
changes before it are merged first, then this module changes the current table, then the DDL's batch
(its ``!T``/``!S`` records in the changelog) and the checkpoint are committed. Each change here is one
Delta commit recording ``(MERGE_APP_ID, seq)``, the DDL batch's sequence number, like a MERGE: a run
killed between it and the checkpoint comes back to the same DDL with the same number (the batch
before ends at the DDL), finds the table at that number and does not apply it twice.

A DDL that gave rows values without row events (a DEFAULT, a conversion) replaces the whole table with
its rows read again, in one commit (``replace_current``); the others reshape it (``reshape_current``).
A snapshot batch read after a widening DDL, before the stream reaches it, widens the columns of the
batches committed before it (``widen_current``, from ``lake.write.snapshot_commit``).

Why a rewrite and not Delta column mapping (measured, ``bench/ddl_rewrite_bench.py`` and RESULTS.md):
delta-rs 1.6 has no API to rename or drop a column of a column-mapped table, cannot add a column to
one, and its pyarrow readers (DuckDB and Polars through them) read a renamed column of one as NULLs. A
rewrite keeps the table a plain Delta table; on 10M rows it costs about one to two writes of the table
and twice its Arrow size in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.changelog import SNAPSHOT_CONSTANTS, lake_schema
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, MERGE_APP_ID, stored_schema
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, quote
from airflow_provider_mysqlcdc.lake.write.merge import ORDER_COLUMNS, merged_at, merged_through
from airflow_provider_mysqlcdc.lake.write.multiset import DUP_COLUMN, with_dup

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable, TableVersion


def _pending(location: ReplicaTable, seq: int) -> TableVersion | None:
    """The current table if it exists and has not had batch ``seq`` applied yet."""
    table = location.open()
    return table if table is not None and merged_through(table) < seq else None


def truncate_current(location: ReplicaTable, seq: int, at: BinlogOffset) -> bool:
    """Empty the current table as of ``at`` (``TRUNCATE TABLE`` there, at batch ``seq``): every row ordered
    at or before it goes. A snapshot chunk read after the TRUNCATE (the stream meets it while the table is
    still in its snapshot phase) holds rows ordered at its later high watermark: they stay, and so do the
    changes after it that the stream merges later. False when there was nothing to do."""
    table = _pending(location, seq)
    if table is None:
        return False
    file, position, row_seq = (quote(c) for c in ORDER_COLUMNS)
    index, pos, seq_at = file_index(at.file), at.position, at.events_to_skip << 32
    table.delete(f"{file} < {index} OR ({file} = {index} AND ({position} < {pos} OR ({position} = {pos} AND "
                 f"{row_seq} <= {seq_at})))", merged_at(seq))
    return True


def reshape_current(location: ReplicaTable, schema: TableSchema, renamed: Mapping[str, str], seq: int,
                    empty: bool = False, known: Collection[str] | None = None) -> bool:
    """Give the current table the columns of ``schema`` (the table after the DDL) at batch ``seq``, in one
    rewrite: columns ``renamed`` (old name to new) keep their values, columns of ``schema`` it lacks are
    NULL, and columns ``schema`` no longer has are dropped. A column the DDL retyped was widened (the
    caller replaces the table with its rows read again otherwise). False when there was nothing to do.
    ``known``: the table's columns before the DDL; a column of the current table outside them is kept, last
    (a snapshot batch read after a later DDL, which the stream has not reached yet, wrote it: that DDL places
    it). ``empty``: without rows (a table created anew under the name). A keyed table is rewritten a batch at a
    time (``TableVersion.scan``), never whole in memory; a keyless one is read whole, since a dropped column
    can make distinct rows equal and their copies are numbered anew over the whole table."""
    table = _pending(location, seq)
    if table is None:
        return False
    scan = table.scan()
    if schema.keyless:
        rows = scan.read_all()
        reshaped = _reshaped(rows.slice(0, 0) if empty else rows, schema, renamed, known)
        location.overwrite(with_dup(reshaped, [*schema.column_names, BATCH_COLUMN]), merged_at(seq), [BATCH_COLUMN])
        return True
    _rewrite(location, scan, lambda rows: _reshaped(rows, schema, renamed, known), merged_at(seq), empty)
    return True


def widen_current(location: ReplicaTable, table: TableVersion, types: Mapping[str, pa.DataType],
                  tag: CommitTag) -> None:
    """Rewrite the current table (``table``, as opened) with the columns of ``types`` cast to those types, in
    one commit tagged ``tag``. Each must hold every value of the type it replaces (``delta_schema.wider``):
    a snapshot batch read after a widening DDL (INT to BIGINT) commits into a table whose batches committed
    before it hold the narrower type, which a Delta table cannot hold beside the wider one. The stream does
    the same when it reaches the DDL (``reshape_current``): there, nothing is left to cast."""
    _rewrite(location, table.scan(), lambda rows: rows.cast(pa.schema(
        [f.with_type(types[f.name]) if f.name in types else f for f in rows.schema])), tag)


def _rewrite(location: ReplicaTable, scan: pa.RecordBatchReader, convert: Callable[[pa.Table], pa.Table],
             tag: CommitTag, empty: bool = False) -> None:
    """The current table replaced by its rows (``scan``) through ``convert``, in one commit, a batch at a time
    (never the whole table in memory); ``empty``: by no rows, in the shape ``convert`` gives."""
    shape = convert(scan.schema.empty_table()).schema
    batches = iter(()) if empty else (b for batch in scan for b in convert(pa.Table.from_batches([batch])).to_batches())
    location.overwrite(pa.RecordBatchReader.from_batches(shape, batches), tag, [BATCH_COLUMN])


def _reshaped(rows: pa.Table, schema: TableSchema, renamed: Mapping[str, str],
              known: Collection[str] | None) -> pa.Table:
    """``rows`` of the current table as ``reshape_current`` rewrites them (without numbering copies)."""
    for old, new in renamed.items():
        if old in rows.column_names and new in rows.column_names:
            # both: rows of snapshot chunks read after the DDL (the stream meets it in the table's snapshot
            # phase) have the new name, older rows the old one; each row has a value under one of them
            merged = pc.coalesce(rows.column(new), rows.column(old).cast(rows.schema.field(new).type))
            rows = rows.drop_columns([old])
            rows = rows.set_column(rows.schema.get_field_index(new), new, merged)
    rows = rows.rename_columns([renamed.get(name, name) for name in rows.column_names])
    fields = list(stored_schema(lake_schema(schema)))
    if known is not None:  # the columns of later batches go after the table's, before the metadata ones
        later = [rows.schema.field(name) for name in rows.column_names if name not in schema.column_names
                 and name not in known and name not in SNAPSHOT_CONSTANTS and name not in (BATCH_COLUMN, DUP_COLUMN)]
        fields[len(schema.columns):len(schema.columns)] = later
    # a kept column retyped by the DDL was widened (cdc.ddl.keeps_values): the cast is exact
    arrays = [rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
              for f in fields]
    return pa.Table.from_arrays([*arrays, rows.column(BATCH_COLUMN)],
                                schema=pa.schema([*fields, rows.schema.field(BATCH_COLUMN)]))


_HIGH_WATERMARK = "mysqlcdc.high_watermark"
"""The commit metadata key of ``replace_current``: the highest high watermark of the rows it wrote."""
_SINCE = "mysqlcdc.reread_since"
"""The commit metadata key of ``replace_current``'s ``since``: where the stream goes on from after the re-read."""


def replace_current(
    location: ReplicaTable, seq: int, read: Callable[[], tuple[pa.Table, BinlogOffset]],
    since: BinlogOffset | None = None,
) -> BinlogOffset:
    """Replace the whole current table at batch ``seq``, in one commit, with the rows ``read()`` gives
    (every row read again after a DDL that gave rows values without row events, each as of its chunk's
    high watermark, with ``_batch``) : a reader sees the table before the DDL or after it, never the new
    columns empty. Returns the highest high watermark of the rows; when a killed run made that commit
    already, nothing is read and it is read back from the commit. A table without a current table yet
    (renamed into the captured tables) gets one. ``since``, recorded with the commit (``replaced_since``):
    the binlog position, taken before the re-read, from which the stream reads on."""
    table = location.open()
    if table is not None and merged_through(table) >= seq:
        return _replaced_at(location, seq)
    rows, high_watermark = read()
    facts = {_HIGH_WATERMARK: json.dumps(high_watermark.to_dict())}
    if since is not None:
        facts[_SINCE] = json.dumps(since.to_dict())
    location.overwrite(rows, CommitTag(MERGE_APP_ID, seq, facts), [BATCH_COLUMN])
    return high_watermark


_REPLACE_LOOKBACK = 8
"""Commits ``_replaced_at`` reads first: the replace is the newest commit, or a few back (upkeep, a killed run's
later MERGE); the whole history (a current table merged every few minutes keeps thousands of entries over the log's
retention, each one read on an object store) only when it is not among them."""


def _replaced_at(location: ReplicaTable, seq: int) -> BinlogOffset:
    found = _replace_fact(location, _HIGH_WATERMARK)
    if found is None:
        raise SnapshotStateError(f"the current table at {location.uri} records batch {seq} applied, but not the "
                                 f"high watermark of the rows that batch read again: re-snapshot the table")
    return found


def replaced_since(location: ReplicaTable, seq: int) -> BinlogOffset | None:
    """The ``since`` of the table's replace at batch ``seq`` if a killed run made it already, else None."""
    table = location.open()
    if table is None or merged_through(table) < seq:
        return None
    return _replace_fact(location, _SINCE)


def _replace_fact(location: ReplicaTable, key: str) -> BinlogOffset | None:
    """The offset under ``key`` in the newest replace commit's metadata (None: no such commit or key)."""
    for limit in (_REPLACE_LOOKBACK, None):
        commits = location.history(limit) or []  # newest first
        for commit in commits:
            if _HIGH_WATERMARK in commit.metadata:
                fact = commit.metadata.get(key)
                return None if fact is None else BinlogOffset.from_dict(json.loads(fact))
        if limit is not None and len(commits) < limit:  # that was the whole history
            break
    return None
