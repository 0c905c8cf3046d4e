"""The lake the pipeline writes, and the public ways to read it back.

Each table is two Delta tables: its current state at ``table_uri(base_uri, "db.table")`` and its
changelog at ``changelog_uri(...)``; any Delta reader (Spark, DuckDB, Polars, Trino) reads them.
The readers take the base URI (reached through the standard AWS variables) or a ``Lake`` handle made
with storage options (``Lake.at("s3://bucket/lake", {"AWS_ACCESS_KEY_ID": ...})``).
``read_table`` / ``read_changes`` return pyarrow tables of the committed data (the current state
with the changes not merged yet applied), ``scan_table`` the same as a ``pyarrow.RecordBatchReader`` for tables
larger than memory; ``register_views`` makes Spark views of the same data for
tables too big for one process, on a Spark without the Delta jars. Imported lazily so that
``import airflow_provider_mysqlcdc.lake`` stays cheap (Spark is only needed for the views).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Lake", "changelog_uri", "read_changes", "read_table", "register_views", "scan_table", "table_uri"]


def __getattr__(name: str) -> Any:
    if name in ("read_changes", "read_table", "scan_table"):
        from airflow_provider_mysqlcdc.lake.read import replica

        return getattr(replica, name)
    if name in ("Lake", "table_uri", "changelog_uri"):
        from airflow_provider_mysqlcdc.lake import handle

        return getattr(handle, name)
    if name == "register_views":
        from airflow_provider_mysqlcdc.lake.read.spark_views import register_views

        return register_views
    raise AttributeError(name)
