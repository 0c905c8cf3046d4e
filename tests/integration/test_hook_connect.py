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


def test_test_button_on_the_harness_user_names_the_database_it_checked(monkeypatch, mariadb_server, database) -> None:
    conn = {"conn_type": "mysql_cdc", "host": mariadb_server.host, "port": mariadb_server.port,
            "login": mariadb_server.cdc_user, "password": mariadb_server.cdc_password, "schema": database,
            "extra": {"server_id": "6100-6104", "charset": "utf8mb4", "connect_timeout": 5}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_TEST", json.dumps(conn))
    ok, message = MySqlCdcHook("mysql_cdc_test").test_connection()
    assert ok, message
    assert f"SELECT on {database} included" in message and "server ids 6100-6104" in message


@pytest.fixture()
def binlog_monitor_only_user(mariadb_server):
    """A user with BINLOG MONITOR and nothing else, while the server writes MINIMAL row images."""
    admin = mariadb_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'button'@'%'")
        cur.execute("CREATE USER 'button'@'%' IDENTIFIED BY 'Button-Pw-456'")
        cur.execute("GRANT BINLOG MONITOR ON *.* TO 'button'@'%'")
        cur.execute("SELECT @@GLOBAL.binlog_row_image")
        (image,) = cur.fetchone()
        cur.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        yield "button", "Button-Pw-456"
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_image = %s", (image,))
            cur.execute("DROP USER 'button'@'%'")
        admin.close()


def test_test_button_reports_grants_binlog_settings_and_extras_at_once(
    monkeypatch, mariadb_server, binlog_monitor_only_user
) -> None:
    user, password = binlog_monitor_only_user
    conn = {"conn_type": "mysql_cdc", "host": mariadb_server.host, "port": mariadb_server.port, "login": user,
            "password": password, "extra": {"server_id": "5400"}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_TEST", json.dumps(conn))
    ok, message = MySqlCdcHook("mysql_cdc_test").test_connection()
    assert not ok and "(3 problems)" in message, message
    assert "binlog_row_image is MINIMAL: SET GLOBAL binlog_row_image = 'FULL'" in message
    assert "GRANT REPLICATION SLAVE ON *.* TO <cdc user>" in message
    assert "GRANT SELECT ON <captured database>.* TO <cdc user>" in message
    assert password not in message

    # a bad extra is named too, and the server is still checked with the extra's default
    conn["extra"] = {"server_id": "5400-", "connect_timeout": 0}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_TEST", json.dumps(conn))
    ok, message = MySqlCdcHook("mysql_cdc_test").test_connection()
    assert not ok and "(5 problems)" in message, message
    assert "server_id must be a number or a range" in message and "connect_timeout extra" in message
    assert "binlog_row_image is MINIMAL" in message


def test_test_button_with_a_bad_password_names_it_and_what_was_not_checked(monkeypatch, mariadb_server) -> None:
    hook = use_connection(monkeypatch, mariadb_server, "Wrong-Pass-987")
    ok, message = hook.test_connection()
    assert not ok and "(1 problem)" in message
    assert "access denied for cdc@" in message and "binlog settings and grants are not checked" in message
    assert "Wrong-Pass-987" not in message
