"""The margin of a binlog position before the server may purge its file, and the stream's watch of it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.retention import (
    BinlogFile,
    PositionMargin,
    position_margin,
    retention_from_variables,
)
from airflow_provider_mysqlcdc.engine.stream import retention_watch
from airflow_provider_mysqlcdc.engine.stream.retention_watch import CHECK_SECONDS, RetentionWatch

HOUR = 3600.0
NOW = 1_000_000.0
FILES = [BinlogFile("bin.000001", 1000), BinlogFile("bin.000002", 2000), BinlogFile("bin.000003", 500)]
STARTS = {"bin.000001": NOW - 5 * HOUR, "bin.000002": NOW - 3 * HOUR, "bin.000003": NOW - HOUR}
ONE_DAY = retention_from_variables({"binlog_expire_logs_seconds": "86400", "expire_logs_days": "1"})


def started(asked: list[str]) -> Any:
    def start(name: str) -> float:
        asked.append(name)
        return STARTS[name]
    return start


def test_a_closed_file_purges_a_retention_after_the_next_file_started() -> None:
    asked: list[str] = []
    margin = position_margin(ONE_DAY, FILES, "bin.000001", 400, NOW, started(asked))
    assert margin.seconds == pytest.approx(24 * HOUR - 3 * HOUR)  # closed when bin.000002 started
    assert margin.purge_at == pytest.approx(NOW + 21 * HOUR)
    assert (margin.behind_bytes, margin.behind_files) == (600 + 2000 + 500, 2)
    assert asked == ["bin.000002"]  # only the next file's start is read
    assert "binlog_expire_logs_seconds = 86400 after it was closed 3 h ago" in margin.describe()
    assert not margin.below(6 * HOUR) and margin.below(22 * HOUR)


def test_the_newest_file_has_at_least_the_whole_retention() -> None:
    asked: list[str] = []
    margin = position_margin(ONE_DAY, FILES, "bin.000003", 500, NOW, started(asked))
    assert margin.seconds == 24 * HOUR and margin.behind_bytes == 0 and asked == []


def test_expire_logs_days_when_there_is_no_seconds_variable() -> None:
    old = retention_from_variables({"expire_logs_days": "2"})
    margin = position_margin(old, FILES, "bin.000002", 4, NOW, started([]))
    assert margin.seconds == pytest.approx(48 * HOUR - HOUR)
    assert "SET GLOBAL expire_logs_days" in margin.advice()


def test_a_file_the_server_no_longer_has_has_nothing_left() -> None:
    margin = position_margin(ONE_DAY, FILES[1:], "bin.000001", 400, NOW, started([]))
    assert margin.seconds == 0 and margin.below(1) and "no longer has it" in margin.decided_by


def test_nothing_purges_without_retention() -> None:
    never = retention_from_variables({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0"})
    margin = position_margin(never, FILES, "bin.000001", 4, NOW, started([]))
    assert margin.seconds is None and margin.purge_at is None and not margin.below(10 ** 9)
    assert "is not purged by age or size" in margin.describe()


def test_a_size_limit_gives_the_room_left_at_the_rate_the_server_writes() -> None:
    sized = retention_from_variables({"binlog_expire_logs_seconds": "0", "max_binlog_total_size": "4500"})
    margin = position_margin(sized, FILES, "bin.000002", 4, NOW, started([]))
    rate = 3500 / (5 * HOUR)  # all files' bytes over the oldest file's age
    assert margin.seconds == pytest.approx((4500 - 2500) / rate)
    assert "max_binlog_total_size" in margin.decided_by and "raise max_binlog_total_size" in margin.advice()
    both = retention_from_variables({"binlog_expire_logs_seconds": "3600", "max_binlog_total_size": "4500"})
    assert position_margin(both, FILES, "bin.000002", 4, NOW, started([])).seconds == pytest.approx(0.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_watch_reads_the_server_at_most_every_check_interval_and_warns_below_the_margin(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    margins = [position_margin(ONE_DAY, FILES, "bin.000001", 400, NOW, started([])),
               position_margin(ONE_DAY, FILES, "bin.000003", 500, NOW, started([]))]
    reads: list[str] = []

    def read(control: Any, starts: Any, file: str, position: int) -> PositionMargin:
        reads.append(file)
        return margins[len(reads) - 1]

    monkeypatch.setattr(retention_watch, "read_position_margin", read)
    reported: list[PositionMargin] = []
    clock = Clock()
    watch = RetentionWatch({}, 22 * HOUR, reported.append, clock)
    offset = BinlogOffset("bin.000001", 400)
    with caplog.at_level(logging.WARNING, logger=retention_watch.__name__):
        assert watch.check(None, offset) is margins[0]
        clock.now = CHECK_SECONDS - 1
        assert watch.check(None, offset) is margins[0]  # not read again yet
        clock.now = CHECK_SECONDS
        assert watch.check(None, BinlogOffset("bin.000003", 500)) is margins[1]
    assert reads == ["bin.000001", "bin.000003"] and reported == margins
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "may be purged in 21 h" in warnings[0]
    assert "binlog_margin_seconds = 79200" in warnings[0]


def test_a_failed_check_never_stops_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any) -> PositionMargin:
        raise OSError("gone")

    monkeypatch.setattr(retention_watch, "read_position_margin", fail)
    assert RetentionWatch({}, HOUR).check(None, BinlogOffset("bin.000001", 4)) is None
