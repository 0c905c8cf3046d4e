"""The replica as it was at a source position: a binlog offset, a GTID position or a commit time.

Why no old Delta versions: the current table's old versions are vacuumed after 24 hours, and they
only exist at the MERGE's commits anyway. The changelog has everything needed instead. With
``binlog_row_image=FULL`` every ``-U`` and ``-D`` carries the row's before image, so the state at a point
X is the current table (merged through stream batch S, i.e. its offset O_S) rolled forward over the
unmerged changes up to X, or back over the merged changes after X. Per key, in one pass over the key's
history (its current row, which carries the order key of the last change applied to it, its unmerged
changelog rows, and its merged changelog rows after X; merged rows up to X are in the current row):

* if the history has a row at or before X, the last of them decides: an accumulation (``+I``, ``+U``,
  a snapshot row) is the key's row at X, a retraction (``-U`` of a key change, ``-D``) means no row;
* otherwise the first row after X decides: a retraction carries the row as it was at X (its before
  image), an accumulation means the key did not exist at X.

At X >= O_S this reads the current table exactly as ``read_table`` does (so a row damaged there shows,
which verification relies on); below O_S, a key changed after X comes from the changelog.

Coverage. A chunk's changes at or before its high watermark (HW) are not in the changelog (the emit
filter drops them: they are in its snapshot rows), so the history is complete only after the table's
highest HW: X is covered when highest HW <= X <= the stream's checkpoint offset (the offset where the
table stopped being captured, for a table taken out of ``tables``). Anything else is an ``AsOfError``
naming the covered range. A table captured without a snapshot (a stream-only startup mode) never had
its full state in the lake and is refused.

Positions (``cdc.as_of.AsOf``): an offset, or a commit time; a GTID position is first turned into an
offset on the source (``cdc.as_of.resolve_as_of``). A commit time reads from the lake alone: the
state after every change whose ``_op_ts`` (second resolution, the binlog's event time) is at
or before it, covered when the table's changelog holds a change after the time (the stream has read
past it) and the snapshot's last batch was committed before it (or a change after its highest HW is
at or before the time).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.as_of import AsOf, AsOfValue
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRange
from airflow_provider_mysqlcdc.exceptions import AsOfError, InvalidOptionError
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, stored_type
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.committed import (
    METADATA,
    ORDER,
    CommittedTable,
    changes_between,
    committed_table,
    conform,
)
from airflow_provider_mysqlcdc.lake.read.current_scan import as_reader, current_past_keys
from airflow_provider_mysqlcdc.lake.write.merge import ORDER_COLUMNS
from airflow_provider_mysqlcdc.lake.write.multiset import CURRENT_ROW, multiset_at
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

_SOURCE = "__as_of_source"
MERGED = "__merged"
"""History's column marking the changelog rows already merged into the current table."""
_INDEX = "__as_of_index"


@dataclass(frozen=True)
class Coverage:
    """The offsets a table's as-of reads cover: from its highest snapshot HW to its stream offset."""

    table: TableId
    low: BinlogOffset
    high: BinlogOffset
    snapshot_committed_ms: int
    """When the batch holding the highest HW was committed (the Delta commit's time): a lower bound in
    time for reads by commit time."""
    replaced: bool = False
    """Whether ``low`` is where the table's rows were replaced (TRUNCATE, a re-read), not its snapshot's
    highest HW: a read by time must then be anchored by a change after ``low``."""

    def check(self, offset: BinlogOffset) -> None:
        if offset < self.low or offset > self.high:
            raise AsOfError(
                f"the lake covers {self.table} from {self.low} ("
                + ("where its rows were last replaced without row events: a TRUNCATE, a re-read after a DDL, or a "
                   "re-read after a purged binlog range (a !G record in its changelog)"
                   if self.replaced else "its snapshot's highest high watermark") + f") to "
                f"{self.high} (the stream's checkpoint), not {offset}: "
                + (("positions before it are not in the lake (the rows replaced there have no history in the lake)"
                    if self.replaced else "positions before the snapshot finished are not in the lake (each chunk's "
                    "rows are as of its own high watermark)") if offset < self.low
                   else "the stream has not committed that far yet; run it (or wait) and read again")
            )

    def __str__(self) -> str:
        return f"{self.low} .. {self.high}"


