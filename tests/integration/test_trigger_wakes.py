"""The binlog trigger wakes the waiting stream for changes of its tables, not for other traffic."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger


@pytest.fixture(autouse=True)
def connection(monkeypatch: pytest.MonkeyPatch, mariadb_server) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": mariadb_server.host, "port": mariadb_server.port,
        "login": mariadb_server.cdc_user, "password": mariadb_server.cdc_password,
        "extra": {"server_id": "5670-5671"}}))


def first_event(trigger: MySqlBinlogTrigger) -> tuple[dict[str, Any], float]:
    async def first() -> tuple[dict[str, Any], float]:
        async for event in trigger.run():
            return event.payload, time.time()
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(first())


def busy(server: Any, database: str, seconds: float, then: str | None = None) -> threading.Thread:
    """Commits to ``other`` for ``seconds``, then (with ``then``) one row to that table; returns the thread,
    whose ``captured_at`` is when the last commit was made."""

    def write() -> None:
        conn = server.admin_connect(database)
        deadline, key = time.time() + seconds, 0
        with conn.cursor() as cur:
            while time.time() < deadline:
                key += 1
                cur.execute("INSERT INTO other (v) VALUES (%s)", (key,))
                time.sleep(0.02)
            if then:
                cur.execute(f"INSERT INTO {then} (v) VALUES (%s)", (key,))
        thread.captured_at = time.time()  # type: ignore[attr-defined]
        conn.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_other_traffic_does_not_wake_the_stream(mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE captured (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    tables = [f"{database}.captured"]

    def trigger(wake_in: float, watched: list[str] | None = tables) -> MySqlBinlogTrigger:
        offset = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False).to_dict()
        return MySqlBinlogTrigger("mysql_cdc_default", offset, time.time() + wake_in, 0.2, {"rows": 1}, watched)

    # busy with another table, then one change of the captured one: the event comes after that change
    waiting = trigger(60)
    writes = busy(mariadb_server, database, 2.5, then="captured")
    payload, fired_at = first_event(waiting)
    writes.join()
    assert payload == {"rows": 1, "reason": "moved"}
    assert fired_at >= writes.captured_at  # type: ignore[attr-defined]

    # other traffic only: it waits until its deadline
    waiting = trigger(3)
    writes = busy(mariadb_server, database, 2.0)
    payload, _ = first_event(waiting)
    writes.join()
    assert payload["reason"] == "timeout"
    with admin.cursor() as cur:  # there was traffic
        cur.execute("SELECT COUNT(*) FROM other")
        assert cur.fetchone()[0] > 100

    # a DDL of the captured table wakes it too (a TRUNCATE writes no row event)
    waiting = trigger(30)
    with admin.cursor() as cur:
        cur.execute("TRUNCATE TABLE captured")
    payload, _ = first_event(waiting)
    assert payload["reason"] == "moved"

    # a trigger serialized by an older version (no tables) wakes at any movement, as it did
    waiting = trigger(30, None)
    writes = busy(mariadb_server, database, 1.0)
    payload, fired_at = first_event(waiting)
    writes.join()
    assert payload["reason"] == "moved" and fired_at < writes.captured_at  # type: ignore[attr-defined]


def test_a_table_made_under_the_streams_patterns_wakes_it(mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE p_first (id INT PRIMARY KEY)")
    selection = TableSelection(include_databases=database, include_tables=rf"{database}\.p_.*")

    def trigger() -> MySqlBinlogTrigger:
        offset = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False).to_dict()
        return MySqlBinlogTrigger("mysql_cdc_default", offset, time.time() + 30, 0.2, {}, [f"{database}.p_first"],
                                  selection.to_dict())

    waiting = trigger()
    writes = busy(mariadb_server, database, 1.5)  # traffic elsewhere, then a table the patterns match
    writes.join()
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE p_second (id INT PRIMARY KEY)")
        made_at = time.time()
    payload, fired_at = first_event(waiting)
    assert payload["reason"] == "moved" and fired_at >= made_at


def test_a_captured_table_dropped_and_a_stopped_table_made_again_wake_it(mariadb_server, admin, cdc_conn,
                                                                         database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE dropped (id INT PRIMARY KEY)")

    def trigger(wake_in: float, tables: list[str], awaited: list[str] | None = None) -> MySqlBinlogTrigger:
        offset = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False).to_dict()
        return MySqlBinlogTrigger("mysql_cdc_default", offset, time.time() + wake_in, 0.2, {}, tables, None,
                                  awaited)

    # a captured table dropped while the stream waits: it wakes (the stream reads the DROP itself)
    waiting = trigger(30, [f"{database}.kept", f"{database}.dropped"])
    with admin.cursor() as cur:
        cur.execute("DROP TABLE dropped")
    payload, _ = first_event(waiting)
    assert payload["reason"] == "moved"

    # the stream stopped it: made again under its name, it wakes the stream that still names it ...
    waiting = trigger(30, [f"{database}.kept"], [f"{database}.dropped"])
    writes = busy(mariadb_server, database, 1.0)
    writes.join()
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE dropped (id INT PRIMARY KEY)")
        made_at = time.time()
    payload, fired_at = first_event(waiting)
    assert payload["reason"] == "moved" and fired_at >= made_at

    # ... and not one that does not
    waiting = trigger(2, [f"{database}.kept"])
    with admin.cursor() as cur:
        cur.execute("DROP TABLE dropped")
        cur.execute("CREATE TABLE dropped (id INT PRIMARY KEY)")
    payload, _ = first_event(waiting)
    assert payload["reason"] == "timeout"
