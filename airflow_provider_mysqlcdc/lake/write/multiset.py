"""Keyless tables: rows identified by their whole image, duplicates kept (docs/design/invariants.md, invariant 7).

A table with no primary key and no UNIQUE NOT NULL index may hold the same row twice, and a
``DELETE ... LIMIT 1`` removes one copy of it. Its replica is a multiset of row images.

**Representation.** The current-state Delta table keeps every copy as a row of its own, with an
ordinal ``_dup`` (0, 1, ... per distinct image within its ``_batch`` partition), not one row with a
count: a reader with ``deltalake`` alone, DuckDB or Polars sees the exact rows the source has, and
``SELECT *`` needs no expansion. ``_dup`` makes each copy addressable by the MERGE; it carries no
meaning beyond that (which copy a ``DELETE ... LIMIT 1`` removed cannot be known, nor matters: the
copies are equal). Copies of one image are always in one partition, as the chunk key is one of the
image's columns.

**Changes.** In the changelog a keyless row's change is one image with its kind: ``+I`` and ``+U``
add one copy of the image, ``-D`` and ``-U`` remove one. Applied in changelog order to the number
of copies there are (a removal of an image with no copy left removes nothing: that happens only to
tables captured without a snapshot, whose older rows the lake never had).

**Which changes count.** For keyed tables a change older than the row in the current table is
skipped, so replaying a change twice does nothing. Counts have no such idempotence: every change
must count exactly once, so whether a change is contained in a snapshot row must be decided exactly.
The rule: a snapshot chunk of a keyless table is the table's rows exactly as of one binlog position
(``cdc.chunk_reader``: LW = HW, read inside MariaDB's consistent snapshot), and the stream appends
to the changelog exactly the changes after their chunk's position (its emit filter, the same for
keyed tables). So every changelog row counts, on top of the snapshot's rows, once: the MERGE (and
``read_table``) apply every change not merged yet without comparing order keys. That holds as long
as a committed snapshot batch is not replaced after the stream captured changes of its table: a
re-run batch would hold rows as of a later position, and the changes between the two positions
would count twice. So ``lake.write.snapshot_commit`` refuses such a re-run for a keyless table (re-snapshot
the whole table instead), and the repair re-snapshot and as-of reads refuse keyless tables.

**The MERGE.** For each image the changes touch, the copies the current table has are read first
(filtered on the chunk-key values of the changes and their partitions, which the partitioning and
the file statistics prune), the changes are applied to that count, and one MERGE on (``_batch``,
every column null-safe equal, ``_dup``) inserts the new ordinals and deletes the highest ones.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, STREAM_SEQ_COLUMN
from airflow_provider_mysqlcdc.lake.format.table_format import MergeCounts, MergeSpec, quote
from airflow_provider_mysqlcdc.lake.write.merge import _report, _widened, merged_at, merged_through

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable, TableVersion
    from airflow_provider_mysqlcdc.lake.write.merge import MergeReport

DUP_COLUMN = "_dup"
"""The ordinal of a copy among the equal rows of a keyless table's current state (0, 1, ...)."""
DUP_FIELD = pa.field(DUP_COLUMN, pa.int32())
ORDER = [("_binlog_file", "ascending"), ("_binlog_pos", "ascending"), ("_row_seq", "ascending")]
_ADDS = frozenset(kind.value for kind in ChangeKind.accumulations())
_REMOVES = frozenset(kind.value for kind in ChangeKind if kind.is_row and kind.is_retraction)
Image = tuple[Any, ...]
K = TypeVar("K", bound=Hashable)


def images(rows: pa.Table, columns: Sequence[str]) -> list[Image]:
    """Each row's image: its values of ``columns`` as a tuple (a column ``rows`` lack is NULL)."""
    values = [rows.column(c).to_pylist() if c in rows.column_names else [None] * rows.num_rows for c in columns]
    return list(zip(*values, strict=True)) if columns else [() for _ in range(rows.num_rows)]


