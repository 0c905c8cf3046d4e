"""Fixtures shared by all tests: the throwaway MariaDB of ``dev/mariadb.py``.

The server is started once per session (about 2 s) on a free port in a temporary folder and
stopped by its PID at the end; each test module gets a fresh database of its own.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest

from dev import mariadb


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mariadb.MariaDbServer]:
    base = tmp_path_factory.mktemp("mariadb")
    server = mariadb.start(base, _free_port())
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
