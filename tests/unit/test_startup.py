"""Reading startup options: which text is a file position, a GTID set or position, or a time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.offset.startup import (
    Transaction,
    check_sorts_after,
    covered_by_gtids,
    find_first_uncovered,
    parse_specific_offset,
    parse_timestamp_ms,
)
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, ServerChangedError

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_file_position_and_gtids_are_told_apart() -> None:
    assert parse_specific_offset("mysql-bin.000003:4", "mariadb") == BinlogOffset("mysql-bin.000003", 4,
                                                                                  flavor="mariadb")
    assert parse_specific_offset(" 0-1-100, 1-2-5 ", "mariadb") == MariaDbGtidPosition.parse("0-1-100,1-2-5")
    assert parse_specific_offset(f"{UUID}:1-5", "mysql") == GtidSet.parse(f"{UUID}:1-5")
    # a UUID with one transaction looks like 'name:number' but is no binlog file name
    assert parse_specific_offset(f"{UUID}:5", "mysql") == GtidSet.parse(f"{UUID}:5")


@pytest.mark.parametrize(("text", "flavor", "message"), [
    ("yesterday", "mariadb", "must be 'binlog-file:position'"),
    ("", "mysql", "must be 'binlog-file:position'"),
    (None, "mysql", "must be 'binlog-file:position'"),
    ("0-1-100", "mysql", "MariaDB GTID position, but the server is MySQL"),
    (f"{UUID}:1-5", "mariadb", "MySQL GTID set, but the server is MariaDB"),
])
def test_bad_offsets_say_what_is_accepted(text: str | None, flavor: str, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        parse_specific_offset(text, flavor)


def test_timestamps() -> None:
    assert parse_timestamp_ms(1_700_000_000_123) == 1_700_000_000_123
    assert parse_timestamp_ms("1700000000123") == 1_700_000_000_123
    assert parse_timestamp_ms("2023-11-14T22:13:20") == 1_700_000_000_000  # naive: UTC
    assert parse_timestamp_ms("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
    assert parse_timestamp_ms(dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)) == 1_700_000_000_000
    for bad in (None, True, "noon", ""):
        with pytest.raises(InvalidOptionError, match="startup_timestamp"):
            parse_timestamp_ms(bad)


def test_gtid_coverage() -> None:
    start = BinlogOffset("b.000001", 4)

    def txn(gtid: str | None) -> Transaction:
        return Transaction(start, start, gtid, 0)

    maria = covered_by_gtids(MariaDbGtidPosition.parse("0-1-100,1-1-5"))
    assert maria(txn("0-2-100")) and maria(txn("1-1-5")) and not maria(txn("0-1-101")) and not maria(txn("2-1-1"))
    mysql = covered_by_gtids(GtidSet.parse(f"{UUID}:1-5"))
    assert mysql(txn(f"{UUID}:5")) and not mysql(txn(f"{UUID}:6")) and not mysql(txn(None))


def test_bisect_finds_the_first_uncovered_transaction_across_files() -> None:
    """Files of transactions committed at the given seconds; the bisect probes each file's first."""
    files = {"b.000001": [1, 2], "b.000002": [3, 4, 5], "b.000003": [], "b.000004": [6], "b.000005": [7, 8],
             "b.000006": []}
    names, probed = list(files), []

    def transactions(file: str) -> Iterator[Transaction]:
        probed.append(file)
        for name in names[names.index(file):]:  # a scan goes on through the later files
            for position, second in enumerate(files[name]):
                yield Transaction(BinlogOffset(name, position), BinlogOffset(name, position + 1), None, second)

    def before(second: int) -> Callable[[Transaction], bool]:
        return lambda txn: txn.commit_ms < second

    assert find_first_uncovered(names, transactions, before(5), "mysql") == BinlogOffset("b.000002", 2)
    assert probed[-1] == "b.000002"  # the scan started at the file the bisect chose, not at the first
    assert find_first_uncovered(names, transactions, before(1), "mysql") == BinlogOffset("b.000001", 0)
    assert find_first_uncovered(names, transactions, before(6), "mysql") == BinlogOffset("b.000004", 0)
    # everything covered: the end of the last transaction (the empty last file, with no transaction
    # left to probe, counts as uncovered; as covered, the scan would start there and miss b.000005's)
    assert find_first_uncovered(names, transactions, before(99), "mysql") == BinlogOffset("b.000005", 2)


def test_a_failover_to_a_binlog_numbered_below_the_checkpoint_is_refused() -> None:
    checkpoint = BinlogOffset("mysql-bin.000042", 900, "0-1-77")
    for moved in (BinlogOffset("replica-bin.000043", 4, "0-1-77"), BinlogOffset("replica-bin.000042", 900, "0-1-77"),
                  BinlogOffset("replica-bin.000042", 1200, "0-1-77")):
        check_sorts_after(checkpoint, moved)  # the new server's changes sort after the lake's
    with pytest.raises(ServerChangedError, match=r"replica-bin.000007:350, is numbered below the checkpoint's "
                                                 r"mysql-bin.000042:900.*Nothing was written"):
        check_sorts_after(checkpoint, BinlogOffset("replica-bin.000007", 350, "0-1-77"))
    with pytest.raises(ServerChangedError):
        check_sorts_after(checkpoint, BinlogOffset("replica-bin.000042", 400, "0-1-77"))
