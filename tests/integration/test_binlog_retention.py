"""The split task's binlog retention guard against the real server: with a retention shorter than the
snapshot's estimate it refuses before planning, naming the setting and what to set; with
``retention_check="warn"`` it warns and plans; with a long retention it says nothing; a stream checkpoint
close to its purge, or purged, is warned about. The server's ``binlog_expire_logs_seconds`` is changed for
each case and restored after (only the last test rotates and purges the binlog, up to its newest file,
which no other test's lake needs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.retention import BATCH_OVERHEAD_SECONDS, MarginLimit, read_retention
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import BinlogRetentionError
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import read_margin_check
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake
from tests.airflow_connections import set_airflow_connections
from tests.integration.binlog_admin import binlog_files, purge_to_newest
from tests.integration.stream_task import stream_task

ROWS = 20_000  # 10 chunks of 2,000 in 4 batches: about 60 s by the estimate (Spark's start per batch)


@pytest.fixture()
def table(monkeypatch: pytest.MonkeyPatch, mariadb_server, admin, database) -> str:
    set_airflow_connections(monkeypatch, mariadb_server, "5480-5490")
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS orders")
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO orders SELECT seq, seq FROM seq_1_to_{ROWS}")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()
    return f"{database}.orders"


@contextlib.contextmanager
def retention(mariadb_server, seconds: int) -> Iterator[None]:
    admin = mariadb_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds")
        (original,) = cur.fetchone()
        cur.execute("SET GLOBAL binlog_expire_logs_seconds = %s", (seconds,))
        try:
            yield
        finally:
            cur.execute("SET GLOBAL binlog_expire_logs_seconds = %s", (original,))
    admin.close()


def split(table: str, base_uri: Path, **kwargs: object) -> list[Job]:
    # imported here: importing Airflow while pytest collects binds its log output to pytest's capture
    from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator

    operator = MySqlChunkSplitOperator(task_id="split", tables=[table], base_uri=str(base_uri), chunk_size=2_000,
                                       rows_per_batch=6_000, **kwargs)
    return [Job.from_dict(b) for b in operator.execute({})]


def task_log(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The operator's log lines (Airflow's structlog writes them to stdout, not to ``logging``)."""
    return capsys.readouterr().out.splitlines()


def retention_warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if "[warning" in line and "binlog retention:" in line]


def test_the_server_setting_is_read(mariadb_server, cdc_conn) -> None:
    with retention(mariadb_server, 3600):
        found = read_retention(cdc_conn)
    assert (found.seconds, found.setting, found.value) == (3600, "binlog_expire_logs_seconds", "3600")


def test_a_snapshot_longer_than_the_retention_is_refused_before_planning(
    mariadb_server, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with retention(mariadb_server, 30), pytest.raises(BinlogRetentionError) as error:
        split(table, tmp_path / "lake")
    message = str(error.value)
    assert "binlog_expire_logs_seconds = 30 (30 s)" in message
    assert "4 Spark jobs, about 20,000 rows, at the default 50,000 rows/s" in message
    assert f"plus {BATCH_OVERHEAD_SECONDS:.0f} s of Spark start per job, one job at a time: 1 min)" in message
    assert "SET GLOBAL binlog_expire_logs_seconds = 121" in message and "fewer tables per run" in message
    assert "retention_check='warn'" in message
    assert SnapshotStore(Lake.at(str(tmp_path / "lake"))).read_plan(TableId.parse(table)) is None  # nothing planned


def test_warn_logs_and_plans(mariadb_server, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with retention(mariadb_server, 30):
        batches = split(table, tmp_path / "lake", retention_check="warn")
    assert len(batches) == 4
    (warning,) = retention_warnings(task_log(capsys))
    assert "binlog_expire_logs_seconds = 30 (30 s)" in warning and "may be purged before it starts" in warning
    assert "SET GLOBAL binlog_expire_logs_seconds = 121" in warning


def test_more_than_half_the_retention_warns_by_default(
    mariadb_server, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with retention(mariadb_server, 100):
        assert len(split(table, tmp_path / "lake")) == 4
    (warning,) = retention_warnings(task_log(capsys))
    assert "more than 50% of it" in warning and "binlog_expire_logs_seconds = 100 (1 min 40 s)" in warning


def test_a_long_retention_says_nothing_and_off_does_not_look(
    mariadb_server, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with retention(mariadb_server, 86_400):
        assert len(split(table, tmp_path / "a")) == 4
    lines = task_log(capsys)
    assert retention_warnings(lines) == []
    assert any("[info" in line and "binlog retention: binlog_expire_logs_seconds = 86400" in line for line in lines)
    with retention(mariadb_server, 1):
        assert len(split(table, tmp_path / "b", retention_check="off")) == 4
    assert not any("binlog retention" in line for line in task_log(capsys))


def test_a_bad_value_is_named(table: str, tmp_path: Path) -> None:
    from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="retention_check must be one of 'error', 'warn', 'off', not 'yes'"):
        split(table, tmp_path / "lake", retention_check="yes")


def test_the_split_warns_when_the_streams_position_may_be_lost_and_says_when_it_is(
    mariadb_server, admin, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream that ran and is down (failed, paused): each split run measures its checkpoint's margin from
    outside, warns below the threshold the stream recorded with the stream's own sentence, says so when the
    file is purged, and records what it found for the page."""
    lake = Lake.at(str(tmp_path / "lake"))
    with retention(mariadb_server, 3600):
        stream_task(lake.base_uri, table, startup_mode="latest-offset", binlog_margin_seconds=7200)
        recorded = read_margin_check(lake)
        assert recorded is not None and (recorded.checked_by, recorded.warn_below_seconds) == ("stream", 7200)
        with admin.cursor() as cur:
            cur.execute("INSERT INTO orders VALUES (0, 0)")
            cur.execute("FLUSH BINARY LOGS")  # the checkpoint's file is closed: purged an hour from now
        assert split(table, tmp_path / "lake") == []  # the stream captures the table: nothing to snapshot
        (warning,) = margin_warnings(task_log(capsys))
        assert "the stream's position may be lost soon: binlog file " in warning and "may be purged in" in warning
        assert "binlog_expire_logs_seconds = 3600" in warning and "binlog_margin_seconds = 7200" in warning
        check = read_margin_check(lake)
        assert check is not None and (check.checked_by, check.file, check.limited_by) == (
            "split", recorded.file, MarginLimit.AGE)
        assert check.seconds is not None and 0 < check.seconds <= 3600 and check.below

        purge_to_newest(admin)
        assert recorded.file not in binlog_files(admin)
        split(table, tmp_path / "lake")
        (warning,) = margin_warnings(task_log(capsys))
    assert f"the stream's position {recorded.file}:{recorded.position} is lost already" in warning
    assert "BinlogPositionLostError" in warning and "on_position_lost" in warning
    check = read_margin_check(lake)
    assert check is not None and check.limited_by is MarginLimit.PURGED and check.warn_below_seconds == 7200


def margin_warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if "[warning" in line and "the stream's position" in line]

