"""Planning the snapshot: the split task renders its arguments into ``SplitOptions`` and returns the
snapshot jobs ``engine.snapshot.snapshot_plan`` plans (check the source, find the tables, cut them into chunks and
batches, put the batches into jobs, one a mapped task)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_mysqlcdc.cdc.source.retention import RetentionCheck
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.lake_arguments import storage_options
from airflow_provider_mysqlcdc.operators.links import LakeTableLink, persist_lake_link

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.operators.lineage import Lineage


class MySqlChunkSplitOperator(BaseOperator):
    """Returns the chunk batches still to snapshot, in jobs (one ``Job.to_dict`` a mapped task),
    for ``MySqlSnapshotSparkOperator.partial().expand()``.

    Tables are named in ``tables`` (``database.table``) or selected by regular expressions like Flink
    CDC's ``database-name`` / ``table-name`` (``include_databases``, ``include_tables``,
    ``exclude_tables``). The source is read in bulk (one ``information_schema`` pass for every table's
    columns, keys and row estimates), so a database of a thousand tables plans in seconds. The plan of
    each table (its chunks and batches) is written to the lake the first time, so that a later run keeps
    the same chunks and batch ids and only returns the batches without a committed manifest; a table whose
    snapshot is finished gets none, and an empty list lets the DAG go on to the stream. A table's batch is
    about ``rows_per_batch`` rows (one Spark job has to pay for Spark's start). The batches are then
    put in order into jobs (mapped tasks) of about ``rows_per_batch`` estimated rows (``information_schema``'s
    row estimates, at most ``chunk_size`` a chunk): small tables share a job, each batch of a large
    table has its own. Each job commits every batch of it as its own Delta transaction and
    manifest, so clearing one task re-reads and replaces exactly its batches. ``max_batches`` bounds the
    jobs: beyond it, tables get fewer, larger batches and the jobs hold more rows. A job's label
    names what it holds: ``shop.orders chunks 0-15`` for one batch, ``shop: 212 tables, 240 chunks``
    for many.

    Binlog server ids: the mapped snapshot tasks run in parallel, and every binlog reader needs an id
    of its own from the connection's ``server_id`` extra (a range like ``5400-5408``). Each task
    returned gets its own consecutive ids of that range, from the first id upward (``first_reader`` and
    ``readers`` in its dict): one per Spark task of its job, which runs ``readers_per_batch`` tasks
    (fewer for a job with fewer chunks). The stream takes the range's last id. So the range must hold
    (mapped tasks x readers_per_batch) + 1 ids, whatever the number of tables: the default 9 ids serve
    a database whose rows fit 4 jobs. The task fails before planning anything when the range is smaller.

    Binlog retention: the stream starts from the binlog at the snapshot's lowest high watermark and
    reads it once the last batch is committed, so the server must keep its binlog that long. Before
    returning any batch the task estimates how long the batches still to run take (rows per second
    of the batches already committed in the lake, else a conservative default; one Spark job at a time)
    and compares it with the server's ``binlog_expire_logs_seconds`` / ``expire_logs_days``
    (``cdc.binlog_retention``): above half of the retention it warns, above all of it it fails with
    ``BinlogRetentionError`` naming the setting and the value to raise it to. When the stream ran before,
    the task also measures how long the binlog file of the stream's checkpoint has left on the server, and
    warns as the stream does below its ``binlog_margin_seconds`` (the stream records it in the lake), or
    when the file is purged already: a DAG whose stream failed or is paused still runs its split each run.

    :param base_uri: the lake: a local path, ``s3://``/``s3a://``, ``hdfs://``; required (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). Default: ``None`` (templated)
    :param tables: tables as ``database.table``; or select them with the next three. Default: ``None``
        (templated)
    :param include_databases: regular expression matching whole database names, like Flink CDC's
        ``database-name``. Default: ``None`` (templated)
    :param include_tables: regular expression matching whole ``database.table`` names, like Flink
        CDC's ``table-name``. Default: ``None`` (all tables of the databases) (templated)
    :param exclude_tables: regular expressions of ``database.table`` names to leave out.
        Default: ``()`` (templated)
    :param include_online_schema_change_tables: whether ``include_databases`` / ``include_tables`` also
        take the helper tables of gh-ost (``_<t>_gho``, ``_<t>_ghc``, ``_<t>_del``) and
        pt-online-schema-change (``_<t>_new``, ``_<t>_old``), which they leave out otherwise; a table
        named in ``tables`` is taken whatever its name. Default: ``False`` (templated)
    :param chunk_key_columns: ``{"db.table": "column"}``: split on this column instead of the key's
        first column, like Flink CDC's ``scan.incremental.snapshot.chunk.key-column``. It only decides
        the split: rows are identified by the primary key, or without one by a UNIQUE index whose
        columns are all NOT NULL; a table with neither is a multiset of whole rows (MariaDB only), which
        needs a column here and is refused without one. Default: ``None`` (templated)
    :param chunk_size: rows per chunk, like Flink CDC's ``scan.incremental.snapshot.chunk.size``.
        Default: ``8096``
    :param chunk_max_bytes: at most about this many bytes a chunk: a table whose rows average more than
        ``chunk_max_bytes / chunk_size`` bytes (``information_schema``'s ``AVG_ROW_LENGTH``, or a sample of
        its BLOB/TEXT/JSON values' lengths when larger) is cut into chunks of ``chunk_max_bytes / row bytes``
        rows (at least one), so that a Spark executor's memory follows bytes, not rows (see the production
        docs' memory sizing). Default: ``67108864`` (64 MiB) (templated)
    :param distribution_factor_lower: lower bound of ``(max - min + 1) / rows`` for the even split, like
        Flink CDC's ``chunk-key.even-distribution.factor.lower-bound``. Default: ``0.05``
    :param distribution_factor_upper: upper bound of it (``...factor.upper-bound``). Default: ``1000.0``
    :param rows_per_batch: about how many rows one Spark job (one mapped task) reads, one table's or
        many. Default: ``10_000_000`` (templated)
    :param max_batches: at most this many mapped snapshot tasks per run; they grow instead. Default: ``64``
    :param readers_per_batch: how many Spark tasks (chunk readers, each with its own binlog server id)
        one mapped task's job runs at once; the connection's ``server_id`` range must hold
        (mapped tasks of the run x readers_per_batch) + 1 ids. Default: ``2`` (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC. Default: ``mysql_cdc_default``
        (templated)
    :param unbounded_chunk_first: return the batch holding each table's last chunk ``[x, +inf)`` first
        among the table's, and read that chunk first in its job, like Flink CDC's
        ``scan.incremental.snapshot.unbounded-chunk-first.enabled``: rows inserted above the split's
        maximum key land in it, so read last it can hold far more than ``chunk_size`` rows.
        Default: ``True``
    :param retention_check: ``"error"``: fail when the snapshot's estimated duration exceeds the
        server's binlog retention, warn above half of it; ``"warn"``: only warn (e.g. when the snapshot
        tasks run several batches at once); ``"off"``: do not check (the stream checkpoint's margin
        neither). Default: ``error`` (templated)
    """

    template_fields: Sequence[str] = (
        "base_uri", "tables", "include_databases", "include_tables", "exclude_tables", "chunk_key_columns",
        "chunk_max_bytes", "rows_per_batch", "readers_per_batch", "mysql_cdc_conn_id", "retention_check",
        "lake_conn_id", "include_online_schema_change_tables",
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
        include_online_schema_change_tables: bool = SplitOptions.include_online_schema_change_tables,
        chunk_key_columns: Mapping[str, str] | None = None,
        chunk_size: int = SplitOptions.chunk_size,
        chunk_max_bytes: int = SplitOptions.chunk_max_bytes,
        distribution_factor_lower: float = SplitOptions.distribution_factor_lower,
        distribution_factor_upper: float = SplitOptions.distribution_factor_upper,
        rows_per_batch: int = SplitOptions.rows_per_batch,
        max_batches: int = SplitOptions.max_batches,
        readers_per_batch: int = SplitOptions.readers_per_batch,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        retention_check: RetentionCheck | str = SplitOptions.retention_check,
        unbounded_chunk_first: bool = SplitOptions.unbounded_chunk_first,
        lake_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.lake_conn_id = lake_conn_id
        self.tables = tables
        self.include_databases = include_databases
        self.include_tables = include_tables
        self.exclude_tables = exclude_tables
        self.include_online_schema_change_tables = include_online_schema_change_tables
        self.chunk_key_columns = chunk_key_columns
        self.chunk_size = chunk_size
        self.chunk_max_bytes = chunk_max_bytes
        self.distribution_factor_lower = distribution_factor_lower
        self.distribution_factor_upper = distribution_factor_upper
        self.rows_per_batch = rows_per_batch
        self.max_batches = max_batches
        self.readers_per_batch = readers_per_batch
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.retention_check = retention_check
        self.unbounded_chunk_first = unbounded_chunk_first

    def execute(self, context: Any) -> list[dict[str, Any]]:
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.snapshot_plan import plan_snapshot
        from airflow_provider_mysqlcdc.operators.lineage import gather, split_facts

        options = SplitOptions.from_values(
            base_uri=self.base_uri, tables=self.tables, include_databases=self.include_databases,
            include_tables=self.include_tables, exclude_tables=self.exclude_tables,
            include_online_schema_change_tables=self.include_online_schema_change_tables,
            chunk_key_columns=self.chunk_key_columns, chunk_size=self.chunk_size,
            chunk_max_bytes=self.chunk_max_bytes,
            distribution_factor_lower=self.distribution_factor_lower,
            distribution_factor_upper=self.distribution_factor_upper, rows_per_batch=self.rows_per_batch,
            max_batches=self.max_batches, readers_per_batch=self.readers_per_batch,
            retention_check=self.retention_check, unbounded_chunk_first=self.unbounded_chunk_first,
            storage_options=storage_options(self.lake_conn_id),
        )
        persist_lake_link(context, options.lake, options.tables)  # no tables named: the lake
        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        jobs = plan_snapshot(config, options, self.mysql_cdc_conn_id, self.log)
        self._lineage_facts = gather(split_facts, self.mysql_cdc_conn_id, options.lake,
                                     options.tables or tuple(dict.fromkeys(t for job in jobs for t in job.tables)))
        return [job.to_dict() for job in jobs]

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage:
        """OpenLineage (with the ``openlineage`` extra): the tables planned (named in ``tables``, else those
        with batches to snapshot) with their columns; a plan is no data (``operators.lineage``)."""
        # lineage reads the lake (pyarrow): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.operators.lineage import operator_lineage

        return operator_lineage(getattr(self, "_lineage_facts", None))
