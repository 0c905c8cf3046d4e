"""Planning the snapshot: check the source, find the tables, cut them into chunks and batches, and pack
the batches into the run's mapped tasks, its jobs.

The plan of each table (its chunks and batches) is written to the lake the first time, so that a
later run keeps the same chunks and batch ids and returns only the batches without a committed
manifest, packed anew into jobs of about ``rows_per_batch`` rows (``engine.snapshot.jobs``). Before
anything is written the planner checks what would make the run fail later: the binlog server ids
every reader that can run at once needs (``engine.snapshot.batch_readers``) and the binlog retention against
the snapshot's estimated duration (``cdc.source.retention``). When the stream ran before, the planner
also looks at the margin of its checkpoint (``engine.stream.retention_watch.check_checkpoint``): a DAG whose
stream failed or is paused still runs its split each run, which warns before the position is lost. The
split operator only renders its arguments into ``SplitOptions`` and hands the jobs to XCom.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.discovery import (
    approximate_rows,
    average_row_bytes,
    discover_tables,
    wide_columns,
)
from airflow_provider_mysqlcdc.cdc.schema.table import PRIMARY, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import check_keyless_source
from airflow_provider_mysqlcdc.cdc.source import retention as binlog_retention
from airflow_provider_mysqlcdc.cdc.source.checks import check_source
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.retention import BinlogRetention, RetentionCheck, TableWork
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.splitter import chunk_rows, split_table
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import assign_readers
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job, batch_rows, plan_jobs, read_group
from airflow_provider_mysqlcdc.engine.stream.retention_watch import check_checkpoint
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, BatchManifest, Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

_log = logging.getLogger(__name__)
TABLES_LOGGED = 50
"""Up to this many tables, the split logs each table's chunks and batches; above, only the totals."""


def plan_snapshot(
    config: ConnectionConfig, options: SplitOptions, conn_id: str, log: logging.Logger | Any = _log
) -> list[Job]:
    """The batches still to snapshot, packed into the run's mapped tasks (``engine.snapshot.jobs``), each
    job with its run of binlog server ids (``Job.with_readers``).

    The source is read in bulk (``information_schema`` once for every table's columns, keys and row
    estimates, then each new table's MIN/MAX), and the lake's plans and manifests at once on object
    stores, so a database of a thousand tables plans in seconds. ``conn_id`` only names the connection in
    errors about its ``server_id`` range; ``log`` is the calling task's logger, so that the plan's lines
    are in its log."""
    store = SnapshotStore(options.lake)
    tables = _read_tables(config, options, store, log)
    todo = _batches_to_snapshot(tables, options, store, log)
    # distinct binlog server ids for every reader that can run at once; checked before any plan is written
    jobs = assign_readers(_jobs(tables, todo, options), config.server_id, options.readers_per_batch, conn_id)
    if todo.batches and tables.retention is not None:  # checked before any plan is written, too
        _check_retention(tables.retention, todo.work, options, len(jobs), log)
    store.write_plans(todo.new_plans)
    _log_jobs(jobs, todo, config, options, len(tables.schemas), log)
    return jobs


@dataclass
class _Tables:
    """The tables to snapshot as the source and the lake have them: each one's plan so far (None: a new table),
    the new tables' chunks, and per table its row estimate, its average row size and its chunks' rows; the
    server's binlog retention (None: not checked)."""

    schemas: list[TableSchema]
    plans: dict[TableId, Plan | None]
    new: dict[TableId, list[Chunk]]
    approximate: dict[TableId, int]
    row_bytes: dict[TableId, int]
    sizes: dict[TableId, int]
    retention: BinlogRetention | None


def _read_tables(config: ConnectionConfig, options: SplitOptions, store: SnapshotStore,
                 log: logging.Logger | Any) -> _Tables:
    """The source checked and its tables discovered, their plans read from the lake, the tables without one
    split into chunks (rows per chunk table by table: fewer than chunk_size where rows are wide,
    chunk_max_bytes), all on one connection."""
    conn = config.connect()
    try:
        schemas = _discover(conn, options, log)
        plans = store.read_plans([s.id for s in schemas])
        checkpoint = StreamStore(options.lake).read_checkpoint()
        schemas = _not_streamed_only(schemas, plans, checkpoint, log)
        checked = options.retention_check is not RetentionCheck.OFF
        if checked and checkpoint is not None:  # the stream ran before: it may be down, the split still runs
            check_checkpoint(conn, config.replication_settings(), options.lake, checkpoint.offset, log)
        approximate = approximate_rows(conn, [s.id for s in schemas])
        row_bytes = average_row_bytes(conn, schemas)
        sizes = {s.id: chunk_rows(options.chunk_size, options.chunk_max_bytes, row_bytes[s.id]) for s in schemas}
        new = {s.id: split_table(conn, s, sizes[s.id], options.distribution_factor_lower,
                                 options.distribution_factor_upper, approximate[s.id])
               for s in schemas if plans[s.id] is None}
        retention = binlog_retention.read_retention(conn) if checked else None
    finally:
        conn.close()
    return _Tables(schemas, plans, new, approximate, row_bytes, sizes, retention)


