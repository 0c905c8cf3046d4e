"""The last binlog margin check in the lake (``lake.documents.binlog_margin``): its document round-trips, a newer
one is refused, the stream's watch writes one at each check with its threshold, and a failed write never
stops the stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.retention import (
    BinlogFile,
    MarginLimit,
    PositionMargin,
    position_margin,
    retention_from_variables,
)
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.stream import retention_watch
from airflow_provider_mysqlcdc.engine.stream.retention_watch import RetentionWatch, check_checkpoint
from airflow_provider_mysqlcdc.exceptions import NewerLakeFormatError
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import MarginCheck, read_margin_check, write_margin_check
from airflow_provider_mysqlcdc.lake.handle import Lake

HOUR = 3600.0
NOW = 1_700_000_000.0
FILES = [BinlogFile("bin.000001", 1000), BinlogFile("bin.000002", 2000)]
ONE_HOUR = retention_from_variables({"binlog_expire_logs_seconds": "3600"})


def margin(file: str = "bin.000001", files: list[BinlogFile] = FILES) -> PositionMargin:
    return position_margin(ONE_HOUR, files, file, 400, NOW, lambda name: NOW - HOUR / 4)


def test_a_check_round_trips_through_the_lake(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    assert read_margin_check(lake) is None
    check = MarginCheck.of(margin(), "stream", 6 * HOUR, NOW)
    assert (check.measured_at, check.file, check.position, check.limited_by) == (
        "2023-11-14T22:13:20+00:00", "bin.000001", 400, MarginLimit.AGE)
    assert check.seconds == pytest.approx(0.75 * HOUR) and check.behind_bytes == 600 + 2000
    write_margin_check(lake, check)
    assert read_margin_check(lake) == check
    document = json.loads(Path(lake.binlog_margin).read_text())
    assert lake.binlog_margin.endswith("/_stream/binlog_margin.json")
    assert document == {"format_version": 1, "measured_at": "2023-11-14T22:13:20+00:00", "checked_by": "stream",
                        "file": "bin.000001", "position": 400, "seconds": check.seconds, "limited_by": "age",
                        "behind_bytes": 2600, "warn_below_seconds": 21600.0}


@pytest.mark.parametrize(
    ("check", "below"),
    [
        (MarginCheck.of(margin(), "stream", 6 * HOUR, NOW), True),  # 45 min left
        (MarginCheck.of(margin(), "stream", 600, NOW), False),
        (MarginCheck.of(margin(), "stream", None, NOW), False),  # the stream never warns
        (MarginCheck.of(margin(files=FILES[1:]), "split", None, NOW), True),  # purged: always
        (MarginCheck.of(position_margin(retention_from_variables({"binlog_expire_logs_seconds": "0"}), FILES,
                                        "bin.000001", 4, NOW, lambda name: NOW), "split", HOUR, NOW), False),
    ],
)
def test_below_the_streams_threshold_or_purged(check: MarginCheck, below: bool) -> None:
    assert check.below is below
    assert MarginCheck.from_dict(check.to_dict()) == check


def test_a_newer_document_is_refused() -> None:
    document = {**MarginCheck.of(margin(), "stream", None, NOW).to_dict(), "format_version": 2}
    with pytest.raises(NewerLakeFormatError, match="binlog margin .* has format_version 2"):
        MarginCheck.from_dict(document, "/lake/_stream/binlog_margin.json")


def test_the_watch_records_each_check_with_the_streams_threshold(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    monkeypatch.setattr(retention_watch, "read_position_margin", lambda *args: margin())
    watch = RetentionWatch({}, 2 * HOUR, lake=lake)
    assert watch.check(None, BinlogOffset("bin.000001", 400)) == margin()
    check = read_margin_check(lake)
    assert check is not None and (check.checked_by, check.file, check.warn_below_seconds) == (
        "stream", "bin.000001", 2 * HOUR)


def test_a_failed_write_never_stops_the_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    def fail(*args: Any) -> None:
        raise OSError("read-only lake")

    monkeypatch.setattr(retention_watch, "read_position_margin", lambda *args: margin())
    monkeypatch.setattr(retention_watch, "write_margin_check", fail)
    watch = RetentionWatch({}, None, lake=Lake.at(str(tmp_path / "lake")))
    assert watch.check(None, BinlogOffset("bin.000001", 400)) == margin()
    assert "could not write the binlog margin check" in caplog.text


def test_the_purged_position_is_said_whatever_the_threshold() -> None:
    purged = margin(files=FILES[1:])
    assert purged.limited_by is MarginLimit.PURGED
    for threshold in (None, 1.0):
        warning = purged.warning(threshold)
        assert warning is not None and "the stream's position bin.000001:400 is lost already" in warning
        assert "on_position_lost" in warning
    assert margin().warning(None) is None and margin().warning(600) is None


def test_the_split_measures_no_checkpoint_of_another_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a failover the checkpoint's file names mean nothing on the new server: no margin, no record."""
    measured: list[str] = []

    def measure(control: Any, starts: Any, file: str, position: int) -> PositionMargin:
        measured.append(file)
        return margin()

    monkeypatch.setattr(ServerInfo, "read", lambda control: None)
    monkeypatch.setattr(retention_watch, "server_identity", lambda control, server: "mariadb server_id=2")
    monkeypatch.setattr(retention_watch, "read_position_margin", measure)
    lake = Lake.at(str(tmp_path / "lake"))
    offset = BinlogOffset("bin.000001", 400, server="mariadb server_id=1")
    check_checkpoint(None, {}, lake, offset)
    assert measured == [] and read_margin_check(lake) is None
    check_checkpoint(None, {}, lake, BinlogOffset("bin.000001", 400, server="mariadb server_id=2"))
    check = read_margin_check(lake)
    assert measured == ["bin.000001"] and check is not None and check.checked_by == "split"
    assert check.warn_below_seconds == 6 * HOUR  # the stream's default: it never recorded one
