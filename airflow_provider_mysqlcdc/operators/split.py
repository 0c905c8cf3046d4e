"""Planning the snapshot: check the source, find the tables, cut them into chunks and batches."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_mysqlcdc.cdc.binlog_retention import RetentionCheck, TableWork
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.splitter import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DISTRIBUTION_FACTOR_LOWER,
    DEFAULT_DISTRIBUTION_FACTOR_UPPER,
)
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.snapshot import BatchManifest, Plan, SnapshotStore

DEFAULT_ROWS_PER_BATCH = 4_000_000
DEFAULT_MAX_BATCHES = 64
DEFAULT_READERS_PER_BATCH = 2


class MySqlChunkSplitOperator(BaseOperator):
    """Returns the chunk batches still to snapshot, for ``MySqlSnapshotSparkOperator.partial().expand()``.

    Tables are named in ``tables`` (``database.table``) or selected by regular expressions like Flink
    CDC's ``database-name`` / ``table-name`` (``include_databases``, ``include_tables``,
    ``exclude_tables``). The plan of each table (its chunks and batches) is written to the lake the
    first time, so that a later run keeps the same chunks and batch ids and only returns the batches
    without a committed manifest; a table whose snapshot is finished gets none, and an empty list lets the DAG go on to
    the stream. A batch is about ``rows_per_batch`` rows (one Spark job has to pay for Spark's start),
    fewer rows per batch when the tables would need more than ``max_batches`` mapped tasks.

    Binlog server ids: the mapped snapshot tasks run in parallel, and every binlog reader needs an id
    of its own from the connection's ``server_id`` extra (a range like ``5400-5408``). Each batch
    returned gets its own consecutive ids of that range, from the first id upward over all tables
    (``first_reader`` and ``readers`` in its dict): one per Spark task of its job, which runs
    ``readers_per_batch`` tasks (fewer for a batch with fewer chunks). The stream takes the range's last
    id. The task fails before planning anything when the range is smaller than that: it must hold at
    least (batches x readers_per_batch) + 1 ids.

    Binlog retention: the stream starts from the binlog at the snapshot's lowest high watermark and
    reads it once the last batch is committed, so the server must keep its binlog that long. Before
    returning any batch the task estimates how long the batches still to run take (rows per second
    of the batches already committed in the lake, else a conservative default; one batch at a time)
    and compares it with the server's ``binlog_expire_logs_seconds`` / ``expire_logs_days``
    (``cdc.binlog_retention``): above half of the retention it warns, above all of it it fails with
    ``BinlogRetentionError`` naming the setting and the value to raise it to.

    :param base_uri: the lake: a local path, ``s3://``/``s3a://``, ``hdfs://``; required (templated)
    :param tables: tables as ``database.table``; or select them with the next three. Default: ``None``
        (templated)
    :param include_databases: regular expression matching whole database names, like Flink CDC's
        ``database-name``. Default: ``None`` (templated)
    :param include_tables: regular expression matching whole ``database.table`` names, like Flink
        CDC's ``table-name``. Default: ``None`` (all tables of the databases) (templated)
    :param exclude_tables: regular expressions of ``database.table`` names to leave out.
        Default: ``()`` (templated)
    :param chunk_key_columns: ``{"db.table": "column"}``: split on this column instead of the first
        primary-key column (needed for a table without primary key), like Flink CDC's
        ``scan.incremental.snapshot.chunk.key-column``. Default: ``None`` (templated)
    :param chunk_size: rows per chunk, like Flink CDC's ``scan.incremental.snapshot.chunk.size``.
        Default: ``8096``
    :param distribution_factor_lower: lower bound of ``(max - min + 1) / rows`` for the even split, like
        Flink CDC's ``chunk-key.even-distribution.factor.lower-bound``. Default: ``0.05``
    :param distribution_factor_upper: upper bound of it (``...factor.upper-bound``). Default: ``1000.0``
    :param rows_per_batch: about how many rows one Spark job (one mapped task) reads.
        Default: ``4_000_000`` (templated)
    :param max_batches: at most this many batches per plan; batches grow instead. Default: ``64``
    :param readers_per_batch: how many Spark tasks (chunk readers, each with its own binlog server id)
        one batch's job runs at once; the connection's ``server_id`` range must hold
        (batches of the run x readers_per_batch) + 1 ids. Default: ``2`` (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC. Default: ``mysql_cdc_default``
        (templated)
    :param retention_check: ``"error"``: fail when the snapshot's estimated duration exceeds the
        server's binlog retention, warn above half of it; ``"warn"``: only warn (e.g. when the snapshot
        tasks run several batches at once); ``"off"``: do not check. Default: ``error`` (templated)
    """

    template_fields: Sequence[str] = (
        "base_uri", "tables", "include_databases", "include_tables", "exclude_tables", "chunk_key_columns",
        "rows_per_batch", "readers_per_batch", "mysql_cdc_conn_id", "retention_check",
    )

    def __init__(
        self,
        *,
        base_uri: str,
        tables: Sequence[str] | None = None,
        include_databases: str | None = None,
        include_tables: str | None = None,
        exclude_tables: Sequence[str] = (),
        chunk_key_columns: Mapping[str, str] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        distribution_factor_lower: float = DEFAULT_DISTRIBUTION_FACTOR_LOWER,
        distribution_factor_upper: float = DEFAULT_DISTRIBUTION_FACTOR_UPPER,
        rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
        max_batches: int = DEFAULT_MAX_BATCHES,
        readers_per_batch: int = DEFAULT_READERS_PER_BATCH,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        retention_check: RetentionCheck | str = RetentionCheck.ERROR,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.tables = tables
        self.include_databases = include_databases
        self.include_tables = include_tables
        self.exclude_tables = exclude_tables
        self.chunk_key_columns = chunk_key_columns
        self.chunk_size = chunk_size
        self.distribution_factor_lower = distribution_factor_lower
        self.distribution_factor_upper = distribution_factor_upper
        self.rows_per_batch = rows_per_batch
        self.max_batches = max_batches
        self.readers_per_batch = readers_per_batch
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.retention_check = retention_check

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from airflow_provider_mysqlcdc.cdc import binlog_retention
        from airflow_provider_mysqlcdc.cdc.discovery import discover_tables
        from airflow_provider_mysqlcdc.cdc.server_id import assign_snapshot_readers
        from airflow_provider_mysqlcdc.cdc.source_checks import check_source
        from airflow_provider_mysqlcdc.cdc.splitter import split_table, validate_split_options
        from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
        from airflow_provider_mysqlcdc.lake.snapshot import Batch, Plan, SnapshotStore, group_batches

        validate_split_options(self.chunk_size, self.distribution_factor_lower, self.distribution_factor_upper)
        if int(self.rows_per_batch) < 1 or self.max_batches < 1:
            raise InvalidOptionError(
                f"rows_per_batch and max_batches must be whole numbers >= 1, not {self.rows_per_batch!r} "
                f"and {self.max_batches!r}"
            )
        readers_per_batch = _positive_int("readers_per_batch", self.readers_per_batch)
        retention_check = RetentionCheck.parse(self.retention_check)
        include_databases, include_tables = self._selection()
        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        server_ids = config.server_id
        retention, approximate = None, {}
        conn = config.connect()
        try:
            server = check_source(conn)
            self.log.info("source %s %s is ready for CDC", server.flavor, server.version_string)
            schemas = discover_tables(conn, include_databases, include_tables, self.exclude_tables,
                                      self.chunk_key_columns)
            check_source(conn, databases=sorted({s.id.database for s in schemas}))
            store = SnapshotStore(self.base_uri)
            plans = {s.id: store.read_plan(s.id) for s in schemas}
            new = {s.id: split_table(conn, s, self.chunk_size, self.distribution_factor_lower,
                                     self.distribution_factor_upper) for s in schemas if plans[s.id] is None}
            if retention_check is not RetentionCheck.OFF:
                retention = binlog_retention.read_retention(conn)
                approximate = binlog_retention.approximate_rows(conn, [s.id for s in schemas])
        finally:
            conn.close()
        chunks_per_batch = max(1, int(self.rows_per_batch) // self.chunk_size)
        total = sum(len(c) for c in new.values())
        if total and math.ceil(total / chunks_per_batch) > self.max_batches:
            chunks_per_batch = math.ceil(total / self.max_batches)
        new_plans: list[Plan] = []
        pending: list[Batch] = []
        work: list[TableWork] = []
        for schema in schemas:
            plan = plans[schema.id]
            if plan is None:
                chunks = new[schema.id]
                plan = Plan(schema, chunks, group_batches(schema.id, chunks, chunks_per_batch))
                new_plans.append(plan)
                manifests: list[BatchManifest | None] = [None] * len(plan.batches)
            else:
                manifests = store.manifests(plan)
            todo = [b for b, m in zip(plan.batches, manifests, strict=True) if m is None]
            if retention_check is not RetentionCheck.OFF:
                work.append(_table_work(store, plan, manifests, approximate.get(schema.id, 0)))
            self.log.info("%s: %d chunks in %d batches, %d to snapshot", schema.id, len(plan.chunks),
                          len(plan.batches), len(todo))
            pending += todo
        # distinct binlog server ids for every reader that can run at once; checked before any plan is written
        counts = [min(readers_per_batch, b.chunk_count) for b in pending]
        firsts = assign_snapshot_readers(server_ids, counts, readers_per_batch, self.mysql_cdc_conn_id)
        if pending and retention is not None:  # checked before any plan is written, too
            estimate = binlog_retention.estimate_snapshot(work, self.chunk_size)
            self.log.info("binlog retention: %s = %s; the stream reads the snapshot's binlog in about %s (%s)",
                          retention.setting, retention.value, binlog_retention.duration(estimate.seconds),
                          estimate.describe())
            for warning in binlog_retention.check_retention(estimate, retention, retention_check):
                self.log.warning("binlog retention: %s", warning)
        for plan in new_plans:
            store.write_plan(plan)
        if pending:
            self.log.info("%d batches with %d binlog readers at most, server ids %d-%d of the range %s (the stream "
                          "takes %d)", len(pending), sum(counts), server_ids.allocate(0),
                          server_ids.allocate(sum(counts) - 1), server_ids, server_ids.end)
        return [b.with_readers(first, count).to_dict() for b, first, count in zip(pending, firsts, counts, strict=True)]

    def _selection(self) -> tuple[str, str | None]:
        """The discovery patterns: exact names from ``tables``, or the regular expressions as given."""
        if self.tables:
            names = [TableId.parse(t) for t in self.tables]
            return (
                "|".join(sorted({re.escape(t.database) for t in names})),
                "|".join(re.escape(str(t)) for t in names),
            )
        if not self.include_databases:
            raise InvalidOptionError("set tables=['db.table', ...] or include_databases (a regular expression)")
        return self.include_databases, self.include_tables


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
            info = store.lake.fs.get_file_info(f"{store.batch_dir(manifest.batch)}/_manifest.json")
            if info.mtime_ns is not None:
                age = max(age, now - info.mtime_ns / 1e9 + manifest.seconds)
    return TableWork(
        plan.schema.id, len(plan.chunks), len(todo), sum(b.chunk_count for b in todo), approximate_rows,
        len(done), sum(m.rows for m in done), sum(len(m.chunks) for m in done), sum(m.seconds for m in done), age,
    )


def _positive_int(name: str, value: Any) -> int:
    """A whole number >= 1 from a native or rendered (text) template value."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise InvalidOptionError(f"{name} must be a whole number >= 1, not {value!r}")
    return int(text)