def _discover(conn: Any, options: SplitOptions, log: logging.Logger | Any) -> list[TableSchema]:
    """The selected tables, once the source is set up for CDC (its captured databases too) and none of them is a
    keyless table whose chunks cannot be read at an exact binlog position: one error naming every such table,
    as discovery does."""
    server = check_source(conn)
    log.info("source %s %s is ready for CDC", server.flavor, server.version_string)
    schemas = discover_tables(conn, options.selection(), options.chunk_key_columns)
    check_source(conn, databases=sorted({s.id.database for s in schemas}))
    refused = []
    for schema in schemas:
        if schema.key_index != PRIMARY:
            log.info("%s has no primary key: its rows are keyed by its %s", schema.id, schema.key_description)
        try:
            check_keyless_source(conn, server, schema)
        except TableNotSupportedError as error:
            refused.append(str(error))
    if refused:
        raise TableNotSupportedError("\n".join(refused))
    return schemas


@dataclass
class _Todo:
    """The plans to write (the new tables'), the batches without a committed manifest in the order their
    jobs start and each one's estimated rows, and what the retention estimate needs of each table."""

    new_plans: list[Plan] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    work: list[TableWork] = field(default_factory=list)


def _batches_to_snapshot(tables: _Tables, options: SplitOptions, store: SnapshotStore,
                         log: logging.Logger | Any) -> _Todo:
    """Each table's plan (a new one cut into batches of ``rows_per_batch`` rows, at most ``max_batches`` in all)
    and its batches not committed yet."""
    chunks_per_batch = max(1, options.rows_per_batch // options.chunk_size)
    total = sum(len(c) for c in tables.new.values())
    if total and math.ceil(total / chunks_per_batch) > options.max_batches:
        chunks_per_batch = math.ceil(total / options.max_batches)
    planned = [plan for s in tables.schemas if (plan := tables.plans[s.id]) is not None]
    committed = dict(zip([p.schema.id for p in planned], store.manifests_of(planned), strict=True))
    todo = _Todo()
    for schema in tables.schemas:
        plan, table = tables.plans[schema.id], schema.id
        if plan is None:
            chunks = tables.new[table]
            if tables.sizes[table] < options.chunk_size:
                log.info("%s: rows of about %d bytes, so chunks of up to %d rows (chunk_max_bytes=%d)", table,
                         tables.row_bytes[table], tables.sizes[table], options.chunk_max_bytes)
            plan = Plan(schema, chunks, group_batches(table, chunks, chunks_per_batch))
            todo.new_plans.append(plan)
            manifests: list[BatchManifest | None] = [None] * len(plan.batches)
        else:
            manifests = committed[table]
        batches = [b for b, m in zip(plan.batches, manifests, strict=True) if m is None]
        if options.unbounded_chunk_first:
            batches = unbounded_first(batches, plan)
        if options.retention_check is not RetentionCheck.OFF:
            todo.work.append(_table_work(store, plan, manifests, tables.approximate.get(table, 0)))
        if len(tables.schemas) <= TABLES_LOGGED:
            log.info("%s: %d chunks in %d batches, %d to snapshot", table, len(plan.chunks), len(plan.batches),
                     len(batches))
        todo.batches += batches
        todo.rows += [batch_rows(b, len(plan.chunks), tables.approximate.get(table, 0), tables.sizes[table])
                      for b in batches]
    return todo


def _jobs(tables: _Tables, todo: _Todo, options: SplitOptions) -> list[Job]:
    """The batches packed into jobs of about ``rows_per_batch`` rows, with the chunks read together and ahead,
    table by table: as many as keep a reader's memory that of one chunk of chunk_max_bytes (one at a time where
    rows are wide)."""
    groups = {s.id: read_group(tables.sizes[s.id], tables.row_bytes[s.id], options.chunk_max_bytes,
                               bool(wide_columns(s)))
              for s in tables.schemas}
    return [j.with_read_groups(groups) for j in
            plan_jobs(todo.batches, todo.rows, options.rows_per_batch, options.max_batches)]


def _check_retention(retention: BinlogRetention, work: list[TableWork], options: SplitOptions, jobs: int,
                     log: logging.Logger | Any) -> None:
    """The snapshot's estimated duration against the binlog retention: logged, and warned or refused by
    ``retention_check``."""
    estimate = binlog_retention.estimate_snapshot(work, options.chunk_size, jobs=jobs)
    log.info("binlog retention: %s = %s; the stream reads the snapshot's binlog in about %s (%s)",
             retention.setting, retention.value, binlog_retention.duration(estimate.seconds), estimate.describe())
    for warning in binlog_retention.check_retention(estimate, retention, options.retention_check):
        log.warning("binlog retention: %s", warning)


def _log_jobs(jobs: list[Job], todo: _Todo, config: ConnectionConfig, options: SplitOptions, tables: int,
              log: logging.Logger | Any) -> None:
    if not todo.batches:
        log.info("%d tables: every batch is committed, nothing to snapshot", tables)
        return
    server_ids = config.server_id
    readers = sum(j.readers or 0 for j in jobs)
    log.info("%d tables, %d batches to snapshot of about %d rows in all, packed into %d snapshot jobs (mapped "
             "tasks) of up to rows_per_batch=%d rows: %d binlog readers at most, server ids %d-%d of the "
             "range %s (the stream takes %d)", len({b.table for b in todo.batches}), len(todo.batches), sum(todo.rows),
             len(jobs), options.rows_per_batch, readers, server_ids.allocate(0), server_ids.allocate(readers - 1),
             server_ids, server_ids.end)


def _not_streamed_only(schemas: list[TableSchema], plans: dict[TableId, Plan | None],
                       checkpoint: Checkpoint | None, log: logging.Logger | Any) -> list[TableSchema]:
    """``schemas`` without the tables the stream captured by itself (made or renamed into its tables while it
    ran): their replica is the stream's from their first row, and a snapshot would write over it."""
    streamed = [s.id for s in schemas if plans[s.id] is None and checkpoint is not None and s.id in checkpoint.schemas]
    for table in streamed:
        log.info("%s: no snapshot, the stream captures it since it was made or renamed into the tables", table)
    return [s for s in schemas if s.id not in streamed]


def plan_in_one_batch(conn: Any, schema: TableSchema) -> Plan:
    """A plan of ``schema``'s table made now and written nowhere, its chunks all in batch 0: for reading a
    table the stream captured without a snapshot (created or renamed into the captured set while it ran)
    again. Batch 0 is the partition the MERGE gives the rows of a table without a snapshot plan."""
    chunks = split_table(conn, schema)
    return Plan(schema, chunks, group_batches(schema.id, chunks, len(chunks)))


def unbounded_first(batches: list[Batch], plan: Plan) -> list[Batch]:
    """``batches`` with the one holding the plan's last, unbounded chunk first (mapped tasks start in the
    order of the list): inserts above the split's maximum key make that chunk grow while it waits."""
    last = len(plan.chunks) - 1
    return sorted(batches, key=lambda b: not b.first_chunk <= last <= b.last_chunk)


def _table_work(
    store: SnapshotStore, plan: Plan, manifests: Sequence[BatchManifest | None], approximate_rows: int
) -> TableWork:
    """What the retention estimate needs of one table: its plan, its committed manifests, and when
    its first committed batch took its high watermarks (the manifest is written right after the batch,
    so its file's time less the batch's ``seconds``)."""
    done = [m for m in manifests if m is not None]
    todo = [b for b, m in zip(plan.batches, manifests, strict=True) if m is None]
    age = 0.0
    if todo and done:
        now = time.time()
        for manifest in done:
            info = store.lake.fs.get_file_info(store.lake.table(manifest.batch.table).manifest(manifest.batch.number))
            if info.mtime_ns is not None:
                age = max(age, now - info.mtime_ns / 1e9 + manifest.seconds)
    return TableWork(
        plan.schema.id, len(plan.chunks), len(todo), sum(b.chunk_count for b in todo), approximate_rows,
        len(done), sum(m.rows for m in done), sum(len(m.chunks) for m in done), sum(m.seconds for m in done), age,
    )
