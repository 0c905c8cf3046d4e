"""The replica as Spark temporary views, for tables too big to read into one process.

For each table two views (names with other characters than letters, digits and ``_`` get ``_``
there): ``<db>_<table>_changes`` (the committed changelog with its metadata
columns) and ``<db>_<table>`` (the current state: the last row per primary key in changelog order,
deleted keys dropped), built from the same committed files as ``read_changes`` / ``read_table``.
Files written with an older schema (before an ``ADD COLUMN``) are merged, their missing columns NULL.

Spark cannot hold every Arrow type the lake uses: DECIMAL wider than 38 digits fails to read, BIGINT
UNSIGNED arrives as DECIMAL(20,0) and TIME as microseconds (a long).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS
from airflow_provider_mysqlcdc.lake.read import committed_table
from airflow_provider_mysqlcdc.lake.storage import Lake


def spark_uri(base_uri: str, path: str) -> str:
    """A path of the lake's (pyarrow) filesystem as the URI Spark reads: the base URI's scheme kept."""
    if "://" not in base_uri:
        return "file://" + path
    return base_uri.rstrip("/") + path[len(Lake.at(base_uri).root) :]


def register_views(spark: Any, base_uri: str, tables: Sequence[str]) -> dict[str, str]:
    """Create or replace both views of every table; returns ``{"db.table": view name}``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)

    views: dict[str, str] = {}
    for table in tables:
        table_id = TableId.parse(table)
        committed = committed_table(base_uri, table_id)
        schema, files = committed.schema, [spark_uri(base_uri, f) for f in committed.files]
        view = re.sub(r"\W", "_", f"{table_id.database}_{table_id.table}")  # a name Spark needs no quotes for
        metadata = [f.name for f in METADATA_FIELDS]
        changes = spark.read.option("mergeSchema", "true").parquet(*files)
        changes = changes.select(*[F.col(f"`{c}`") for c in (*schema.column_names, *metadata)])
        changes.createOrReplaceTempView(f"{view}_changes")
        latest_first = Window.partitionBy(*[F.col(f"`{k}`") for k in schema.row_key]).orderBy(
            F.col("_binlog_file").desc(), F.col("_binlog_pos").desc(), F.col("_row_seq").desc()
        )
        current = (
            changes.withColumn("__rank", F.row_number().over(latest_first))
            .where((F.col("__rank") == 1) & F.col("_op").isin(*[k.value for k in ChangeKind.accumulations()]))
            .select(*[F.col(f"`{c}`") for c in schema.column_names])
        )
        current.createOrReplaceTempView(view)
        views[str(table_id)] = view
    return views
