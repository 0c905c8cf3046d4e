"""Bring a table's current state (``LakeTable.current``) up to date with changelog rows, in one Delta MERGE.

Why a MERGE and not a rewrite: the current state is partitioned by ``_batch`` (the snapshot batch whose
key range holds the key), so a MERGE whose predicate names the batch rewrites only the files of the
partitions the changes touch; a 10M-row table absorbs 100k changed keys without reading the rest.

What the MERGE applies, per key:

* only the key's last change in changelog order (``_binlog_file``, ``_binlog_pos``, ``_row_seq``), per
  ``_batch`` (:func:`prepare_source` says why); an update is a ``-U``/``+U`` pair whose ``+U`` sorts last,
  so the after image wins;
* a last change that is a retraction (``-D``, or a ``-U`` whose ``+U`` carries another key: an update of
  the primary key) deletes the row; ``+I``/``+U`` replace or insert it;
* only if it is newer than the target row by the same three columns, compared lexicographically: a
  snapshot batch re-run after the stream wrote these changes holds newer rows (its high watermark is
  later) and must not be overwritten by them. So merging the same changes twice changes nothing.

A table without any key is a multiset and takes ``lake.write.multiset.merge_multiset`` instead: counts of
copies are not idempotent as last images are, so there every change counts once and none is compared
with the target's order key (that module says why this is exact, and which re-run it refuses).

The commit carries the application transaction ``(MERGE_APP_ID, through_seq)``: a reader that wants the
table as of the latest stream batch applies only changelog rows with ``_stream_seq > through_seq``, and
:func:`merge_changes` skips a merge whose ``through_seq`` the table already has (a retried task).

Columns: changes carrying a column the table lacks (an ``ADD COLUMN`` upstream) evolve the table in the
same commit (delta-rs's ``merge_schema``); a column the table has and the changes lack (dropped upstream)
is left unchanged by updates and null in inserted rows. ``_stream_seq`` (the changelog's own column) is
never written into the current state.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SchemaChangeError, SnapshotStateError
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS
from airflow_provider_mysqlcdc.lake.format.delta_schema import (
    BATCH_COLUMN,
    MERGE_APP_ID,
    STREAM_SEQ_COLUMN,
    cast_to,
    wider,
)
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, MergeCounts, MergeSpec, quote

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable, TableVersion

ORDER_COLUMNS = ("_binlog_file", "_binlog_pos", "_row_seq")
"""The changelog's total order, most significant first (``lake.changelog``)."""
OP_COLUMN = "_op"
_INDEX = "__merge_row_index"


@dataclass(frozen=True)
class MergeReport:
    """What one :func:`merge_changes` call did. ``version`` is the current table's version after it (its
    version before, when ``skipped``). File counts are delta-rs's merge metrics; ``files_removed`` is the
    number of files the MERGE rewrote (a file with one changed row is replaced as a whole)."""

    version: int
    through_seq: int | None
    skipped: bool
    created: bool
    change_rows: int
    keys: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    files_scanned: int
    files_added: int
    files_removed: int
    seconds: float


def last_change_per_key(changes: pa.Table, row_key: Sequence[str]) -> pa.Table:
    """The last row of each key in changelog order, whatever the order of ``changes``."""
    if changes.num_rows == 0:
        return changes
    indexed = changes.append_column(_INDEX, pa.array(range(changes.num_rows), pa.int64()))
    newest_first = indexed.select([*row_key, *ORDER_COLUMNS, _INDEX]).sort_by(
        [(column, "descending") for column in ORDER_COLUMNS]
    )
    # an ordered aggregation ("first" with use_threads=False) keeps the input order inside each group
    last = newest_first.select([*row_key, _INDEX]).group_by(list(row_key), use_threads=False).aggregate(
        [(_INDEX, "first")]
    )
    chosen = last.column(f"{_INDEX}_first")
    return changes.take(pc.take(chosen, pc.sort_indices(chosen)))


def _newer(source: str, target: str) -> str:
    """SQL: the source row comes after the target row in changelog order (lexicographic on the three)."""
    file, pos, seq = (quote(c) for c in ORDER_COLUMNS)
    s, t = source, target
    return (
        f"({s}.{file} > {t}.{file} OR ({s}.{file} = {t}.{file} AND ({s}.{pos} > {t}.{pos} "
        f"OR ({s}.{pos} = {t}.{pos} AND {s}.{seq} > {t}.{seq}))))"
    )


def _ops(kinds: Sequence[ChangeKind]) -> str:
    return ", ".join(f"'{kind.value}'" for kind in kinds)


RETRACTIONS = tuple(kind for kind in ChangeKind if kind.is_retraction)
_NOT_VALUES = frozenset({*(f.name for f in METADATA_FIELDS), BATCH_COLUMN})


