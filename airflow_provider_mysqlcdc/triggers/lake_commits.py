"""An asset watcher's trigger: one asset event per stream commit of a table, while the stream runs.

Airflow records a task's asset events when the task instance finishes, and a stream for an
``@continuous`` DAG never does. So the stream's commits reach downstream DAGs through an
``AssetWatcher`` on the table's asset (``assets.replica_asset``): this trigger runs in the triggerer,
reads the lake's stream checkpoint every ``poll_interval`` seconds (one small JSON document, in a
thread; the watchers of one lake share a read of the last second, ``CHECKPOINT_REUSE_SECONDS``) and,
when its ``seq`` moved, counts the table's changelog rows of the new batches from the Delta log's
commit metrics. If there are any it yields one ``TriggerEvent`` whose payload is the
event's extra (``lake.read.stream_commits.stream_extra``: ``seq``, ``first_seq``, ``offset``, ``gtid``,
``rows``); Airflow stores it as the asset event's ``extra["payload"]``. Batches committed within one
poll make one event. Snapshot batches are not watched here: their tasks emit their own events.

Where it continues: the last ``seq`` it reported is kept in Airflow's asset state store (Airflow 3.3,
``BaseEventTrigger.asset_state_store``), so a triggerer restart reports the commits made meanwhile
instead of skipping them. Without a stored value (the first start) it starts at the checkpoint as
it is: the past is not reported. A lake begun anew (its ``seq`` lower than the stored one) is
followed from its new ``seq`` on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_mysqlcdc.hooks.lake_connection import lake_storage_options
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.stream_commits import checkpoint_seq, stream_extra

STATE_KEY = "mysql_cdc_stream_seq"
"""The asset state store's key of the last stream batch reported."""
CHECKPOINT_REUSE_SECONDS = 1.0
"""A poll takes the checkpoint another watcher of the same lake read this recently (at most half the poll
interval): a whole database watched table by table reads it about once a second, not once a table a poll
(1,000 watched tables at the default interval: 200 reads, GETs on an object store, a second)."""


class MySqlCdcCommitTrigger(BaseEventTrigger):
    """Fires for every stream commit that wrote rows of ``table`` into the lake ``base_uri`` (reached with
    ``lake_conn_id``'s credentials, None: the triggerer's environment); never ends."""

    def __init__(self, base_uri: str, table: str, poll_interval: float = 5.0, lake_conn_id: str | None = None) -> None:
        super().__init__()
        self.base_uri = base_uri
        self.table = table
        self.poll_interval = poll_interval
        self.lake_conn_id = lake_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_provider_mysqlcdc.triggers.lake_commits.MySqlCdcCommitTrigger",
            {"base_uri": self.base_uri, "table": self.table, "poll_interval": self.poll_interval,
             "lake_conn_id": self.lake_conn_id},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        options = await asyncio.to_thread(lake_storage_options, self.lake_conn_id)  # the connection: blocking
        lake = Lake.at(self.base_uri, options)
        seen = await self._stored_seq()
        if seen is None:
            seen = await asyncio.to_thread(checkpoint_seq, lake)
        while True:
            seq, extra = await asyncio.to_thread(stream_extra, lake, self.table, seen, self._reuse)
            if extra is not None:
                yield TriggerEvent(extra)
            if seq != seen:
                seen = seq
                await self._store_seq(seen)
            await asyncio.sleep(self.poll_interval)

    @property
    def _reuse(self) -> float:
        return min(CHECKPOINT_REUSE_SECONDS, self.poll_interval / 2)

    async def _stored_seq(self) -> int | None:
        if self.asset_state_store is None:  # not run by a triggerer for an asset (tests)
            return None
        value = await self.asset_state_store.aget(STATE_KEY)
        return int(value) if isinstance(value, (int, str)) else None

    async def _store_seq(self, seq: int) -> None:
        if self.asset_state_store is not None:
            await self.asset_state_store.aset(STATE_KEY, seq)
