"""Fixtures shared by all tests: the throwaway MariaDB of ``dev/mariadb.py``, and Airflow.

The server is started once per session (about 2 s) on a free port in a temporary folder and
stopped by its PID at the end; each test module gets a fresh database of its own. Airflow gets a
home of its own (set here, before anything imports Airflow) with a SQLite database. A second
server, which refuses connections without TLS, starts only for the tests that ask for it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev import mariadb
from dev.ports import free_port
from dev.tls_certs import TlsFiles, make_tls_files

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))


TESTS = Path(__file__).resolve().parent
KIND_MARKS = {"unit": ("unit",), "checks": ("checks",), "integration": ("integration",),
              "deployment": ("deployment", "integration")}
"""The markers of a test by the folder it is in (``pyproject.toml`` declares them): ``-m unit`` runs the tests
that need no server, ``-m "not integration"`` those and the checks."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.resolve().relative_to(TESTS).parts[0] if item.path.resolve().is_relative_to(TESTS) else ""
        for mark in KIND_MARKS.get(folder, ()):
            item.add_marker(mark)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated Airflow metadata database (SQLite), as ``dag.test()`` needs."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, timeout=300)



@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mariadb.MariaDbServer]:
    base = tmp_path_factory.mktemp("mariadb")
    server = mariadb.start(base, free_port())
    yield server
    mariadb.stop(base)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA, the TLS server's certificate it signs, a client certificate, and an unrelated CA."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def tls_mariadb_server(tmp_path_factory: pytest.TempPathFactory,
                       tls_files: TlsFiles) -> Iterator[mariadb.MariaDbServer]:
    """A MariaDB that requires TLS of every TCP connection (``require_secure_transport``), as managed
    MySQL does, and whose CDC user is ``REQUIRE SSL``. Its admin (root over the socket) needs none."""
    base = tmp_path_factory.mktemp("mariadb-tls")
    server = mariadb.start(base, free_port(), extra_args=[
        f"--ssl-ca={tls_files.ca}", f"--ssl-cert={tls_files.server_cert}", f"--ssl-key={tls_files.server_key}",
        "--require-secure-transport=ON",
    ])
    with server.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("ALTER USER %s@'%%' REQUIRE SSL", (server.cdc_user,))
    yield server
    mariadb.stop(base)


@pytest.fixture(scope="module")
def database(request: pytest.FixtureRequest, mariadb_server: mariadb.MariaDbServer) -> Iterator[str]:
    """A fresh, empty database named after the test module."""
    name = "t_" + re.sub(r"\W", "_", request.module.__name__.rsplit(".", 1)[-1])[:60]
    conn = mariadb_server.admin_connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    yield name
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


@pytest.fixture()
def admin(mariadb_server: mariadb.MariaDbServer, database: str) -> Iterator:
    """A root connection (autocommit) to the module's database, for setting up data."""
    conn = mariadb_server.admin_connect(database)
    yield conn
    conn.close()


@pytest.fixture()
def cdc_conn(mariadb_server: mariadb.MariaDbServer, database: str) -> Iterator:
    """A connection as the least-privileged CDC user, as the provider would make it."""
    conn = mariadb_server.cdc_connect(database)
    yield conn
    conn.close()


@pytest.fixture(params=["value by value", "with numpy", "text value by value"])
def columns_read(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way ``cdc.row_columns`` reads a run of row images into Arrow: value by value (a few images, as a
    table in a batch spread over many tables has), with numpy (many), and with numpy but text and bytes value
    by value (a few dozen images): a test using it runs all three."""
    from airflow_provider_mysqlcdc.cdc.binlog import row_columns

    monkeypatch.setattr(row_columns, "FEW_IMAGES", 10**9 if request.param == "value by value" else 0)
    monkeypatch.setattr(row_columns, "SIZED_VECTOR_FROM", 10**9 if request.param == "text value by value" else 0)
    return str(request.param)
