"""The test MariaDB as the provider reaches it: the connections the example DAG's tasks use, as
environment variables, and the ``ConnectionConfig`` the engine takes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig


def set_airflow_connections(monkeypatch: pytest.MonkeyPatch, server: Any, server_ids: str | None) -> None:
    """The example DAG's connections as environment variables: the test MariaDB as ``mysql_cdc_default``
    with its own ``server_id`` range (one per test module, so modules never share a reader id; None: the
    provider's default range), and Spark on ``local[2]``."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    extra = {"extra": {"server_id": server_ids}} if server_ids is not None else {}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
        "password": server.cdc_password, **extra,
    }))


def config_of(server: Any, ids: str = "5600-5610") -> ConnectionConfig:
    """The server as the CDC user reaches it, with the binlog reader ids ``ids``."""
    return ConnectionConfig.from_parts(host=server.host, port=server.port, user=server.cdc_user,
                                       password=server.cdc_password, database=None,
                                       extra={"server_id": ids})