def merge_predicate(row_key: Sequence[str], batches: Sequence[int], key_bounds: tuple[int, int] | None = None) -> str:
    """The MERGE's join: same partition and same key. The literal list of the changes' batches lets
    delta-rs prune the untouched partitions before it scans (it would infer most of it, but the list
    makes it certain and its scan metrics exact). ``key_bounds``: the lowest and highest value of the first
    key column among the changes (an integer column), as literals too, so that delta-rs also skips the files
    whose statistics lie outside: without them it reads every file of the partitions (bench.wide_rows: 2.2 GB
    for one changed row of a 2 GB partition, 1.2 GB with them; a file it touches is rewritten whole)."""
    batch = quote(BATCH_COLUMN)
    listed = ", ".join(str(b) for b in sorted(batches))
    keys = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in row_key)
    bounds = "" if key_bounds is None else (f" AND t.{quote(row_key[0])} >= {int(key_bounds[0])} "
                                            f"AND t.{quote(row_key[0])} <= {int(key_bounds[1])}")
    return f"t.{batch} IN ({listed}) AND t.{batch} = s.{batch} AND {keys}{bounds}"


def _key_bounds(source: pa.Table, column: str) -> tuple[int, int] | None:
    """The lowest and highest value of ``column`` in ``source`` when it is an integer column without NULLs."""
    values = source.column(column)
    if not pa.types.is_integer(values.type) or values.null_count or len(values) == 0:
        return None
    bounds = pc.min_max(values)
    return int(bounds["min"].as_py()), int(bounds["max"].as_py())


def _validate(changes: pa.Table, row_key: Sequence[str]) -> None:
    names = set(changes.column_names)
    if not row_key:
        raise InvalidOptionError("merge_changes needs the table's key columns (row_key); pass at least one")
    missing = [c for c in (*row_key, BATCH_COLUMN, OP_COLUMN, *ORDER_COLUMNS) if c not in names]
    if missing:
        raise InvalidOptionError(
            f"the changes to merge lack the column(s) {missing}: pass changelog rows (lake.changelog's "
            f"METADATA_FIELDS) with the key columns {list(row_key)} and a {BATCH_COLUMN} column (int32, the "
            f"snapshot batch of each key; 0 for a table without snapshot)"
        )
    if changes.column(BATCH_COLUMN).null_count:
        raise InvalidOptionError(f"every change needs its {BATCH_COLUMN}; some rows have it null")


def prepare_source(changes: pa.Table, row_key: Sequence[str]) -> pa.Table:
    """The MERGE's source: the last change per key and batch, without ``_stream_seq``, ``_batch`` as int32.

    Per batch, because each row image carries the batch of its own chunk-key value: a row whose chunk key
    (when it is not the row key) moved it from batch A to B leaves a ``-U`` last in A (deleted there) and a
    ``+U`` last in B (inserted there); with the chunk key as the row key this is the last change per key."""
    _validate(changes, row_key)
    if STREAM_SEQ_COLUMN in changes.column_names:
        changes = changes.drop_columns([STREAM_SEQ_COLUMN])
    batch_index = changes.schema.get_field_index(BATCH_COLUMN)
    if changes.schema.field(batch_index).type != pa.int32():
        changes = changes.set_column(
            batch_index, pa.field(BATCH_COLUMN, pa.int32()), pc.cast(changes.column(BATCH_COLUMN), pa.int32())
        )
    # per key *and batch*: when the snapshot's chunk key is not the row key, an update can move a row to
    # another batch; its before image (in the old batch) then deletes it there, its after image inserts it
    return last_change_per_key(changes, [*row_key, BATCH_COLUMN])


def _create(location: ReplicaTable, source: pa.Table, through_seq: int) -> None:
    """A first current state from changes alone (a table captured without snapshot): their live rows."""
    live = source.filter(pc.is_in(source.column(OP_COLUMN), pa.array(_ACCUMULATIONS)))
    location.create_from(live, [BATCH_COLUMN], merged_at(through_seq))


def merged_at(seq: int) -> CommitTag:
    """A commit to the current state recording the last stream batch merged (``MERGE_APP_ID``), when any."""
    return CommitTag(MERGE_APP_ID, seq) if seq >= 0 else CommitTag()


_ACCUMULATIONS = [kind.value for kind in ChangeKind.accumulations()]


def _widened(table: TableVersion, source: pa.Table, location: ReplicaTable) -> tuple[TableVersion, pa.Table]:
    """The table and the changes with one type per column: a column whose type changed upstream (INT to
    BIGINT, a wider DECIMAL) is widened in the table by one overwrite that keeps the merged sequence
    (rare; the table is read and written a batch at a time, never whole) and in the changes by a cast.
    Types that cannot hold each other's values are a SchemaChangeError naming the columns (delta-rs would
    cast or fail halfway)."""
    stored = table.schema()
    common = [f for f in source.schema if f.name in stored.names]
    target = {f.name: wider(stored.field(f.name).type, f.type) for f in common}
    if any(target[f.name] != stored.field(f.name).type for f in common):
        widened = pa.schema([f.with_type(target.get(f.name, f.type)) for f in stored])
        refused: list[SchemaChangeError] = []

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in table.scan():
                try:
                    rows = cast_to(pa.Table.from_batches([batch]).select(widened.names), widened,
                                   f"the current state at {location.uri}")
                except SchemaChangeError as error:
                    refused.append(error)
                    raise
                yield from rows.to_batches()

        try:
            location.overwrite(pa.RecordBatchReader.from_batches(widened, batches()),
                               merged_at(merged_through(table)), [BATCH_COLUMN])
        except Exception:
            if refused:  # the writer wraps what the rows' reader raised: the error naming the columns instead
                raise refused[0] from None
            raise
        table = location.open() or table
    source = cast_to(source, pa.schema([pa.field(f.name, target.get(f.name, f.type)) for f in source.schema]),
                     f"the changes for {location.uri}")
    return table, source


