"""Reading the replica from its two Delta tables, committed data only.

``read_changes`` is the table's changelog: the stream's changes (snapshot rows are in the current
state, not here) up to the stream's checkpoint, ordered by ``_binlog_file``, ``_binlog_pos``,
``_row_seq``. Rows past the checkpoint are a batch not committed yet (or a killed run's) and are
left out.

``read_table`` is the current-state Delta table (the snapshot's rows, brought up to date by MERGE
at intervals) with the changelog rows not merged yet applied on top: those past the current table's
MERGE transaction version, up to the checkpoint. The last row per key in changelog order wins, so a
change older than the current table's row for its key (a snapshot batch re-run after it) does not
override it; keys whose last row is a delete are dropped. A keyless table's rows are a multiset: every
change not merged yet adds or removes one copy of its image (``lake.write.multiset``), and the result has
one row per copy. ``scan_table`` is the same as a stream of record batches, the current table read a batch
at a time (``lake.read.current_scan``); ``read_table`` collects it and sorts it by key.

Rows written before a column changed type are read as the current type (``lake.read.committed``, which
these readers share with as-of reads and the Spark views). The checkpoint is read first, then the
current table, then the changelog: whatever the stream and the MERGE commit meanwhile, the result is a committed state.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.as_of import AsOfValue
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.as_of_read import scan_as_of
from airflow_provider_mysqlcdc.lake.read.committed import (
    ORDER,
    CommittedTable,
    changes_between,
    committed_table,
    conform,
)
from airflow_provider_mysqlcdc.lake.read.current_scan import as_reader, current_past_keys
from airflow_provider_mysqlcdc.lake.write.multiset import current_rows


def read_changes(lake: Lake | str, table: str) -> pa.Table:
    """The table's committed changelog, in order: the current columns, columns dropped since, the
    metadata columns, ``_ddl`` (the statement of a ``!T``/``!S`` record, else NULL), then ``_stream_seq``
    (the stream batch that committed the row). ``lake``: a ``Lake`` handle, or the base URI (object
    stores reached through the standard AWS variables)."""
    committed = committed_table(Lake.of(lake), TableId.parse(table))
    return changes_between(committed, -1, committed.through, dropped=True)


def unmerged_changes(lake: Lake, table: TableId, schema: TableSchema, after_seq: int, through_seq: int) -> pa.Table:
    """The changelog rows of stream batches ``after_seq`` < seq <= ``through_seq`` (the MERGE's input), in
    order, as ``schema``'s columns (a column added since: NULL) and the metadata columns."""
    changelog = lake.table(table).changelog.open()
    return changes_between(CommittedTable(schema, None, changelog, after_seq, through_seq), after_seq, through_seq,
                    dropped=False)


def read_table(lake: Lake | str, table: str, as_of: AsOfValue | None = None) -> pa.Table:
    """The table as of the last commit: its current columns, one row per key, deletes dropped, sorted by
    key. ``lake``: a ``Lake`` handle, or the base URI (object stores reached through the standard AWS
    variables). The whole table in memory: ``scan_table`` reads one larger than that.

    ``as_of``: the table as it was at that source position instead (``cdc.offset.as_of.AsOfValue``: an ``AsOf``,
    a binlog offset as ``BinlogOffset`` or ``"file:pos"``, a ``datetime`` (naive = UTC) or epoch ms;
    ``lake.read.as_of_read``), an ``AsOfError`` where the lake does not cover it or for a GTID position (turn it
    into an offset with ``resolve_as_of`` first), an ``InvalidOptionError`` for a value of another kind."""
    schema, reader = _scan(Lake.of(lake), table, as_of)
    rows = reader.read_all()
    return rows if schema.keyless else rows.sort_by([(k, "ascending") for k in schema.row_key])


def scan_table(lake: Lake | str, table: str, as_of: AsOfValue | None = None) -> pa.RecordBatchReader:
    """``read_table`` as a stream of record batches, in no particular order, holding about one batch of the
    current table at a time besides the changes not merged yet (with ``as_of``: the table's changelog) and
    the current rows of the keys they touch (``lake.read.current_scan``). For tables larger than memory: e.g.
    ``pyarrow.dataset.write_dataset(scan_table(...), ...)``, ``duckdb`` or ``polars.from_arrow`` over it.
    A keyless table (a multiset, whose copies are counted over the whole table) is read into memory first."""
    return _scan(Lake.of(lake), table, as_of)[1]


def _scan(lake: Lake, table: str, as_of: AsOfValue | None) -> tuple[TableSchema, pa.RecordBatchReader]:
    if as_of is not None:
        return scan_as_of(lake, table, as_of)
    committed = committed_table(lake, TableId.parse(table))
    schema = committed.schema
    changes = changes_between(committed, committed.merged, committed.through, dropped=False)
    columns = changes.select(list(schema.column_names)).schema
    if schema.keyless:
        current = (conform(committed.current.read(), lake_schema(schema), schema)
                   if committed.current is not None else changes.slice(0, 0))
        return schema, as_reader(columns, iter([current_rows(current, changes, schema.column_names)]))
    if committed.current is None:
        return schema, as_reader(columns, iter([_latest(schema, [changes])]))
    current = committed.current

    def tables() -> Iterator[pa.Table]:
        touched: list[pa.Table] = []
        for rows in current_past_keys(current, schema, changes, touched):
            yield rows.select(list(schema.column_names))
        yield _latest(schema, [pa.concat_tables([changes.slice(0, 0), *touched]), changes])

    return schema, as_reader(columns, tables())


def _latest(schema: TableSchema, sources: list[pa.Table]) -> pa.Table:
    """The last row per key across ``sources`` (in changelog order; on a tie, the later source), without
    the keys whose last row is a delete, as the table's columns."""
    rows = pa.concat_tables([s.append_column("__source", pa.repeat(pa.scalar(i, pa.int32()), s.num_rows))
                             for i, s in enumerate(sources)])
    rows = rows.sort_by([*ORDER, ("__source", "ascending")])
    rows = rows.append_column("__order", pa.array(range(rows.num_rows), pa.int64()))
    last = rows.group_by(list(schema.row_key), use_threads=False).aggregate([("__order", "max")])
    latest = rows.take(last.column("__order_max"))
    present = latest.filter(pc.is_in(latest.column("_op"), pa.array(ChangeKind.accumulations(), pa.string())))
    return present.select(list(schema.column_names))
