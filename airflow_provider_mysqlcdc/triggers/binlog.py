"""Waiting, in the triggerer, until the server's binlog moves past the stream's checkpoint.

The wait is cheap: one ``SHOW MASTER STATUS`` (or ``SHOW BINARY LOG STATUS``) every
``poll_interval`` seconds, run in a thread so the triggerer's event loop never blocks. It fires when
the binlog has moved, or at ``wake_at`` (so the task can check its stop conditions). Everything the
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


class MySqlBinlogTrigger(BaseTrigger):
    def __init__(
        self,
        mysql_cdc_conn_id: str,
        offset: dict[str, Any],
        wake_at: float,
        poll_interval: float = 1.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.offset = offset
        self.wake_at = wake_at
        self.poll_interval = poll_interval
        self.state = state or {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_provider_mysqlcdc.triggers.binlog.MySqlBinlogTrigger",
            {"mysql_cdc_conn_id": self.mysql_cdc_conn_id, "offset": self.offset, "wake_at": self.wake_at,
             "poll_interval": self.poll_interval, "state": self.state},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
        from airflow_provider_mysqlcdc.exceptions import error_event

        checkpoint = BinlogOffset.from_dict(self.offset)
        while True:
            try:
                current = await asyncio.to_thread(self._current_offset)
            except Exception as exc:  # the task raises it again: ours by class, others named in the message
                yield TriggerEvent({**self.state, "reason": "error", **error_event(exc)})
                return
            if checkpoint.file != current.file or checkpoint.position < current.position:
                yield TriggerEvent({**self.state, "reason": "moved"})
                return
            if time.time() >= self.wake_at:
                yield TriggerEvent({**self.state, "reason": "timeout"})
                return
            await asyncio.sleep(self.poll_interval)

    def _current_offset(self) -> Any:
        from airflow_provider_mysqlcdc.cdc.offset import read_current_offset
        from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
        from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

        conn = MySqlCdcHook(self.mysql_cdc_conn_id).get_conn()
        try:
            return read_current_offset(conn, ServerInfo.read(conn), with_gtid=False)
        finally:
            conn.close()
