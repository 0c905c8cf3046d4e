"""Offsets order by GTIDs where they decide, else by file index and position, then by skips; JSON is exact."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import (
    BinlogOffset,
    file_index,
    read_current_offset,
)
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_file_index_orders_numerically() -> None:
    assert file_index("mysql-bin.000010") == 10
    assert BinlogOffset("mysql-bin.000009", 999_999) < BinlogOffset("mysql-bin.000010", 4)
    with pytest.raises(InvalidOptionError, match="binlog file name"):
        BinlogOffset("nosuffix", 4)


def test_order_by_file_position_then_skips() -> None:
    a = BinlogOffset("b.000001", 100)
    b = BinlogOffset("b.000001", 100, events_to_skip=1)
    c = BinlogOffset("b.000001", 100, events_to_skip=1, rows_to_skip=2)
    d = BinlogOffset("b.000001", 101)
    assert sorted([d, c, b, a]) == [a, b, c, d]
    assert a.compare(BinlogOffset("b.000001", 100)) == 0 and max([a, d]) == d


def test_gtid_decides_before_file_position() -> None:
    # after a failover the new primary's file/pos say nothing; the GTIDs still order
    earlier = BinlogOffset("x.000900", 9_000, f"{U1}:1-10")
    later = BinlogOffset("y.000001", 4, f"{U1}:1-11")
    assert earlier < later and later > earlier
    # equal sets: the skips inside the transaction decide
    record = BinlogOffset("x.000001", 50, f"{U1}:1-10", events_to_skip=0, rows_to_skip=1)
    assert record > BinlogOffset("x.000001", 900, f"{U1}:1-10")
    # incomparable sets fall back to file and position
    left = BinlogOffset("x.000001", 10, f"{U1}:1-5")
    right = BinlogOffset("x.000001", 20, f"{U2}:1-5")
    assert left < right and not right < left
    maria_a = BinlogOffset("m.000001", 500, "0-1-7", "mariadb")
    maria_b = BinlogOffset("m.000002", 4, "0-1-8", "mariadb")
    assert maria_a < maria_b
    # MariaDB domains that disagree (one ahead, one behind) fall back to file and position too
    ahead_in_0 = BinlogOffset("m.000003", 90, "0-1-9,1-1-1", "mariadb")
    ahead_in_1 = BinlogOffset("m.000003", 80, "0-1-8,1-1-2", "mariadb")
    assert ahead_in_1 < ahead_in_0
    # offsets of different flavours never compare by GTID
    assert BinlogOffset("m.000001", 5, "0-1-9", "mariadb") < BinlogOffset("m.000001", 6, f"{U1}:1")


def test_json_round_trip_is_exact() -> None:
    offset = BinlogOffset("mysql-bin.000123", 2**40, f"{U1}:1-5", "mysql", 3, 70_000)
    assert BinlogOffset.from_dict(json.loads(json.dumps(offset.to_dict()))) == offset
    assert "server" not in offset.to_dict()  # unknown: offsets read off a server keep their old layout
    assert str(offset) == f"mysql-bin.000123:{2**40} gtid={U1}:1-5 (+3 events, +70000 rows)"


def test_records_at_the_watermarks() -> None:
    """A change's offset is (start of its transaction, skips >= 1 row): a transaction that starts
    exactly at a watermark is after it; one that ends exactly at it is before it."""
    watermark = BinlogOffset("b.000001", 500, "0-1-10", "mariadb")
    starts_there = BinlogOffset("b.000001", 500, "0-1-10", "mariadb", events_to_skip=0, rows_to_skip=1)
    ends_there = BinlogOffset("b.000001", 420, "0-1-9", "mariadb", events_to_skip=3, rows_to_skip=70)
    assert watermark < starts_there and ends_there < watermark
    # the same by file and position alone (no GTIDs: MySQL without gtid_mode)
    assert BinlogOffset("b.000001", 500) < BinlogOffset("b.000001", 500, rows_to_skip=1)
    assert BinlogOffset("b.000001", 420, events_to_skip=9, rows_to_skip=9) < BinlogOffset("b.000001", 500)


class _StatusConnection:
    """Stands in for a MySQL server, which this environment cannot run: answers the status query only."""

    def __init__(self, row: tuple | None) -> None:
        self.row, self.queries = row, []

    def cursor(self) -> _StatusConnection:
        return self

    def __enter__(self) -> _StatusConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: object = None) -> None:
        self.queries.append(sql)

    def fetchone(self) -> tuple | None:
        return self.row


@pytest.mark.parametrize(("version", "sql"), [("8.4.3", "SHOW BINARY LOG STATUS"), ("8.0.36", "SHOW MASTER STATUS"),
                                              ("5.7.44-log", "SHOW MASTER STATUS")])
def test_mysql_status_row_gives_file_position_and_executed_set(version: str, sql: str) -> None:
    # MySQL prints long executed sets over several lines
    conn = _StatusConnection(("binlog.000042", 1337, "", "", f"{U2}:1-3,\n{U1}:1-9"))
    offset = read_current_offset(conn, ServerInfo.from_version(version))
    assert conn.queries == [sql]
    assert offset == BinlogOffset("binlog.000042", 1337, f"{U1.lower()}:1-9,{U2}:1-3", "mysql")


def test_mysql_without_gtid_mode_and_binlog_off() -> None:
    mysql80 = ServerInfo.from_version("8.0.36")
    assert read_current_offset(_StatusConnection(("binlog.000001", 4, "", "", "")), mysql80).gtid is None
    with pytest.raises(SourceConfigError, match="binlog is off.*log_bin"):
        read_current_offset(_StatusConnection(None), mysql80)
