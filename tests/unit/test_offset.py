"""Offsets order by GTIDs where they decide, else by file index and position, then by skips; JSON is exact."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysqlcdc.cdc.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, file_index
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_gtid_set_parse_normalise_and_relations() -> None:
    gtids = GtidSet.parse(f"{U2}:1-3,\n{U1}:1-5:7-9:6,{U1}:10")
    assert str(gtids) == f"{U1.lower()}:1-10,{U2}:1-3"
    assert gtids.contains(U1, 10) and not gtids.contains(U2, 4)
    assert GtidSet.parse(f"{U1}:2-4").issubset(gtids)
    assert not gtids.issubset(GtidSet.parse(f"{U1}:1-10"))
    assert str(GtidSet.parse(f"{U1}:1-3").add(f"{U1}:4")) == f"{U1.lower()}:1-4"
    assert str(GtidSet.parse("")) == ""
    tagged = GtidSet.parse(f"{U1}:1-2:blue:1-5")
    assert str(tagged) == f"{U1.lower()}:1-2,{U1.lower()}:blue:1-5"
    assert tagged.contains(f"{U1}:blue", 5) and not tagged.contains(U1, 5)


@pytest.mark.parametrize("bad", ["nonsense", f"{U1}", f"{U1}:0-3", f"{U1}:5-3", f"{U1}:1-x"])
def test_gtid_set_rejects_bad_text(bad: str) -> None:
    with pytest.raises(InvalidOptionError):
        GtidSet.parse(bad)


def test_mariadb_positions() -> None:
    position = MariaDbGtidPosition.parse("1-2-5, 0-1-100")
    assert str(position) == "0-1-100,1-2-5"
    assert MariaDbGtidPosition.parse("0-1-99").issubset(position)
    assert not MariaDbGtidPosition.parse("0-1-99,2-1-1").issubset(position)
    assert str(position.advance("0-3-101")) == "0-3-101,1-2-5"
    with pytest.raises(InvalidOptionError, match="domain-server-seq"):
        MariaDbGtidPosition.parse("0-1")
    with pytest.raises(InvalidOptionError, match="twice"):
        MariaDbGtidPosition.parse("0-1-1,0-2-2")


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
    assert earlier < later and later.is_after(earlier)
    # equal sets: the skips inside the transaction decide
    record = BinlogOffset("x.000001", 50, f"{U1}:1-10", events_to_skip=0, rows_to_skip=1)
    assert record.is_after(BinlogOffset("x.000001", 900, f"{U1}:1-10"))
    # incomparable sets fall back to file and position
    left = BinlogOffset("x.000001", 10, f"{U1}:1-5")
    right = BinlogOffset("x.000001", 20, f"{U2}:1-5")
    assert left < right and not right < left
    maria_a = BinlogOffset("m.000001", 500, "0-1-7", "mariadb")
    maria_b = BinlogOffset("m.000002", 4, "0-1-8", "mariadb")
    assert maria_a < maria_b


def test_json_round_trip_is_exact() -> None:
    offset = BinlogOffset("mysql-bin.000123", 2**40, f"{U1}:1-5", "mysql", 3, 70_000)
    assert BinlogOffset.from_dict(json.loads(json.dumps(offset.to_dict()))) == offset
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
