"""The whole pipeline in one call: split -> mapped Spark snapshot -> binlog stream.

For DAGs that capture many tables, or several groups of tables into different lakes, without
writing three operators each time. Every argument may be a template (``"{{ params.tables }}"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import TaskGroup

from airflow_provider_mysqlcdc.assets import replica_alias
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator


def mysql_cdc_pipeline(
    *,
    base_uri: str,
    tables: Sequence[str] | str | None = None,
    include_databases: str | None = None,
    include_tables: str | None = None,
    exclude_tables: Sequence[str] = (),
    include_online_schema_change_tables: bool = SplitOptions.include_online_schema_change_tables,
    group_id: str = "mysql_cdc",
    mysql_cdc_conn_id: str = "mysql_cdc_default",
    spark_conn_id: str = "spark_default",
    lake_conn_id: str | None = None,
    rows_per_batch: int = SplitOptions.rows_per_batch,
    stop_after_idle_seconds: float | None = None,
    on_position_lost: str = StreamOptions.on_position_lost.value,
    binlog_archive_uri: str | None = None,
    split_kwargs: Mapping[str, Any] | None = None,
    snapshot_kwargs: Mapping[str, Any] | None = None,
    stream_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """A task group ``group_id`` with the tasks ``split``, ``snapshot`` (mapped) and ``stream``.

    The stream runs once no snapshot task failed, also when nothing was left to snapshot (a later
    run); it has 3 retries 10 s apart, which continue from the checkpoint (Airflow 3.3 can fail a task that
    defers often). The arguments have the operators' names; ``*_kwargs`` go to the operators as they
    are, e.g. ``snapshot_kwargs={"conf": {...}}`` for Spark settings or ``stream_kwargs={"max_batch_events":
    20_000, "deferrable": True}`` (the stream's ``deferrable`` defaults to ``[operators]
    default_deferrable``, as on the operator).

    :param base_uri: the lake of all three tasks; required
    :param tables: the tables to capture, as ``database.table``, for the split and stream tasks; or select
        them with the next three. Default: ``None``
    :param include_databases: regular expression of whole database names, for the split and the stream
        (which also captures tables created or renamed into it while it runs). Default: ``None``
    :param include_tables: regular expression of whole ``database.table`` names. Default: ``None``
    :param exclude_tables: regular expressions of ``database.table`` names to leave out. Default: ``()``
    :param include_online_schema_change_tables: whether the patterns also take gh-ost's and
        pt-online-schema-change's helper tables (``_<t>_gho``, ``_<t>_ghc``, ``_<t>_del``, ``_<t>_new``,
        ``_<t>_old``), for the split and the stream. Default: ``False``
    :param group_id: the task group's id. Default: ``mysql_cdc``
    :param mysql_cdc_conn_id: the source connection of all three tasks. Default: ``mysql_cdc_default``
    :param spark_conn_id: the Spark connection of the snapshot tasks. Default: ``spark_default``
    :param lake_conn_id: the lake's credentials (an ``aws`` connection) of all three tasks; None: the
        environment's. Default: ``None``
    :param rows_per_batch: the split's rows per Spark job. Default: ``10_000_000``
    :param stop_after_idle_seconds: the stream's; None: it never stops when idle. Default: ``None``
    :param on_position_lost: the stream's: ``fail``, ``resnapshot`` or ``archive``, what it does when the
        server purged the binlog of its checkpoint (docs/troubleshooting.md). Default: ``fail``
    :param binlog_archive_uri: the stream's: where archived binlog files are, for
        ``on_position_lost='archive'``. Default: ``None``
    :param split_kwargs: more arguments of ``MySqlChunkSplitOperator``. Default: ``None``
    :param snapshot_kwargs: more arguments of ``MySqlSnapshotSparkOperator`` (its ``.partial()``).
        Default: ``None``
    :param stream_kwargs: more arguments of ``MySqlBinlogStreamOperator``, over the 3 retries.
        Default: ``None``
    """
    with TaskGroup(group_id=group_id) as group:
        split = MySqlChunkSplitOperator(
            task_id="split", tables=tables, include_databases=include_databases, include_tables=include_tables,
            exclude_tables=exclude_tables, include_online_schema_change_tables=include_online_schema_change_tables,
            base_uri=base_uri, rows_per_batch=rows_per_batch,
            mysql_cdc_conn_id=mysql_cdc_conn_id, lake_conn_id=lake_conn_id, **(split_kwargs or {}),
        )
        snapshot = MySqlSnapshotSparkOperator.partial(
            task_id="snapshot", base_uri=base_uri, mysql_cdc_conn_id=mysql_cdc_conn_id,
            spark_conn_id=spark_conn_id, lake_conn_id=lake_conn_id,
            **{"outlets": [replica_alias()], **(snapshot_kwargs or {})},  # outlets here: the UI shows the assets
        ).expand(batch=split.output)
        stream = MySqlBinlogStreamOperator(
            task_id="stream", tables=tables, include_databases=include_databases, include_tables=include_tables,
            exclude_tables=exclude_tables, include_online_schema_change_tables=include_online_schema_change_tables,
            base_uri=base_uri, mysql_cdc_conn_id=mysql_cdc_conn_id,
            lake_conn_id=lake_conn_id, stop_after_idle_seconds=stop_after_idle_seconds, trigger_rule="none_failed",
            on_position_lost=on_position_lost, binlog_archive_uri=binlog_archive_uri,
            **{"retries": 3, "retry_delay": timedelta(seconds=10), **(stream_kwargs or {})},
        )
        snapshot >> stream
    return group
