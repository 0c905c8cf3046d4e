"""One stream writer per lake: a second stream on the same lake fails clearly while the first runs,
and a stream that stalled past its lease and was taken over cannot commit (fencing)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.exceptions import LakeLeaseError
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows


def runner(server: Any, base_uri: str, table: TableId, writer: str, server_ids: str, **options: Any) -> StreamRunner:
    config = ConnectionConfig.from_dict({"host": server.host, "port": server.port, "user": server.cdc_user,
                                         "server_id": server_ids}, server.cdc_password)
    return StreamRunner(StreamOptions(base_uri, (table,), StartupMode.LATEST, writer=writer, poll_interval=0.1,
                                      **options), config)


def insert(admin: Any, first: int, count: int) -> None:
    with admin.cursor() as cur:
        for key in range(first, first + count):
            cur.execute("INSERT INTO w VALUES (%s, %s)", (key, f"v{key}"))


def test_a_second_stream_on_the_lake_fails_while_the_first_runs(mariadb_server, admin, cdc_conn, database,
                                                               tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE w (id INT PRIMARY KEY, v VARCHAR(20))")
    table, base_uri = TableId(database, "w"), str(tmp_path / "lake")
    first = runner(mariadb_server, base_uri, table, "dag.stream in run 1", "5650-5651", stop_after_idle_seconds=3)
    control = first.config.connect()
    checkpoint = first.open(control)
    running = threading.Thread(target=first.run, args=(control, checkpoint, StreamProgress.start(), False))
    running.start()
    insert(admin, 1, 50)
    second = runner(mariadb_server, base_uri, table, "dag.stream in run 2", "5652-5653")
    second_control = second.config.connect()
    with pytest.raises(LakeLeaseError, match="held by 'dag.stream in run 1'"):
        second.open(second_control)
    running.join(timeout=60)
    assert not running.is_alive()
    control.close()
    # the first one stopped and let go: the second continues from its checkpoint
    insert(admin, 100, 20)
    checkpoint = second.open(second_control)
    second.catch_up(second_control, checkpoint, StreamProgress.start())
    second_control.close()
    schema = load_table_schema(cdc_conn, table)
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    assert read_changes(base_uri, str(table)).num_rows == 70


def test_a_stalled_stream_taken_over_cannot_commit(mariadb_server, admin, cdc_conn, database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS w (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute("DELETE FROM w")
    table, base_uri = TableId(database, "w"), str(tmp_path / "lake")
    stalled = runner(mariadb_server, base_uri, table, "stalled", "5654-5655", lease_seconds=1)
    control = stalled.config.connect()
    checkpoint = stalled.open(control)
    insert(admin, 1, 10)
    stalled.catch_up(control, checkpoint, StreamProgress.start())
    assert checkpoint.seq == 1

    time.sleep(1.5)  # no renewal: the lease expires, and another writer takes the lake over
    taker = runner(mariadb_server, base_uri, table, "taker", "5656-5657")
    taker_control = taker.config.connect()
    taken = taker.open(taker_control)
    insert(admin, 11, 10)
    taker.catch_up(taker_control, taken, StreamProgress.start())
    assert taken.seq == 2

    with pytest.raises(LakeLeaseError, match="'stalled' lost its lease .*now held by 'taker'"):
        stalled.catch_up(control, checkpoint, StreamProgress.start())  # it would write batch 2 again
    control.close()
    taker_control.close()
    stored = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert stored is not None and (stored.seq, stored.offset) == (taken.seq, taken.offset)
    schema = load_table_schema(cdc_conn, table)
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    assert read_changes(base_uri, str(table)).num_rows == 20


def test_a_resume_after_a_clean_deferral_skips_the_scan_and_one_after_a_kill_does_not(
        mariadb_server, admin, cdc_conn, database, tmp_path, monkeypatch) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS w (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute("DELETE FROM w")
    table, base_uri, writer = TableId(database, "w"), str(tmp_path / "lake"), "dag.stream in run 1"
    first = runner(mariadb_server, base_uri, table, writer, "5658-5659")
    control = first.config.connect()
    checkpoint = first.open(control)
    insert(admin, 1, 10)
    progress = StreamProgress.start()
    first.catch_up(control, checkpoint, progress)
    first.wait_until(progress, checkpoint)  # the deferral: nothing committed past batch 1
    control.close()

    def scan(self: StreamStore, checkpoint: Any) -> int:
        raise AssertionError("a resume after a clean deferral scanned the changelogs")

    with monkeypatch.context() as patched:
        patched.setattr(StreamStore, "remove_uncommitted", scan)
        resumed = runner(mariadb_server, base_uri, table, writer, "5660-5661")
        control = resumed.config.connect()
        checkpoint = resumed.open(control)
    assert (resumed.lease.left_clean_at, checkpoint.seq) == (1, 1)
    # killed between its Delta commit and its checkpoint: the fence's second call is the checkpoint's
    fences = []

    def killed_at_the_checkpoint() -> None:
        fences.append(None)
        if len(fences) == 2:
            raise InterruptedError("killed")

    resumed.store.fence = killed_at_the_checkpoint
    insert(admin, 11, 10)
    with pytest.raises(InterruptedError, match="killed"):
        resumed.catch_up(control, checkpoint, StreamProgress.start())
    control.close()
    assert read_changes(base_uri, str(table)).num_rows == 10  # readers stop at the checkpoint's batch
    changelog = Lake.at(base_uri).table(table).changelog.open()
    assert changelog is not None and changelog.read().num_rows == 20  # the killed run's rows are in Delta

    after_kill = runner(mariadb_server, base_uri, table, writer, "5662-5663")
    control = after_kill.config.connect()
    checkpoint = after_kill.open(control)
    assert after_kill.lease.left_clean_at is None and checkpoint.seq == 1
    reopened = Lake.at(base_uri).table(table).changelog.open()
    assert reopened is not None and reopened.read().num_rows == 10  # removed before anything else
    after_kill.catch_up(control, checkpoint, StreamProgress.start())
    control.close()
    schema = load_table_schema(cdc_conn, table)
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    assert read_changes(base_uri, str(table)).num_rows == 20
