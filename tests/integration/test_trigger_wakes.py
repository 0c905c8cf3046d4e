"""The binlog trigger wakes the waiting stream for changes of its tables, not for other traffic."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger

SERVER_IDS = "5670-5671"  # this module's binlog reader ids (the ``connections`` fixture)
pytestmark = pytest.mark.usefixtures("connections")


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


def waiting(cdc_conn: Any, wake_in: float, tables: list[str] | None, selection: TableSelection | None = None,
            awaited: list[str] | None = None) -> MySqlBinlogTrigger:
    """The trigger of a stream that deferred now, capturing ``tables``, until ``wake_in`` seconds from now."""
    offset = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False).to_dict()
    return MySqlBinlogTrigger("mysql_cdc_default", offset, time.time() + wake_in, 0.2, {"rows": 1}, tables,
                              selection.to_dict() if selection is not None else None, awaited)


def made_after_traffic(server: Any, admin: Any, database: str, statement: str) -> float:
    """Commits to ``other`` for a second, then runs ``statement``; when it ran."""
    busy(server, database, 1.0).join()
    with admin.cursor() as cur:
        cur.execute(statement)
    return time.time()


def test_other_traffic_does_not_wake_the_stream(mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE captured (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    tables = [f"{database}.captured"]

    def trigger(wake_in: float, watched: list[str] | None = tables) -> MySqlBinlogTrigger:
        return waiting(cdc_conn, wake_in, watched)

    # busy with another table, then one change of the captured one: the event comes after that change
    pending = trigger(60)
    writes = busy(mariadb_server, database, 2.5, then="captured")
    payload, fired_at = first_event(pending)
    writes.join()
    assert payload == {"rows": 1, "reason": "moved"}
    assert fired_at >= writes.captured_at  # type: ignore[attr-defined]

    # other traffic only: it waits until its deadline
    pending = trigger(3)
    writes = busy(mariadb_server, database, 2.0)
    payload, _ = first_event(pending)
    writes.join()
    assert payload["reason"] == "timeout"
    with admin.cursor() as cur:  # there was traffic
        cur.execute("SELECT COUNT(*) FROM other")
        assert cur.fetchone()[0] > 100

    # a DDL of the captured table wakes it too (a TRUNCATE writes no row event)
    pending = trigger(30)
    with admin.cursor() as cur:
        cur.execute("TRUNCATE TABLE captured")
    payload, _ = first_event(pending)
    assert payload["reason"] == "moved"

    # a trigger serialized by an older version (no tables) wakes at any movement, as it did
    pending = trigger(30, None)
    writes = busy(mariadb_server, database, 1.0)
    payload, fired_at = first_event(pending)
    writes.join()
    assert payload["reason"] == "moved" and fired_at < writes.captured_at  # type: ignore[attr-defined]


def test_a_table_made_under_the_streams_patterns_wakes_it(mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE p_first (id INT PRIMARY KEY)")
    selection = TableSelection(include_databases=database, include_tables=rf"{database}\.p_.*")
    trigger = waiting(cdc_conn, 30, [f"{database}.p_first"], selection)
    # traffic elsewhere, then a table the patterns match
    made_at = made_after_traffic(mariadb_server, admin, database, "CREATE TABLE p_second (id INT PRIMARY KEY)")
    payload, fired_at = first_event(trigger)
    assert payload["reason"] == "moved" and fired_at >= made_at


def test_a_captured_table_dropped_and_a_stopped_table_made_again_wake_it(mariadb_server, admin, cdc_conn,
                                                                         database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE dropped (id INT PRIMARY KEY)")

    # a captured table dropped while the stream waits: it wakes (the stream reads the DROP itself)
    trigger = waiting(cdc_conn, 30, [f"{database}.kept", f"{database}.dropped"])
    with admin.cursor() as cur:
        cur.execute("DROP TABLE dropped")
    payload, _ = first_event(trigger)
    assert payload["reason"] == "moved"

    # the stream stopped it: made again under its name, it wakes the stream that still names it ...
    trigger = waiting(cdc_conn, 30, [f"{database}.kept"], awaited=[f"{database}.dropped"])
    made_at = made_after_traffic(mariadb_server, admin, database, "CREATE TABLE dropped (id INT PRIMARY KEY)")
    payload, fired_at = first_event(trigger)
    assert payload["reason"] == "moved" and fired_at >= made_at

    # ... and not one that does not
    trigger = waiting(cdc_conn, 2, [f"{database}.kept"])
    with admin.cursor() as cur:
        cur.execute("DROP TABLE dropped")
        cur.execute("CREATE TABLE dropped (id INT PRIMARY KEY)")
    payload, _ = first_event(trigger)
    assert payload["reason"] == "timeout"
