"""The lake the pipeline writes, and the public ways to read it back.

``read_table`` / ``read_changes`` return pyarrow tables; ``register_views`` makes Spark views of
the same data for tables too big for one process. Imported lazily so that ``import
airflow_provider_mysqlcdc.lake`` stays cheap (Spark is only needed for the views).
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_changes", "read_table", "register_views"]


def __getattr__(name: str) -> Any:
    if name in ("read_changes", "read_table"):
        from airflow_provider_mysqlcdc.lake import read

        return getattr(read, name)
    if name == "register_views":
        from airflow_provider_mysqlcdc.lake.spark_views import register_views

        return register_views
    raise AttributeError(name)
