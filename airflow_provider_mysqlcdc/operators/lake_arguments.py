"""An operator's lake: its rendered ``base_uri`` and ``lake_conn_id`` made into the one handle (``lake.handle``).

Called in ``execute`` only: the connection is read then, never at DAG-parse time.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.hooks.lake_connection import lake_storage_options
from airflow_provider_mysqlcdc.lake.handle import Lake


def storage_options(lake_conn_id: Any) -> dict[str, str]:
    """The storage options of the rendered ``lake_conn_id`` (None, or a template rendered to nothing: {})."""
    return lake_storage_options(rendered.optional_text(lake_conn_id))


def open_lake(base_uri: Any, lake_conn_id: Any) -> Lake:
    """The lake at ``base_uri``, reached with the storage options of ``lake_conn_id`` (None: the environment)."""
    return Lake.at(str(base_uri), storage_options(lake_conn_id))
