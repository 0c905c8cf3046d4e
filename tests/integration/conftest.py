"""Fixtures of the integration tests: the connections the provider's operators and tasks look up, and a
StatsD listener for the metrics tests (the servers themselves come from ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from tests.airflow_connections import set_airflow_connections
from tests.integration.statsd_listener import PREFIX, StatsdListener


@pytest.fixture()
def connections(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                mariadb_server: Any) -> ConnectionConfig:
    """The example DAG's connections as environment variables (``set_airflow_connections``): the test
    MariaDB with the binlog reader ids of the test module's ``SERVER_IDS`` (the provider's default range
    without one), and Spark on ``local[2]``. Returns the server as the CDC user reaches it."""
    set_airflow_connections(monkeypatch, mariadb_server, getattr(request.module, "SERVER_IDS", None))
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port)


@pytest.fixture()
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdListener]:
    """Airflow's ``Stats`` sending to a ``StatsdListener`` (with ``PREFIX``) for the test, the no-op backend after."""
    listener = StatsdListener()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", PREFIX)
    listener.initialise_stats()
    yield listener
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats

    stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
    listener.sock.close()
