"""The connections the example DAG's tasks use in the integration tests, as environment variables."""

from __future__ import annotations

import json
from typing import Any

import pytest


def set_airflow_connections(monkeypatch: pytest.MonkeyPatch, server: Any, server_ids: str) -> None:
    """The example DAG's connections as environment variables: the test MariaDB as ``mysql_cdc_default``
    with its own ``server_id`` range (one per test module, so modules never share a reader id), and
    Spark on ``local[2]``."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
        "password": server.cdc_password, "extra": {"server_id": server_ids},
    }))
