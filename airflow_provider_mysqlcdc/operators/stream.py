"""The deferrable binlog stream: write change batches while there are events, wait in the triggerer
while there are none, and stop when the configured condition says so."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, conf

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits, StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.exceptions import error_from_event
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.lake_arguments import storage_options
from airflow_provider_mysqlcdc.operators.links import LakeTableLink, persist_lake_link
from airflow_provider_mysqlcdc.operators.stream_metrics import StatsStreamObserver, task_tags
from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.operators.lineage import Lineage


class MySqlBinlogStreamOperator(BaseOperator):
    """Streams the binlog of ``tables`` into the lake, continuing from the lake's checkpoint.

    The first run starts according to ``startup_mode``; later runs, retries and cleared tasks
    continue from the checkpoint, which is committed with each batch: nothing is lost or written
    twice. A table added to ``tables`` in a later run is streamed from its snapshot's high watermarks
    (the split and snapshot tasks of that run take it first); a table removed stops being captured
    (logged), and resumes where it stopped when added back. When caught up the stream waits in the
    worker on its binlog connection; once idle for ``defer_after_idle_seconds`` it defers to
    ``MySqlBinlogTrigger`` until its tables change. Set ``retries``: Airflow 3.3 can fail a task that
    defers often, and a retry simply continues from the checkpoint. The work is done by
    ``engine.stream.stream_runner.StreamRunner``.

    ``deferrable`` defaults to Airflow's ``[operators] default_deferrable`` setting (False unless set), as
    in the official providers: read from the configuration when this module is imported, nothing else.
    Without deferral the caught-up stream keeps polling in the worker, holding its slot until a stop
    condition; the example DAG and ``mysql_cdc_many_tables`` set ``deferrable=True``.

    :param base_uri: the lake: a local path or ``s3://bucket/prefix``; required (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). Default: ``None`` (templated)
    :param tables: the tables to capture, as ``database.table`` (a list, or text such as ``"db.a, db.b"``
        or a rendered list); or select them with the next three, as the split does. Default: ``None``
        (templated)
    :param include_databases: regular expression matching whole database names (Flink CDC's
        ``database-name``): the tables it matches when the stream starts, and those created or renamed
        into it while it runs, which the stream captures itself (a table renamed in is read whole).
        Default: ``None`` (templated)
    :param include_tables: regular expression matching whole ``database.table`` names (Flink CDC's
        ``table-name``). Default: ``None`` (all tables of the databases) (templated)
    :param exclude_tables: regular expressions of ``database.table`` names to leave out.
        Default: ``()`` (templated)
    :param include_online_schema_change_tables: whether ``include_databases`` / ``include_tables`` also
        take the helper tables of gh-ost (``_<t>_gho``, ``_<t>_ghc``, ``_<t>_del``) and
        pt-online-schema-change (``_<t>_new``, ``_<t>_old``), at the start and created or renamed while it
        runs; they are left out otherwise, and the tool's cut-over is followed as a rename of the ghost
        table to the captured name (its rows read whole). Pass the split's value. Default: ``False``
        (templated)
    :param startup_mode: where a new stream starts, like Flink CDC's ``scan.startup.mode``: ``initial``
        from the snapshot's high watermarks (every table's snapshot must be committed), ``snapshot``
        no stream at all, ``latest-offset``, ``earliest-offset``, ``specific-offset``
        (``startup_offset``), ``timestamp`` (``startup_timestamp``). Only the first run reads it; later
        runs continue from the checkpoint. Default: ``initial`` (templated)
    :param startup_offset: for ``specific-offset``: ``"mysql-bin.000003:4"``, a MySQL GTID set or a
        MariaDB GTID position of what was already captured. Default: ``None`` (templated)
    :param startup_timestamp: for ``timestamp``: epoch milliseconds or ISO 8601 (naive = UTC).
        Default: ``None`` (templated)
    :param stop_after_idle_seconds: stop once caught up and without a captured change this long;
        None: never. Default: ``None`` (templated)
    :param max_duration_seconds: stop after running this long; None: never. Default: ``None`` (templated)
    :param stop_at_offset: stop once the checkpoint reaches this ``binlog-file:position``; None: never.
        Default: ``None`` (templated)
    :param max_batch_events: commit a batch after this many change rows. Default: ``100_000``
    :param max_batch_seconds: commit a batch after this many seconds. Default: ``10.0``
    :param max_batch_bytes: commit a batch after about this many bytes of values (64 MiB); a transaction
        larger than a batch is committed in parts. Default: ``67_108_864``
    :param poll_interval: the trigger's polling period in seconds, and near real time how long a batch
        gathers (an idle stream commits at the server's next heartbeat, every quarter second).
        Default: ``1.0``
    :param defer_after_idle_seconds: how long a caught-up stream waits in the worker before it hands
        the wait to the triggerer (only with ``deferrable``). Default: ``60.0`` (templated)
    :param merge_interval_seconds: how often the current-state Delta tables are brought up to date by
        MERGE while streaming or deferred (the trigger wakes the stream when one is due), and on every
        stop; the changelog is always current.
        Default: ``300.0`` (templated)
    :param schema_check_seconds: how often at most an idle stream compares each captured table's columns
        in information_schema with those it follows, and fails with ``SourceSchemaDivergedError`` on a
        difference the binlog never showed (once per idle spell; there is no off). Default: ``60.0``
        (templated)
    :param schema_change_behavior: what a DDL of a captured table does to the lake, as Flink CDC 3 names
        it: ``evolve`` follows every change exactly at its offset (columns renamed, dropped, added with
        their values, converted; TRUNCATE; tables dropped, renamed, created) and stops with a
        ``SchemaChangeError`` before anything past a change it cannot keep exactly; ``try_evolve`` applies
        such a change as ``lenient`` does, with a warning; ``lenient`` adds columns and records the DDL
        without rewriting the lake; ``ignore`` keeps the lake's columns as they were and writes the changes
        as them; ``exception`` stops at the first DDL that changes a captured table
        (docs/schema-changes.md). Default: ``evolve`` (templated)
    :param binlog_margin_seconds: the stream checks, at most every 30 s, how long the binlog file of its
        checkpoint has left before the server may purge it (its retention by age or size), sends it as the
        ``mysql_cdc.stream.binlog_margin_seconds`` metric and, below this many seconds, logs a WARNING that
        says when the position may be lost and what to do; None: no warning. Default: ``21600.0`` (6 h)
        (templated)
    :param on_position_lost: what the stream does when the server purged the binlog between the lake's
        checkpoint and the oldest binlog it still has (stopped, paused or behind for longer than the
        server keeps its binlog): ``fail`` stops with ``BinlogPositionLostError``, the lake untouched;
        ``resnapshot`` reads every captured table again, chunked and lock-free, from the binlog position
        of now, replaces each current table and marks the lost range in its changelog with a ``!G``
        record (as-of reads into it are refused); ``archive`` reads the lost range from archived binlog
        files (``binlog_archive_uri``), then the server, the changelog complete (docs/troubleshooting.md).
        Default: ``fail`` (templated)
    :param binlog_archive_uri: a local folder or an object-store prefix (``s3://...``, reached with the
        lake connection's credentials) holding copies of the server's binlog files, as
        ``mysqlbinlog --read-from-remote-server --raw --stop-never`` or a backup tool writes them; read
        when ``on_position_lost`` is ``archive``. Default: ``None`` (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC. Default: ``mysql_cdc_default``
        (templated)
    :param deferrable: True: once idle for ``defer_after_idle_seconds``, wait in the triggerer
        (``MySqlBinlogTrigger``) and free the worker slot; False: keep polling in the worker. Default: the
        ``[operators] default_deferrable`` setting, False unless set
    """

    template_fields: Sequence[str] = (
        "base_uri", "tables", "include_databases", "include_tables", "exclude_tables", "startup_mode",
        "startup_offset", "startup_timestamp", "stop_after_idle_seconds",
        "max_duration_seconds", "stop_at_offset", "mysql_cdc_conn_id", "defer_after_idle_seconds",
        "merge_interval_seconds", "schema_check_seconds", "schema_change_behavior", "lake_conn_id",
        "binlog_margin_seconds", "include_online_schema_change_tables", "on_position_lost", "binlog_archive_uri",
    )
    operator_extra_links = (LakeTableLink(),)

    def __init__(
        self,
        *,
        base_uri: str,
        tables: Sequence[str] | None = None,
        include_databases: str | None = None,
        include_tables: str | None = None,
        exclude_tables: Sequence[str] = (),
        include_online_schema_change_tables: bool = StreamOptions.include_online_schema_change_tables,
        startup_mode: str = StreamOptions.startup_mode.value,
        startup_offset: str | None = None,
        startup_timestamp: Any = None,
        stop_after_idle_seconds: float | None = None,
        max_duration_seconds: float | None = None,
        stop_at_offset: str | None = None,
        max_batch_events: int = CommitLimits.max_events,
        max_batch_seconds: float = CommitLimits.max_seconds,
        max_batch_bytes: int = CommitLimits.max_bytes,
        poll_interval: float = StreamOptions.poll_interval,
        defer_after_idle_seconds: float = StreamOptions.defer_after_idle_seconds,
        merge_interval_seconds: float = StreamOptions.merge_interval_seconds,
        schema_check_seconds: float = StreamOptions.schema_check_seconds,
        schema_change_behavior: str = StreamOptions.schema_change_behavior.value,
        binlog_margin_seconds: float | None = StreamOptions.binlog_margin_seconds,
        on_position_lost: str = StreamOptions.on_position_lost.value,
        binlog_archive_uri: str | None = None,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        lake_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id
        self.base_uri = base_uri
        self.tables = tables
        self.include_databases = include_databases
        self.include_tables = include_tables
        self.exclude_tables = exclude_tables
        self.include_online_schema_change_tables = include_online_schema_change_tables
        self.startup_mode = startup_mode
        self.startup_offset = startup_offset
        self.startup_timestamp = startup_timestamp
        self.stop_after_idle_seconds = stop_after_idle_seconds
        self.max_duration_seconds = max_duration_seconds
        self.stop_at_offset = stop_at_offset
        self.max_batch_events = max_batch_events
        self.max_batch_seconds = max_batch_seconds
        self.max_batch_bytes = max_batch_bytes
        self.poll_interval = poll_interval
        self.defer_after_idle_seconds = defer_after_idle_seconds
        self.merge_interval_seconds = merge_interval_seconds
        self.schema_check_seconds = schema_check_seconds
        self.schema_change_behavior = schema_change_behavior
        self.binlog_margin_seconds = binlog_margin_seconds
        self.on_position_lost = on_position_lost
        self.binlog_archive_uri = binlog_archive_uri
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> dict[str, Any] | None:
        options = self._options(context)
        persist_lake_link(context, options.lake, options.tables)
        if options.startup_mode is StartupMode.SNAPSHOT:
            self.log.info("startup_mode 'snapshot': no binlog stream")
            return None
        return self._stream(options, StreamProgress.start(), context)

    @staticmethod
    def _writer(context: Any) -> str:
        """The lake lease's holder: the same for every try and resume of this task in this DAG run."""
        ti = context.get("ti") if context else None
        if ti is None:
            return f"stream outside a DAG run, pid {os.getpid()}"
        return f"{ti.dag_id}.{ti.task_id} in run {ti.run_id}"

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("reason") == "error":
            # the lease was renewed until the wait's end: released now, so that a retry need not wait for it
            from airflow_provider_mysqlcdc.lake.write.lease import StreamLease

            try:
                options = self._options(context)
                StreamLease(options.lake, options.writer, options.lease_seconds).release_held()
            except Exception:  # the trigger's error is the one that matters
                self.log.warning("could not release the stream's lease after its wait failed: it expires by itself",
                                 exc_info=True)
            raise error_from_event(event)
        return self._stream(self._options(context), StreamProgress.from_dict(event), context)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage:
        """OpenLineage (with the ``openlineage`` extra): the captured tables, and the changelog and
        current-state Delta tables of each, the changelog's rows written by this task's batches
        (``operators.lineage``)."""
        # lineage reads the lake (pyarrow): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.operators.lineage import operator_lineage

        return operator_lineage(getattr(self, "_lineage_facts", None))

    def _options(self, context: Any) -> StreamOptions:
        return StreamOptions.from_values(
            base_uri=self.base_uri, tables=self.tables, startup_mode=self.startup_mode,
            startup_offset=self.startup_offset, startup_timestamp=self.startup_timestamp,
            stop_after_idle_seconds=self.stop_after_idle_seconds, max_duration_seconds=self.max_duration_seconds,
            stop_at_offset=self.stop_at_offset, max_batch_events=self.max_batch_events,
            max_batch_seconds=self.max_batch_seconds, max_batch_bytes=self.max_batch_bytes,
            poll_interval=self.poll_interval, defer_after_idle_seconds=self.defer_after_idle_seconds,
            merge_interval_seconds=self.merge_interval_seconds, schema_check_seconds=self.schema_check_seconds,
            writer=self._writer(context), schema_change_behavior=self.schema_change_behavior,
            include_databases=self.include_databases, include_tables=self.include_tables,
            exclude_tables=self.exclude_tables, binlog_margin_seconds=self.binlog_margin_seconds,
            on_position_lost=self.on_position_lost, binlog_archive_uri=self.binlog_archive_uri,
            include_online_schema_change_tables=self.include_online_schema_change_tables,
            storage_options=storage_options(self.lake_conn_id),
        )

    def _stream(self, options: StreamOptions, progress: StreamProgress, context: Any) -> dict[str, Any] | None:
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
        from airflow_provider_mysqlcdc.operators.lineage import gather, stream_facts

        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        observer = StatsStreamObserver(task_tags(context, self.task_id))
        runner = StreamRunner(options, config, observer, on_margin=observer.margin_checked)
        control = config.connect()
        try:
            checkpoint = runner.open(control)
            # a resume from the triggerer costs seconds (and Airflow 3.3 races on quick resumes): the
            # runner polls here until idle for defer_after_idle_seconds, then the triggerer waits
            stopped = runner.run(control, checkpoint, progress, may_wait=bool(self.deferrable))
        finally:
            control.close()
        if stopped:
            summary = runner.summary(progress, checkpoint, stopped)
            self._lineage_facts = gather(stream_facts, self.mysql_cdc_conn_id, options.lake, summary)
            return summary.to_dict()
        progress.deferrals += 1
        wake_at, selection = runner.wait_until(progress, checkpoint), options.selection()
        self.defer(
            trigger=MySqlBinlogTrigger(self.mysql_cdc_conn_id, checkpoint.offset.to_dict(), wake_at,
                                       options.poll_interval, progress.to_dict(), [str(t) for t in checkpoint.schemas],
                                       selection.to_dict() if selection.by_pattern else None,
                                       [str(t) for t in checkpoint.stopped if selection.matches(t)]),
            method_name="execute_complete",
        )
        return None  # not reached: defer raises
