"""GTID sets (MySQL) and GTID positions (MariaDB): parsing, the server's text layout, and set relations."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
u1 = U1.lower()


def contains(gtids: GtidSet, gtid: str) -> bool:
    """Whether the one transaction ``uuid[:tag]:n`` is in the set."""
    return GtidSet.parse(gtid).issubset(gtids)


def test_gtid_set_parse_normalise_and_relations() -> None:
    gtids = GtidSet.parse(f"{U2}:1-3,\n{U1}:1-5:7-9:6,{U1}:10")
    assert str(gtids) == f"{u1}:1-10,{U2}:1-3"
    assert contains(gtids, f"{U1}:10") and not contains(gtids, f"{U2}:4")
    assert GtidSet.parse(f"{U1}:2-4").issubset(gtids)
    assert not gtids.issubset(GtidSet.parse(f"{U1}:1-10"))
    assert GtidSet.parse("").issubset(gtids) and str(GtidSet.parse(None)) == ""


def test_dashless_uuid_is_the_same_source() -> None:
    assert GtidSet.parse(U1.replace("-", "") + ":1-3") == GtidSet.parse(f"{U1}:1-3")
    assert contains(GtidSet.parse(f"{U1}:1-3"), U1.replace("-", "") + ":2")


def test_union_and_add_merge_adjacent_intervals() -> None:
    left = GtidSet.parse(f"{U1}:1-3,{U2}:5")
    right = GtidSet.parse(f"{U1}:4-6:9")
    assert str(left.union(right)) == f"{u1}:1-6:9,{U2}:5"
    assert str(left.union(right).add(f"{U1}:7").add(f"{U1}:8")) == f"{u1}:1-9,{U2}:5"
    assert str(GtidSet().add(f"{U2}:1")) == f"{U2}:1"
    assert left.issubset(left.union(right)) and not left.union(right).issubset(left)


def test_tagged_gtids_of_mysql_84() -> None:
    tagged = GtidSet.parse(f"{U1}:1-2:Blue:1-5:alpha:3,{U2}:7")
    # the server's layout: one entry per UUID, untagged intervals first, tags sorted and lower-cased
    assert str(tagged) == f"{u1}:1-2:alpha:3:blue:1-5,{U2}:7"
    assert GtidSet.parse(str(tagged)) == tagged
    assert contains(tagged, f"{U1}:BLUE:5") and not contains(tagged, f"{U1}:5") and not contains(tagged, f"{U1}:red:1")
    assert str(tagged.add(f"{U1}:blue:6")) == f"{u1}:1-2:alpha:3:blue:1-6,{U2}:7"
    assert not GtidSet.parse(f"{U1}:blue:1").issubset(GtidSet.parse(f"{U1}:1"))


@pytest.mark.parametrize(
    "bad",
    ["nonsense", U1, f"{U1}:0-3", f"{U1}:5-3", f"{U1}:1-x", f"{U1}:", f"{U1}:blue", f"{U1}:a:b:1", f"{U1}:1:9tag:1"],
)
def test_gtid_set_rejects_bad_text(bad: str) -> None:
    with pytest.raises(InvalidOptionError):
        GtidSet.parse(bad)


def test_mariadb_positions_compare_per_domain() -> None:
    position = MariaDbGtidPosition.parse("1-2-5, 0-1-100")
    assert str(position) == "0-1-100,1-2-5"
    assert MariaDbGtidPosition.parse("0-1-99").issubset(position)
    assert MariaDbGtidPosition.parse("0-7-100").issubset(position)  # the server id does not order
    assert not MariaDbGtidPosition.parse("0-1-99,2-1-1").issubset(position)
    assert not position.issubset(MariaDbGtidPosition.parse("0-1-101"))  # domain 1 is missing there
    assert MariaDbGtidPosition.parse("").issubset(position)
    assert MariaDbGtidPosition.parse(" ") == MariaDbGtidPosition.parse(None) == MariaDbGtidPosition(())


def test_mariadb_single_domain_positions_compare_as_the_general_case() -> None:
    """One domain on each side is the stream's every comparison, answered without the per-domain maps."""
    one, later, other_domain = (MariaDbGtidPosition.parse(t) for t in ("0-1-100", " 0-2-101 ", "3-1-1"))
    assert str(later) == "0-2-101" and later.domains == ((0, 2, 101),)
    assert one.issubset(later) and not later.issubset(one) and one.issubset(one)
    assert not one.issubset(other_domain) and not other_domain.issubset(one)  # a missing domain is seq 0
    assert MariaDbGtidPosition.parse("3-1-0").issubset(one)
    assert str(one.advance("0-1-102")) == "0-1-102" and str(one.advance("3-1-7")) == "0-1-100,3-1-7"


def test_mariadb_advance_replaces_only_its_domain() -> None:
    position = MariaDbGtidPosition.parse("0-1-100,1-2-5")
    assert str(position.advance("0-3-101")) == "0-3-101,1-2-5"
    assert str(position.advance("7-1-1")) == "0-1-100,1-2-5,7-1-1"


@pytest.mark.parametrize(("bad", "message"), [("0-1", "domain-server-seq"), ("0-1-1,0-2-2", "twice"),
                                              ("a-b-c", "domain-server-seq"), ("0-1-2-3", "domain-server-seq"),
                                              ("0--1", "domain-server-seq"), ("0-1-+5", "domain-server-seq"),
                                              ("0-1-\u00b2", "domain-server-seq"), ("1-1-1,0-1", "domain-server-seq")])
def test_mariadb_rejects_bad_text(bad: str, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        MariaDbGtidPosition.parse(bad)