def coverage(lake: Lake, table: TableId) -> Coverage:
    """What as-of reads of ``table`` can cover now (``AsOfError`` when nothing)."""
    store = SnapshotStore(lake)
    plan = store.read_plan(table)
    if plan is None:
        raise AsOfError(
            f"{table} has no snapshot in the lake at {lake.base_uri} (captured by a stream-only startup mode, or not "
            f"at all): the lake never held its full state, so it cannot be read as of a position"
        )
    manifests = store.manifests(plan)
    if any(m is None for m in manifests):
        raise AsOfError(f"the snapshot of {table} is not finished ({sum(m is None for m in manifests)} of "
                        f"{len(manifests)} batches not committed): run its snapshot tasks, then read as of a position")
    last = max((m for m in manifests if m is not None), key=lambda m: m.high_watermark)
    checkpoint = StreamStore(lake).read_checkpoint()
    if checkpoint is not None and table in checkpoint.stopped:
        high = checkpoint.stopped[table].offset
    elif checkpoint is not None and table in checkpoint.schemas:
        high = checkpoint.visible[1]
    else:
        raise AsOfError(
            f"the stream has not captured {table} yet: the lake holds only its snapshot, each chunk as of its own "
            f"high watermark, so no single position; run the stream task, then read as of a position"
        )
    low = last.high_watermark
    replaced = checkpoint.history_from.get(table)
    if replaced is not None and low < replaced:  # a DDL replaced its rows there (TRUNCATE, a re-read)
        low = replaced
    if high < last.high_watermark:
        raise AsOfError(f"the stream's checkpoint ({high}) has not yet passed the highest high watermark of "
                        f"{table}'s snapshot ({last.high_watermark}): run the stream, then read as of a position")
    return Coverage(table, low, high, _commit_ms(lake, table, last.delta_version), replaced=low is replaced)


def _commit_ms(lake: Lake, table: TableId, version: int) -> int:
    commit = lake.table(table).current.commit(version)
    return 0 if commit is None else commit.timestamp_ms  # 0: a cleaned-up log, no time bound from the snapshot


def order_bound(offset: BinlogOffset) -> tuple[int, int, int]:
    """The largest changelog order key (``_binlog_file``, ``_binlog_pos``, ``_row_seq``) at or before
    ``offset``, in ``lake.changelog``'s encoding: a change's row sequence packs the row events and rows
    of its transaction taken up to and including it (``events << 32 | rows << 1 | after-image``), the
    same skips its offset carries, so a key compares as the change's offset compares with ``offset``."""
    return (file_index(offset.file), offset.position,
            (offset.events_to_skip << 32) | (offset.rows_to_skip << 1) | 1)


def at_or_before(rows: pa.Table, offset: BinlogOffset) -> pa.Array:
    """For each lake row: is its change (or snapshot HW) at or before ``offset``."""
    file, pos, seq = (pa.scalar(v, rows.schema.field(c).type) for v, c in zip(order_bound(offset), ORDER_COLUMNS,
                                                                               strict=True))
    f, p, s = (rows.column(c) for c in ORDER_COLUMNS)
    return pc.or_(pc.less(f, file),
                  pc.and_(pc.equal(f, file), pc.or_(pc.less(p, pos), pc.and_(pc.equal(p, pos), pc.less_equal(s, seq)))))


