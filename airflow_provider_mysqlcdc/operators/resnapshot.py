"""Repairing ranges of a replica while its stream runs: re-read chunks with watermarks, MERGE them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.lake_arguments import open_lake


class MySqlResnapshotOperator(BaseOperator):
    """Reads key ranges of replicated tables again and brings the lake's current state to the source's.

    Like Debezium's ad-hoc incremental snapshot, as an Airflow task: the chunks of each table's snapshot
    plan that overlap the ranges are read again exactly as the snapshot reads them (low watermark,
    SELECT, high watermark, binlog fix-up), in this worker, and MERGEd into the table's current-state
    Delta table ordered at their high watermarks: damaged rows are replaced, missing ones inserted,
    keys the source lacks deleted, and a change the stream committed after a chunk's high watermark
    still wins. The stream keeps running meanwhile (the re-snapshot writes neither its changelog nor its
    checkpoint); the table's snapshot must be complete. It reads the binlog with the id below the
    stream's of the connection's ``server_id`` range. Returns one report per table (chunks with their
    rows and high watermark; rows inserted, updated, deleted). The work is done by
    ``engine.verification.resnapshot``.

    :param base_uri: the lake of the pipeline: a local path or ``s3://bucket/prefix``; required (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). Default: ``None`` (templated)
    :param resnapshot: what to read again, per table: ``{"db.table": "all"}``, key ranges of the chunk-key
        column ``{"db.table": [[low, high], ...]}`` (both ends included, ``null`` for unbounded), or chunk
        indexes ``{"db.table": {"chunks": [3, 17]}}``, or a verification's summary as it is
        (``MySqlVerifySummaryOperator``'s XCom: its differing chunks); required (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC. Default: ``mysql_cdc_default``
        (templated)
    """

    template_fields: Sequence[str] = ("base_uri", "resnapshot", "mysql_cdc_conn_id", "lake_conn_id")

    def __init__(
        self,
        *,
        base_uri: str,
        resnapshot: dict[str, Any] | str,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        lake_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.lake_conn_id = lake_conn_id
        self.resnapshot = resnapshot
        self.mysql_cdc_conn_id = mysql_cdc_conn_id

    def execute(self, context: Any) -> list[dict[str, Any]]:
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.verification.resnapshot import (
            ResnapshotRequest,
            resnapshot,
            resnapshot_server_id,
        )

        requests = ResnapshotRequest.parse_all(rendered.literal("resnapshot", self.resnapshot))
        if not requests:
            self.log.info("nothing to re-snapshot (resnapshot is empty)")
            return []
        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        server_id = resnapshot_server_id(config, self.mysql_cdc_conn_id)
        lake = open_lake(self.base_uri, self.lake_conn_id)
        return [resnapshot(config, lake, request, server_id, self.log).to_dict() for request in requests]
