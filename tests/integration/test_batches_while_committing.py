"""A following stream does not cut a batch for latency while the commit before it runs (``stream_batches``): the
batch grows until that commit is done. Cutting it earlier only stopped the reader until then, and a stream over
many tables, whose every commit costs each table it touches, made more and smaller commits (issue 27)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.stream.stream_batches import CaughtUp, StreamCommit, stream_batches
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

COMMIT_SECONDS = 1.2
"""How long each commit with rows takes here: longer than the stream's latency (``FOLLOW``)."""
FOLLOW = 0.25


def test_a_batch_grows_while_the_commit_before_it_runs(mariadb_server, admin, cdc_conn, database, tmp_path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE ticks (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    schema = load_table_schema(cdc_conn, TableId(database, "ticks"))
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    store = StreamStore(Lake.at(str(tmp_path / "lake")))
    checkpoint = Checkpoint(0, read_current_offset(cdc_conn, ServerInfo.read(cdc_conn)), {schema.id: schema})
    store.commit(checkpoint, {})

    started: list[float] = []  # when each commit with rows began
    commit = StreamStore.commit

    def slow_commit(self: StreamStore, target: Checkpoint, changes: Any) -> None:
        if changes:
            started.append(time.monotonic())
            time.sleep(COMMIT_SECONDS)
        commit(self, target, changes)

    monkeypatch.setattr(StreamStore, "commit", slow_commit)
    inserted: list[float] = []  # when each insert was committed, in binlog order (one writer)

    def write() -> None:
        conn = mariadb_server.admin_connect(database)
        with conn.cursor() as cur:
            cur.execute("SET autocommit = 1")
            while len(inserted) < 80:  # 4 s
                cur.execute("INSERT INTO ticks (v) VALUES (1)")
                inserted.append(time.monotonic())
                time.sleep(0.05)
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    rows: list[int] = []  # rows of the table committed so far, after each batch
    batches = stream_batches(config, 5431, store, checkpoint, cdc_conn, lambda t: load_table_schema(cdc_conn, t),
                             follow=FOLLOW)
    try:
        for item in batches:
            if isinstance(item, StreamCommit) and item.rows:
                rows.append((rows[-1] if rows else 0) + sum(item.rows.values()))
            if isinstance(item, CaughtUp) and not writer.is_alive() and rows and rows[-1] == len(inserted):
                break
    finally:
        batches.close()
        writer.join()

    assert len(rows) >= 4
    # each batch between the first and the last (the writer's tail, cut when the server fell idle) holds the inserts
    # made until the commit before it was done: its last insert came about COMMIT_SECONDS after that commit began (a
    # batch cut FOLLOW seconds after it began, which then waited for it, ended about FOLLOW seconds after)
    for before, (began, last) in enumerate(zip(started, rows[1:-1], strict=False)):
        assert inserted[last - 1] > began + COMMIT_SECONDS / 2, (before, [round(t - began, 2) for t in inserted])