@dataclass(frozen=True)
class History:
    """Every committed row of a table's keys a reader needs for as-of reads: the current table's rows
    (optionally one snapshot batch's partition) and every changelog row up to the checkpoint, as the
    table's columns and the metadata columns (``_op_ts`` included), in changelog order."""

    schema: TableSchema
    rows: pa.Table
    coverage: Coverage

    @classmethod
    def load(cls, lake: Lake, table: str | TableId, batch: int | None = None,
             key_range: KeyRange | None = None) -> History:
        """``batch``: only that snapshot batch's partition of the current table (the rows of its key range;
        the changelog rows of other keys are kept and harmless: the caller filters keys). ``key_range``:
        ``[start, end)`` of the chunk key (``None`` unbounded), for an integer chunk key that is part of the
        row key: only those keys' rows, from every partition and the changelog (file statistics prune)."""
        table = table if isinstance(table, TableId) else TableId.parse(table)
        covered = coverage(lake, table)
        committed = committed_table(lake, table)
        where = _key_filter(committed.schema, key_range) if key_range is not None else None
        return cls(committed.schema, _history_rows(committed, batch, where), covered)

    def check(self, as_of: AsOfValue) -> AsOf:
        """``as_of`` parsed (see ``AsOf.parse``), or an ``AsOfError`` where the lake does not cover it."""
        point = AsOf.parse(as_of)
        if point.gtid is not None:
            raise AsOfError(f"as_of {point}: a GTID position names transactions, not a place in the lake's "
                            f"changelog; turn it into an offset with resolve_as_of(as_of, config, server_id) first")
        if point.offset is not None:
            self.coverage.check(point.offset)
        else:
            self._check_time(point.timestamp_ms or 0)
        return point

    def at(self, as_of: AsOfValue, rows: pa.Table | None = None) -> pa.Table:
        """The table as of ``as_of`` (an offset or a time; see ``AsOf.parse``): one row per key, sorted
        by key, the table's columns. ``rows``: a subset of ``self.rows`` (e.g. one chunk's keys)."""
        point = self.check(as_of)
        rows = self.rows if rows is None else rows
        if point.offset is not None:
            before = at_or_before(rows, point.offset)
        else:
            before = pc.less_equal(rows.column("_op_ts"), pa.scalar(point.timestamp_ms or 0, pa.int64()))
        # merged changes up to the point are in the current table's rows already: they are not consulted,
        # so the current table is what is read there (as read_table does), damaged or not
        keep = pc.invert(pc.and_(rows.column(MERGED), before))
        if self.schema.keyless:
            return multiset_at(rows.filter(keep), pc.filter(before, keep), self.schema.column_names, MERGED)
        return state_at(self.schema, rows.filter(keep), pc.filter(before, keep))

    def _check_time(self, millis: int) -> None:
        changes = self.rows.filter(pc.not_equal(self.rows.column("_op_ts"), 0))
        times = changes.column("_op_ts")
        if not pc.any(pc.greater(times, millis)).as_py():
            latest = pc.max(times).as_py()
            raise AsOfError(
                f"as of time {millis} ms: the lake cannot tell it holds every change of {self.coverage.table} up to "
                f"then (its latest change is of {latest} ms; the stream may not have read past that time): "
                f"read as of a binlog offset up to {self.coverage.high}, or resolve the time on the server "
                f"with resolve_as_of"
            )
        after_snapshot = pc.invert(at_or_before(changes, self.coverage.low))
        anchored = pc.any(pc.and_(after_snapshot, pc.less_equal(times, millis))).as_py()
        if not anchored and self.coverage.replaced:
            raise AsOfError(
                f"as of time {millis} ms: {self.coverage.table}'s rows were replaced at {self.coverage.low} (a "
                f"TRUNCATE, a re-read after a DDL or after a purged binlog range), and no change after that is at or "
                f"before the time: read as of a binlog offset from {self.coverage.low} on"
            )
        if not anchored and millis < self.coverage.snapshot_committed_ms:
            raise AsOfError(
                f"as of time {millis} ms is before {self.coverage.table}'s snapshot finished (its last batch "
                f"was committed at {self.coverage.snapshot_committed_ms} ms): positions before it are not in the lake"
            )


def _key_filter(schema: TableSchema, key_range: KeyRange) -> pc.Expression:
    """``start <= key < end`` on the chunk key's stored column (an integer key: Arrow orders it as SQL)."""
    column = schema.chunk_key_column
    arrow_type = arrow_schema(schema).field(column.name).type
    if not pa.types.is_integer(arrow_type) or not (schema.keyless or column.name in schema.row_key):
        raise InvalidOptionError(f"a key range reads an integer chunk key of the row key, not {column.name} of "
                                 f"{schema.id} ({column.column_type})")
    stored, key = stored_type(arrow_type), pc.field(column.name)
    start, end = (None if v is None else pa.scalar(v, arrow_type).cast(stored)
                  for v in (key_range.start, key_range.end))
    conditions = [c for c in (None if start is None else key >= start, None if end is None else key < end)
                  if c is not None]
    return functools.reduce(operator.and_, conditions) if conditions else pc.scalar(True)


def _history_rows(committed: CommittedTable, batch: int | None, where: pc.Expression | None) -> pa.Table:
    """The current table's rows, then the changelog's merged and unmerged rows (``MERGED`` tells them
    apart), in changelog order; on a tie the current table's row first."""
    schema = committed.schema
    current = None
    if committed.current is not None:
        in_batch = None if batch is None else pc.field(BATCH_COLUMN) == batch
        either = [c for c in (where, in_batch) if c is not None]
        rows = committed.current.read(where=functools.reduce(operator.and_, either) if either else None)
        current = conform(rows, lake_schema(schema), schema).select([*schema.column_names, *METADATA])
    return _history_of(current, *_changes(committed, where))


