"""The hook against the real server: connects, passes its Test button, and fails clearly on a bad password."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysqlcdc.exceptions import SourceConfigError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook


def use_connection(monkeypatch: pytest.MonkeyPatch, server, password: str) -> MySqlCdcHook:
    conn = {"conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": password, "extra": {"server_time_zone": "+02:00"}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_TEST", json.dumps(conn))
    return MySqlCdcHook("mysql_cdc_test")


def test_connects_with_the_session_time_zone(monkeypatch, mariadb_server) -> None:
    hook = use_connection(monkeypatch, mariadb_server, mariadb_server.cdc_password)
    conn = hook.get_conn()
    with conn.cursor() as cur:
        cur.execute("SELECT @@session.time_zone, CURRENT_USER()")
        zone, user = cur.fetchone()
    assert zone == "+02:00" and user.startswith("cdc@")
    ok, message = hook.test_connection()
    assert ok and "mariadb" in message and "ready for CDC" in message


def test_wrong_password_is_clear_and_does_not_leak(monkeypatch, mariadb_server) -> None:
    hook = use_connection(monkeypatch, mariadb_server, "Wrong-Pass-987")
    with pytest.raises(SourceConfigError, match=f"access denied for cdc@{mariadb_server.host}:{mariadb_server.port}"):
        hook.get_conn()
    ok, message = hook.test_connection()
    assert not ok and "access denied" in message and "Wrong-Pass-987" not in message


def test_unreachable_server_is_clear(monkeypatch, mariadb_server) -> None:
    conn = {"conn_type": "mysql_cdc", "host": "127.0.0.1", "port": 1, "login": "cdc", "password": "x",
            "extra": {"connect_timeout": 2}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_TEST", json.dumps(conn))
    with pytest.raises(SourceConfigError, match="cannot reach the server at 127.0.0.1:1"):
        MySqlCdcHook("mysql_cdc_test").get_conn()
