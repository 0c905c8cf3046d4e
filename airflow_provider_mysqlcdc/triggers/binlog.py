"""Waiting, in the triggerer, until the captured tables change after the stream's checkpoint.

The wait is cheap: one ``SHOW MASTER STATUS`` (or ``SHOW BINARY LOG STATUS``) every
``poll_interval`` seconds, run in a thread so the triggerer's event loop never blocks. When the
binlog has moved, the new stretch is read for a change of the captured ``tables``
(``engine.stream.change_watch``; other traffic does not wake the stream), or a table made or renamed under a
name the stream's ``selection`` patterns match or under a stopped table's name it still selects
(``awaited``). It fires at such a change, or
at ``wake_at`` (so the task can check its stop conditions and advance its checkpoint past other
traffic). A trigger serialized without ``tables`` (by an older version) fires at any movement. Everything the
resumed task needs travels in the event payload: ``dag.test()`` does not pass ``defer`` kwargs. A
failure is reported as ``reason`` ``error`` with ``error_type`` and ``error``
(``exceptions.error_event``), from which ``exceptions.error_from_event`` rebuilds the exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import error_event
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook


class MySqlBinlogTrigger(BaseTrigger):
    def __init__(
        self,
        mysql_cdc_conn_id: str,
        offset: dict[str, Any],
        wake_at: float,
        poll_interval: float = 1.0,
        state: dict[str, Any] | None = None,
        tables: list[str] | None = None,
        selection: dict[str, Any] | None = None,
        awaited: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.offset = offset
        self.wake_at = wake_at
        self.poll_interval = poll_interval
        self.state = state or {}
        self.tables = tables
        self.selection = selection
        self.awaited = awaited

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_provider_mysqlcdc.triggers.binlog.MySqlBinlogTrigger",
            {"mysql_cdc_conn_id": self.mysql_cdc_conn_id, "offset": self.offset, "wake_at": self.wake_at,
             "poll_interval": self.poll_interval, "state": self.state, "tables": self.tables,
             "selection": self.selection, "awaited": self.awaited},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        scanned = BinlogOffset.from_dict(self.offset)
        while True:
            try:
                current = await asyncio.to_thread(self._current_offset)
                moved = scanned.file != current.file or scanned.position < current.position
                if moved and self.tables is not None:
                    moved, scanned = await asyncio.to_thread(self._captured_change, scanned, current)
            except Exception as exc:  # the task raises it again: ours by class, others named in the message
                yield TriggerEvent({**self.state, "reason": "error", **error_event(exc)})
                return
            if moved:
                yield TriggerEvent({**self.state, "reason": "moved"})
                return
            if time.time() >= self.wake_at:
                yield TriggerEvent({**self.state, "reason": "timeout"})
                return
            await asyncio.sleep(self.poll_interval)

    def _captured_change(self, start: Any, stop: Any) -> tuple[bool, Any]:
        # the binlog reader (mysql-replication, sqlglot; 0.3 s): not when the stream operator imports this
        # module at DAG-parse time
        from airflow_provider_mysqlcdc.engine.stream.change_watch import first_captured_change

        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        control = config.connect()
        try:  # the stream's own server id: it reads nothing while it waits here
            return first_captured_change(config, config.server_id.stream_id, control,
                                         [TableId.parse(t) for t in self.tables or []], start, stop,
                                         TableSelection.from_dict(self.selection) if self.selection else None,
                                         [TableId.parse(t) for t in self.awaited or []])
        finally:
            control.close()

    def _current_offset(self) -> Any:
        conn = MySqlCdcHook(self.mysql_cdc_conn_id).get_conn()
        try:
            return read_current_offset(conn, ServerInfo.read(conn), with_gtid=False)
        finally:
            conn.close()