def _changes(committed: CommittedTable, where: pc.Expression | None = None) -> tuple[pa.Table, pa.Table]:
    """The changelog rows merged into the current table, and those not merged yet."""
    return (changes_between(committed, -1, committed.merged, dropped=False, where=where),
            changes_between(committed, committed.merged, committed.through, dropped=False, where=where))


def _history_of(current: pa.Table | None, merged: pa.Table, unmerged: pa.Table) -> pa.Table:
    """``_history_rows`` of the current rows ``current`` (None: none) and the changelog rows given."""
    sources = [] if current is None else [(current, False)]
    sources += [(merged, True), (unmerged, False)]
    first_change = len(sources) - 2  # the current table's rows come before, when there are any
    rows = pa.concat_tables([
        s.append_column(_SOURCE, pa.repeat(pa.scalar(i, pa.int32()), s.num_rows))
        .append_column(MERGED, pa.repeat(pa.scalar(merged), s.num_rows))
        .append_column(CURRENT_ROW, pa.repeat(pa.scalar(i < first_change), s.num_rows))
        for i, (s, merged) in enumerate(sources)])
    return rows.sort_by([*ORDER, (_SOURCE, "ascending")]).drop_columns([_SOURCE])


def state_at(schema: TableSchema, rows: pa.Table, before: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Per key of ``rows`` (in changelog order), its row where ``before`` splits its history: the last row
    before decides if there is one, else the first row after (module docstring)."""
    index = pa.array(range(rows.num_rows), pa.int64())
    before = pc.fill_null(before, False)
    null = pa.scalar(None, pa.int64())
    grouped = pa.table({
        **{k: rows.column(k) for k in schema.row_key},
        "last_before": pc.if_else(before, index, null),
        "first_after": pc.if_else(before, null, index),
    }).group_by(list(schema.row_key), use_threads=False).aggregate([("last_before", "max"), ("first_after", "min")])
    last_before = grouped.column("last_before_max")
    chosen = pc.if_else(pc.is_valid(last_before), last_before, grouped.column("first_after_min"))
    picked = rows.append_column(_INDEX, index).take(chosen)
    retraction = pc.invert(pc.is_in(picked.column("_op"), pa.array(ChangeKind.accumulations(), pa.string())))
    was_before = pc.is_valid(last_before)
    # present: an accumulation at or before the point, or a retraction (its before image) after it
    present = pc.if_else(was_before, pc.invert(retraction), retraction)
    kept = picked.filter(present)
    return kept.select(list(schema.column_names)).sort_by([(k, "ascending") for k in schema.row_key])


def scan_as_of(lake: Lake, table: str, as_of: AsOfValue) -> tuple[TableSchema, pa.RecordBatchReader]:
    """``scan_table(lake, table, as_of=...)``: the table as it was at ``as_of`` (see ``AsOf.parse``), as a
    stream, and its schema. The changelog is read whole (it decides every key it holds); the current table
    batch by batch: a key without a change in the changelog is as the current table has it at every covered
    position (its row is from the snapshot, at or before the highest HW), so only the current rows of keys
    with changes are held, for ``History.at`` (``lake.read.current_scan``). A keyless table is read into memory.
    The position is checked before any row is returned."""
    table_id = TableId.parse(table)
    covered = coverage(lake, table_id)
    committed = committed_table(lake, table_id)
    schema = committed.schema
    if schema.keyless or committed.current is None:
        rows = History(schema, _history_rows(committed, None, None), covered).at(as_of)
        return schema, as_reader(rows.schema, iter([rows]))
    merged, unmerged = _changes(committed)
    point = History(schema, _history_of(None, merged, unmerged), covered).check(as_of)
    changes = pa.concat_tables([merged, unmerged])
    columns = changes.select(list(schema.column_names)).schema
    current = committed.current

    def tables() -> Iterator[pa.Table]:
        touched: list[pa.Table] = []
        for rows in current_past_keys(current, schema, changes, touched):
            yield rows.select(list(schema.column_names))
        held = pa.concat_tables([changes.slice(0, 0), *touched])
        yield History(schema, _history_of(held, merged, unmerged), covered).at(point)

    return schema, as_reader(columns, tables())