def _merge(
    table: TableVersion, source: pa.Table, row_key: Sequence[str], through_seq: int | None,
    predicate: str | None = None, changed_only: bool = False,
) -> MergeCounts:
    """The MERGE itself; ``predicate`` replaces the partition-pruning join (the benchmark's baseline).
    ``changed_only``: a newer row replaces the target's only when one of its values differs, so a row
    that was right keeps the order key of the change that made it (what ``lake.read.as_of_read`` reads)."""
    batches = pc.unique(source.column(BATCH_COLUMN)).to_pylist()
    newer = _newer("s", "t")
    op = f"s.{quote(OP_COLUMN)}"
    accumulations = _ops(ChangeKind.accumulations())
    update = f"{newer} AND {op} IN ({accumulations})"
    if changed_only:
        # a column the table lacks yet (the MERGE adds it) is NULL in every target row
        stored = set(table.schema().names)
        values = [c for c in source.column_names if c not in _NOT_VALUES]
        same = [f"(s.{quote(c)} IS NOT DISTINCT FROM t.{quote(c)})" if c in stored else f"(s.{quote(c)} IS NULL)"
                for c in values]
        update += f" AND NOT ({' AND '.join(same)})"
    return table.merge(MergeSpec(
        source, predicate or merge_predicate(row_key, batches, _key_bounds(source, row_key[0])),
        delete_when=f"{newer} AND {op} IN ({_ops(RETRACTIONS)})",
        update_when=update,
        insert_when=f"{op} IN ({accumulations})",
        tag=CommitTag() if through_seq is None else merged_at(through_seq),
    ))


def merged_through(table: TableVersion) -> int:
    """The last stream sequence number merged into the current table, -1 when none was."""
    return table.applied(MERGE_APP_ID)


def merge_changes(
    current: ReplicaTable, changes: pa.Table, row_key: Sequence[str], through_seq: int | None, *, force: bool = False,
    changed_only: bool = False, opened: TableVersion | None = None,
) -> MergeReport:
    """Apply ``changes`` (changelog rows of one table, any number per key, any order, each with its
    ``_batch``) to the current-state table at ``current``, in one commit that records
    ``(MERGE_APP_ID, through_seq)``: ``through_seq`` is the last stream batch (``_stream_seq``) the changes
    cover. A merge the table already records (its merged sequence >= ``through_seq``) is skipped unless
    ``force``; a missing table is created, partitioned by ``_batch``, from the changes' live rows.
    ``through_seq`` None: rows that are no stream batch (a re-snapshot's, ``engine.verification.resnapshot``), merged by
    the same rule into an existing table, whose merged sequence stays as it is; with ``changed_only`` a
    matched row is replaced only when a value differs (see ``_merge``). ``opened``: the table as the caller
    opened it already (the state merge reads its merged sequence first), so that its log is not loaded twice.

    Raises InvalidOptionError when ``changes`` lack the key, ``_batch`` or metadata columns, and
    SchemaChangeError when a column's type in the changes differs from the table's.
    """
    started = time.perf_counter()
    source = prepare_source(changes, row_key)
    table = opened if opened is not None else current.open()
    if table is not None and not force and through_seq is not None and merged_through(table) >= through_seq:
        return _report(table.version(), through_seq, changes, source, started, skipped=True)
    if table is None:
        if through_seq is None:
            raise SnapshotStateError(f"no current-state table at {current.uri} to merge re-read rows into")
        _create(current, source, through_seq)
        table = current.open()
        assert table is not None
        return _report(table.version(), through_seq, changes, source, started, created=True,
                       counts=MergeCounts(inserted=table.count(), files_added=len(table.files())))
    if source.num_rows == 0:
        return _report(table.version(), through_seq, changes, source, started, skipped=True)
    table, source = _widened(table, source, current)
    counts = _merge(table, source, row_key, through_seq, changed_only=changed_only)
    return _report(table.version(), through_seq, changes, source, started, counts=counts)


def _report(
    version: int, through_seq: int | None, changes: pa.Table, source: pa.Table, started: float, *,
    skipped: bool = False, created: bool = False, counts: MergeCounts | None = None,
) -> MergeReport:
    counts = counts or MergeCounts()
    return MergeReport(
        version=version, through_seq=through_seq, skipped=skipped, created=created,
        change_rows=changes.num_rows, keys=source.num_rows,
        rows_inserted=counts.inserted, rows_updated=counts.updated, rows_deleted=counts.deleted,
        files_scanned=counts.files_scanned, files_added=counts.files_added, files_removed=counts.files_removed,
        seconds=time.perf_counter() - started,
    )
