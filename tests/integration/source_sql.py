"""Statements run on the test MariaDB, and where its binlog is now: what the binlog reader's tests write and
read from."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo


def run(admin: Any, *statements: str) -> None:
    with admin.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def now(conn: Any) -> BinlogOffset:
    """The binlog's current offset, with the server's GTIDs."""
    return read_current_offset(conn, ServerInfo.read(conn))
