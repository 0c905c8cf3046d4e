"""Bringing each table's current state up to date: MERGE of the changelog rows not merged yet.

The stream appends every batch to the tables' changelogs; the current-state tables follow by MERGE
every ``merge_interval_seconds`` and whenever the stream stops or defers, so a reader of the
current state alone (any Delta reader) is at most that far behind, and ``read_table`` applies the
rest itself. The current state is partitioned by snapshot batch: each changed row goes to the
partition of the batch whose chunks hold its chunk-key value (in the column's collation order), so
a MERGE rewrites only the partitions whose keys changed, and a re-run of one snapshot batch still
replaces exactly its rows. A table captured without a snapshot has one partition, 0.

Only the tables with changelog rows since the last MERGE are opened: the checkpoint keeps the last
batch that wrote each table (``touched``) and the batch through which the last MERGE took every table
(``merged_seq``), so a MERGE of a stream over a thousand tables costs what its changed tables cost.
Where ``merged_seq`` is not known (a checkpoint of format 3, a new one) the first MERGE looks at all.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRanges
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, for_delta
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.parallel import each
from airflow_provider_mysqlcdc.lake.read.replica import unmerged_changes
from airflow_provider_mysqlcdc.lake.write.merge import MergeReport, merge_changes, merged_through
from airflow_provider_mysqlcdc.lake.write.multiset import merge_multiset
from airflow_provider_mysqlcdc.lake.write.stream_commit import COMMIT_THREADS

_log = logging.getLogger(__name__)
ROUND_DETAIL_TABLES = 10
"""A MERGE round over more tables logs one line for the round at INFO and each table's at DEBUG: a round over
a whole database would log a line for each of its tables."""


class StateMerger:
    """Merges the stream's committed changes into the current-state tables of one lake."""

    def __init__(self, lake: Lake, control: Any) -> None:
        self.lake = lake
        self.control = control
        self._ranges: dict[TableId, tuple[str, KeyRanges, list[int]] | None] = {}
        self._control = threading.Lock()  # one query at a time on the control connection

    def merge(self, checkpoint: Checkpoint) -> dict[TableId, int]:
        """Merge every table's changelog rows up to ``checkpoint``'s last whole transaction (its ``visible``
        batch: a transaction committed in parts is merged once complete); returns the tables that had
        some, with how many (those an interrupted earlier run left unmerged included).

        The tables are merged on a bounded pool, several at once (delta-rs reads and merges without the
        GIL), so a round over many tables takes about what its largest tables take; only the questions to
        the server (string keys' collation weights, to find the changed keys' snapshot batches) go one at a
        time, on the one control connection: the plans and changelogs are read at once."""
        through, started = checkpoint.visible[0], time.monotonic()
        due = [(t, schema) for t in self.due(checkpoint) if (schema := checkpoint.schema_of(t)) is not None]
        level = logging.INFO if len(due) <= ROUND_DETAIL_TABLES else logging.DEBUG
        reports = each(lambda item: self._merge_table(*item, through, level), due, COMMIT_THREADS, "stream-merge")
        checkpoint.merged_seq = through  # written with the next checkpoint
        merged = {table: r for (table, _), r in zip(due, reports, strict=True) if r is not None}
        if level != logging.INFO and merged:
            slowest = max(merged, key=lambda t: merged[t].seconds)
            _log.info("merged %d changes of %d tables into their current states in %.1f s: %d inserted, %d updated, "
                      "%d deleted, %d files rewritten; the slowest table %s (%d changes, %.2f s)",
                      sum(r.change_rows for r in merged.values()), len(merged), time.monotonic() - started,
                      *(sum(getattr(r, f) for r in merged.values())
                        for f in ("rows_inserted", "rows_updated", "rows_deleted", "files_removed")),
                      slowest, merged[slowest].change_rows, merged[slowest].seconds)
        return {table: r.change_rows for table, r in merged.items()}

    @staticmethod
    def due(checkpoint: Checkpoint) -> list[TableId]:
        """The tables that may have changelog rows not merged yet: written after ``merged_seq`` (all of them
        when it is not known)."""
        tables = [*checkpoint.schemas, *checkpoint.stopped]
        if checkpoint.merged_seq is None:
            return tables
        after = checkpoint.merged_seq
        return [t for t in tables if checkpoint.wrote_after(t, after)]

    def _merge_table(self, table: TableId, schema: TableSchema, through_seq: int, level: int) -> MergeReport | None:
        """The table's changes through ``through_seq`` merged (None: it had none), logged at ``level``."""
        location = self.lake.table(table).current
        current = location.open()
        merged = merged_through(current) if current is not None else -1
        if merged >= through_seq:
            return None
        changes = unmerged_changes(self.lake, table, schema, merged, through_seq)
        if not changes.num_rows:
            return None
        changes = for_delta(changes)  # the types the snapshot's files have (Delta lacks unsigned, TIME, ...)
        batches = self._batches(table, schema, changes)
        changes = changes.append_column(BATCH_COLUMN, pa.array(batches, pa.int32()))
        if schema.keyless:  # a multiset: every change counts once (lake.write.multiset says why)
            report = merge_multiset(location, changes, schema.column_names, schema.chunk_key, through_seq,
                                    opened=current)
        else:
            report = merge_changes(location, changes, list(schema.state_key), through_seq, opened=current)
        _log.log(level, "merged %d changes of %s (stream batches %d-%d) into its current state in %.2f s: %d "
                 "inserted, %d updated, %d deleted, %d files rewritten", changes.num_rows, table, max(merged, 0) + 1,
                 through_seq, report.seconds, report.rows_inserted, report.rows_updated, report.rows_deleted,
                 report.files_removed)
        return report

    def _batches(self, table: TableId, schema: TableSchema, changes: pa.Table) -> list[int]:
        """The snapshot batch of each change (its current-state partition). A table is merged by one thread at
        a time, so its entry of ``_ranges`` is not raced for; only the server's answers are taken one at a time."""
        if table not in self._ranges:
            self._ranges[table] = self._batch_ranges(table, schema)
        found = self._ranges[table]
        if found is None:
            return [0] * changes.num_rows
        column, ranges, numbers = found
        with self._control:  # string keys' collation weights come from the server
            positions = ranges.positions(changes.column(column).to_pylist())
        return [numbers[i] for i in positions]

    def _batch_ranges(self, table: TableId, schema: TableSchema) -> tuple[str, KeyRanges, list[int]] | None:
        """The chunk-key column, the key ranges of the table's snapshot batches in key order and their
        numbers; None without a plan."""
        plan = SnapshotStore(self.lake).read_plan(table)
        if plan is None or not plan.batches:
            return None
        column = plan.schema.chunk_key
        firsts = [plan.chunks[b.first_chunk].start for b in plan.batches[1:]]
        with self._control:  # string keys' sort keys are the server's collation weights
            ranges = KeyRanges(firsts, KeyOrder.for_column(self.control, plan.schema.column(column)).sort_keys)
        return column, ranges, [b.number for b in plan.batches]