def dup_ordinals(rows: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The ``_dup`` of each row: how many rows before it (in ``rows``' order) have the same ``columns``."""
    seen: Counter[Image] = Counter()
    ordinals = []
    for image in images(rows, columns):
        ordinals.append(seen[image])
        seen[image] += 1
    return pa.array(ordinals, pa.int32())


def with_dup(rows: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``rows`` with their ``_dup`` column (replaced if they have one) over ``columns``."""
    if DUP_COLUMN in rows.column_names:
        rows = rows.drop_columns([DUP_COLUMN])
    return rows.append_column(DUP_FIELD, dup_ordinals(rows, columns))


def apply_counts(counts: Counter[K], changes: Iterable[tuple[str, K]]) -> set[K]:
    """Apply ``(op, image)`` changes in order to ``counts``: ``+I``/``+U`` add a copy, ``-D``/``-U`` remove
    one (none below zero). Returns the images touched. The one rule of the fix-up, the MERGE and reads."""
    touched: set[K] = set()
    for op, image in changes:
        touched.add(image)
        if op in _ADDS:
            counts[image] += 1
        elif op in _REMOVES and counts[image] > 0:
            counts[image] -= 1
    return touched


def current_rows(current: pa.Table, changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The rows of the current table ``current`` with ``changes`` (changelog rows not merged yet) applied,
    as the columns ``columns``, one row per copy, sorted: ``read_table`` of a keyless table."""
    counts: Counter[Image] = Counter(images(current, columns))
    ordered = changes.sort_by(ORDER)
    apply_counts(counts, zip(ordered.column("_op").to_pylist(), images(ordered, columns), strict=True))
    return _expanded(counts, current.select(list(columns)).schema)


CURRENT_ROW = "__current_row"
"""``lake.read.as_of_read``'s history column: the row is the current table's (a copy), not a changelog row."""
_INVERSE = {op: "-D" for op in _ADDS} | {op: "+I" for op in _REMOVES}


def multiset_at(rows: pa.Table, before: pa.Array | pa.ChunkedArray, columns: Sequence[str], merged_column: str,
                ) -> pa.Table:
    """The copies of a keyless table at the point ``before`` splits ``rows`` (``lake.read.as_of_read``'s history, in
    changelog order, without the merged changes at or before the point): the current table's copies, plus
    the unmerged changes at or before the point, minus the merged changes after it (undone newest first)."""
    before_list = pc.fill_null(before, False).to_pylist()
    current = rows.column(CURRENT_ROW).to_pylist()
    merged = rows.column(merged_column).to_pylist()
    all_images = images(rows, columns)
    counts: Counter[Image] = Counter(i for i, c in zip(all_images, current, strict=True) if c)
    ops = rows.column("_op").to_pylist()
    changes = list(zip(ops, all_images, current, merged, before_list, strict=True))
    apply_counts(counts, ((op, image) for op, image, cur, mer, bef in changes if not cur and not mer and bef))
    apply_counts(counts, ((_INVERSE[op], image) for op, image, cur, mer, bef in reversed(changes)
                          if not cur and mer and not bef and op in _INVERSE))
    return _expanded(counts, rows.select(list(columns)).schema)


def _expanded(counts: Counter[Image], schema: pa.Schema) -> pa.Table:
    """One row per copy counted in ``counts`` (images in ``schema``'s columns), sorted by every column."""
    expanded = [image for image, n in counts.items() for _ in range(n)]
    table = pa.Table.from_arrays(
        [pa.array([image[i] for image in expanded], f.type) for i, f in enumerate(schema)], schema=schema)
    return table.sort_by([(c, "ascending") for c in schema.names]) if schema.names else table


def merge_multiset(
    current: ReplicaTable, changes: pa.Table, columns: Sequence[str], chunk_key: str, through_seq: int,
    *, force: bool = False, opened: TableVersion | None = None,
) -> MergeReport:
    """Apply ``changes`` (changelog rows of one keyless table, any order, with ``_batch``) to its current
    table at ``current`` as a multiset, in one commit recording ``(MERGE_APP_ID, through_seq)``; skipped
    when the table has it already (unless ``force``), created from the changes when missing. ``opened``: the
    table as the caller opened it already (``merge_changes`` says why)."""
    started = time.perf_counter()
    if STREAM_SEQ_COLUMN in changes.column_names:
        changes = changes.drop_columns([STREAM_SEQ_COLUMN])
    changes = changes.sort_by(ORDER)
    table = opened if opened is not None else current.open()
    if table is not None and not force and merged_through(table) >= through_seq:
        return _report(table.version(), through_seq, changes, changes, started, skipped=True)
    if table is None:
        _create(current, changes, columns, through_seq)
        table = current.open()
        assert table is not None
        return _report(table.version(), through_seq, changes, changes, started, created=True,
                       counts=MergeCounts(inserted=table.count()))
    if changes.num_rows == 0:
        return _report(table.version(), through_seq, changes, changes, started, skipped=True)
    table, changes = _widened(table, changes, current)
    copies = _copies(table, changes, chunk_key)
    source = _merge_source(copies, changes, columns)
    if source.num_rows == 0:  # changes that cancel out: only the merged sequence moves
        source = changes.slice(0, 0).append_column(DUP_COLUMN, pa.array([], pa.int32()))
    stored = set(table.schema().names)
    same = [f"(s.{quote(c)} IS NOT DISTINCT FROM t.{quote(c)})" for c in columns if c in stored]
    batches = ", ".join(str(b) for b in sorted(set(source.column(BATCH_COLUMN).to_pylist())) or [-1])
    batch, dup = quote(BATCH_COLUMN), quote(DUP_COLUMN)
    predicate = " AND ".join([f"t.{batch} IN ({batches})", f"t.{batch} = s.{batch}", f"t.{dup} = s.{dup}", *same])
    removes = ", ".join(f"'{op}'" for op in sorted(_REMOVES))
    counts = table.merge(MergeSpec(
        source, predicate, delete_when=f"s.{quote('_op')} IN ({removes})", update_when=None,
        insert_when=f"s.{quote('_op')} NOT IN ({removes})", tag=merged_at(through_seq),
    ))
    return _report(table.version(), through_seq, changes, source, started, counts=counts)


def _create(location: ReplicaTable, changes: pa.Table, columns: Sequence[str], through_seq: int) -> None:
    """A first current state from changes alone (a table captured without snapshot): the copies they leave."""
    empty = changes.slice(0, 0).append_column(DUP_COLUMN, pa.array([], pa.int32()))
    rows = pa.concat_tables([empty, _merge_source(empty, changes, columns)])
    location.create_from(rows, [BATCH_COLUMN], merged_at(through_seq))


def _copies(table: TableVersion, changes: pa.Table, chunk_key: str) -> pa.Table:
    """The current table's rows that may be copies of the changes' images: those of the changes'
    partitions with one of their chunk-key values (partition pruning and file statistics skip the rest)."""
    batches = pc.unique(changes.column(BATCH_COLUMN))
    in_batches = pc.field(BATCH_COLUMN).isin(batches)
    if not chunk_key:  # a table captured without snapshot, split on nothing: its partition 0 as a whole
        return table.read(where=in_batches)
    keys = changes.column(chunk_key)
    values = pc.unique(keys.drop_null())
    condition = pc.field(chunk_key).isin(values)
    if keys.null_count:
        condition = condition | pc.field(chunk_key).is_null()
    return table.read(where=in_batches & condition)


def _merge_source(copies: pa.Table, changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The MERGE's source: per (partition, image) the changes touch, the copies to insert (their new
    ordinals, the metadata of the image's last change) and the copies to delete (the highest ordinals,
    ``_op`` ``-D``), as rows of the changes' columns and ``_dup``."""
    existing: dict[tuple[Any, Image], list[int]] = {}
    for image, batch, ordinal in zip(images(copies, columns), copies.column(BATCH_COLUMN).to_pylist(),
                                     copies.column(DUP_COLUMN).to_pylist(), strict=True):
        existing.setdefault((batch, image), []).append(ordinal)
    counts: Counter[tuple[Any, Image]] = Counter({k: len(v) for k, v in existing.items()})
    keyed = list(zip(changes.column(BATCH_COLUMN).to_pylist(), images(changes, columns), strict=True))
    ops = changes.column("_op").to_pylist()
    last = {key: index for index, key in enumerate(keyed)}  # each (partition, image)'s last change
    last_add = {key: index for index, (key, op) in enumerate(zip(keyed, ops, strict=True)) if op in _ADDS}
    touched = apply_counts(counts, zip(ops, keyed, strict=True))
    takes: list[int] = []
    ordinals: list[int] = []
    deletes: list[int] = []
    for key in sorted(touched, key=lambda k: last[k]):
        have = sorted(existing.get(key, []))
        wanted = counts[key]
        if wanted > len(have):  # copies were added, so some change added one: inserted with its metadata
            taken = set(have)
            free = (n for n in range(wanted + len(have)) if n not in taken)
            new = [next(free) for _ in range(wanted - len(have))]
            takes += [last_add[key]] * len(new)
            ordinals += new
        else:
            gone = have[wanted:]
            takes += [last[key]] * len(gone)
            ordinals += gone
            deletes += [len(takes) - len(gone) + i for i in range(len(gone))]
    rows = changes.take(pa.array(takes, pa.int64()))
    if deletes:
        kinds = rows.column("_op").to_pylist()
        for i in deletes:
            kinds[i] = ChangeKind.DELETE.value
        rows = rows.set_column(rows.schema.get_field_index("_op"), "_op", pa.array(kinds, pa.string()))
    return rows.append_column(pa.field(DUP_COLUMN, pa.int32()), pa.array(ordinals, pa.int32()))


def check_not_keyless(schema: TableSchema, what: str) -> None:
    """Refuse ``what`` (an operation not built for multisets) on a keyless table, never returning wrong rows."""
    if schema.keyless:
        raise SnapshotStateError(
            f"{what} is not available for {schema.id}, a table without any key whose rows are a multiset of whole "
            f"images: to bring its replica back in line with the source, re-snapshot the whole table (delete its "
            f"folder <base_uri>/{schema.id.database}/{schema.id.table} in the lake and run the DAG again)"
        )
