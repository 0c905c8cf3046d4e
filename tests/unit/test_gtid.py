"""GTID sets (MySQL) and GTID positions (MariaDB): parsing, the server's text layout, and set relations."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog import reader as binlog_reader
from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.reader import Committed
from airflow_provider_mysqlcdc.cdc.offset.as_of import AsOf
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.offset.startup import Transaction, anchor, covered_by_gtids, parse_specific_offset
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, ServerChangedError
from tests.mysql_fixtures import MYSQL_BINLOGS, file_reader, owner_expected, previous_gtids

U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
u1 = U1.lower()


def contains(gtids: GtidSet, gtid: str) -> bool:
    """Whether the one transaction ``uuid[:tag]:n`` is in the set, asked both ways, which must agree."""
    assert gtids.contains(gtid) == GtidSet.parse(gtid).issubset(gtids)
    return gtids.contains(gtid)


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


def test_tagged_sets_in_the_servers_order_and_layout() -> None:
    """MySQL prints each uuid once (uuids in order), its untagged intervals, then its tags in order; sources
    of one uuid keep that order whatever order they came in, and a uuid with only tags starts with one."""
    text = f"{U2}:b:1,{U1}:zeta:4,{U1}:1-3,\n{U1}:_x:1 , {U1} : Alpha_1 : 7-8 : 2, {U2}:a9:3"
    gtids = GtidSet.parse(text)
    assert str(gtids) == f"{u1}:1-3:_x:1:alpha_1:2:7-8:zeta:4,{U2}:a9:3:b:1"
    assert GtidSet.parse(str(gtids)) == gtids
    # '@@gtid_executed' has a newline after each comma: the same set, the same text without it
    assert str(GtidSet.parse(f"{u1}:1-3:_x:1:alpha_1:2:7-8:zeta:4,\n{U2}:a9:3:b:1")) == str(gtids)
    longest = "t" * 32
    assert str(GtidSet.parse(f"{U1}:{longest}:1")) == f"{u1}:{longest}:1"


def test_add_is_the_union_with_one_transaction() -> None:
    """``add`` (the stream's, at every commit) against the general union, on random sets and transactions."""
    rng = random.Random(49)
    sources = [U1, f"{U1}:blue", f"{U1}:a", U2, f"{U2}:z_1"]
    for _ in range(500):
        gtids = GtidSet()
        for _ in range(rng.randrange(12)):
            start = rng.randrange(1, 30)
            gtids = gtids.union(GtidSet.parse(f"{rng.choice(sources)}:{start}-{start + rng.randrange(4)}"))
        gtid = f"{rng.choice(sources)}:{rng.randrange(1, 36)}"
        added = gtids.add(gtid)
        assert added == gtids.union(GtidSet.parse(gtid)) and str(added) == str(gtids.union(GtidSet.parse(gtid)))
        assert added.contains(gtid) and gtids.issubset(added)
    grown = GtidSet.parse(f"{U1}:1-5")
    assert grown.add(f"{U1}:3") is grown  # already in: the same set
    assert str(grown.add(f"{U1}:BLUE:1").add(f"{U1}:7").add(f"{U1}:6")) == f"{u1}:1-7:blue:1"


@pytest.mark.parametrize("bad", [U1, f"{U1}:0", f"{U1}:1-3", f"{U1}:9tag:1", f"{U1}:tag", "nonsense:1",
                                 f"{U1}:{'t' * 33}:1", f"{U1}:a:b:1", ":1"])
def test_add_rejects_what_is_not_one_transaction(bad: str) -> None:
    with pytest.raises(InvalidOptionError):
        GtidSet().add(bad)
    with pytest.raises(InvalidOptionError):
        GtidSet().contains(bad)


@pytest.mark.parametrize(
    "bad",
    ["nonsense", U1, f"{U1}:{'t' * 33}:1", f"{U1}:0-3", f"{U1}:5-3", f"{U1}:1-x", f"{U1}:", f"{U1}:blue",
     f"{U1}:a:b:1", f"{U1}:1:9tag:1", f"{U1}:1:ta-g:2"],
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


TAGGED_FILE = "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"
UNTAGGED_FILE = "rust_mysql_common/binlog_transaction_previous_GTID_no_tag.000001"
SERVER = "55778904-0299-11f1-b1b8-4ef0c4956feb"


@pytest.mark.parametrize("name", [TAGGED_FILE, UNTAGGED_FILE])
def test_the_sets_mysql_wrote_in_previous_gtids(name: str) -> None:
    """A real MySQL 9.6 binlog's PREVIOUS_GTIDS holds a tagged and an untagged source of one uuid (8.0.40's,
    an untagged one): the sets their owner expects (in its own layout), read in the server's."""
    (expected,) = owner_expected(name, "PREVIOUS_GTIDS")
    read = GtidSet.parse(previous_gtids(name))
    assert read == GtidSet.parse(expected["gtid_set"])
    assert str(read) == {TAGGED_FILE: f"{SERVER}:1-13:mytag:1-2",
                         UNTAGGED_FILE: "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"}[name]


TAGGED_BINLOG = BinlogFiles([MYSQL_BINLOGS / TAGGED_FILE])  # named as a binlog file already


def read_file(gtid: str | None) -> list[Committed]:
    """The transactions ``BinlogReader`` commits reading the tagged binlog file from its start, with ``gtid`` as the
    GTIDs executed before it: the reader's own loop, the file as its events; no table captured."""
    start = BinlogOffset(TAGGED_BINLOG.names[0], 4, gtid)
    return [item for item in file_reader(TAGGED_BINLOG, start=start) if isinstance(item, Committed)]


def test_the_reader_advances_the_offsets_gtids_by_a_tagged_transaction() -> None:
    """The tagged transaction MySQL 9.6 wrote, through the reader: its GTID, and the offset's set after it."""
    before = previous_gtids(TAGGED_FILE)
    (committed,) = read_file(str(GtidSet.parse(before)))
    assert committed.gtid == f"{SERVER}:mytag:3"
    assert (committed.offset.position, committed.offset.gtid) == (541, f"{SERVER}:1-13:mytag:1-3")
    assert BinlogOffset(committed.offset.file, 4, before) < committed.offset
    # without GTIDs to start from (a position-only offset) the transaction still carries its own
    (positional,) = read_file(None)
    assert positional.gtid == f"{SERVER}:mytag:3" and positional.offset.gtid is None


def test_tagged_gtids_wherever_a_gtid_set_goes() -> None:
    """Startup's ``specific-offset``, as-of reads (both find the first transaction not covered), and the
    order of offsets (the stream's and failover's comparisons)."""
    executed = f"{SERVER}:1-13:MyTag:1-2"
    assert parse_specific_offset(executed, "mysql") == GtidSet.parse(executed)
    assert parse_specific_offset(f"{SERVER}:mytag:3", "mysql") == GtidSet.parse(f"{SERVER}:mytag:3")
    assert AsOf.parse(executed) == AsOf(gtid=executed)
    covered = covered_by_gtids(GtidSet.parse(executed))
    start = BinlogOffset("binlog.000001", 4)
    assert covered(Transaction(start, start, f"{SERVER}:mytag:2", 0))
    assert not covered(Transaction(start, start, f"{SERVER}:mytag:3", 0))
    assert not covered(Transaction(start, start, f"{SERVER}:other:1", 0))
    # offsets: GTIDs decide over file and position, tags included
    early = BinlogOffset("binlog.000009", 400, f"{SERVER}:1-13:mytag:1-2")
    later = BinlogOffset("binlog.000001", 4, f"{SERVER}:1-13:mytag:1-3")
    apart = BinlogOffset("binlog.000002", 4, f"{SERVER}:1-14:mytag:1-2")
    assert early < later and early < apart and early.compare(BinlogOffset("binlog.000001", 4, executed)) == 0
    assert later < apart  # incomparable sets: file and position decide, as for untagged ones


class MySqlAnswers:
    """A control connection to the MySQL 9.6 server of the tagged file, after a failover: the answers of the
    queries ``anchor`` asks (identity, executed and purged GTIDs, binlog files); a cursor is the connection."""

    def __init__(self, executed: str, purged: str) -> None:
        self.answers = {"SELECT @@server_uuid": SERVER, "SELECT @@GLOBAL.gtid_executed": executed,
                        "SELECT @@GLOBAL.gtid_purged": purged}
        self.answer: Any = None

    def cursor(self) -> MySqlAnswers:
        return self

    def __enter__(self) -> MySqlAnswers:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def execute(self, sql: str) -> None:
        self.answer = self.answers.get(sql, sql)

    def fetchone(self) -> tuple[Any]:
        return (self.answer,)

    def fetchall(self) -> list[tuple[str]]:
        assert self.answer == "SHOW BINARY LOGS"
        return [(TAGGED_FILE.rsplit("/", 1)[1],)]


class ReplicationConfig:
    server_id = ServerIdRange(1, 1)

    def replication_settings(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(("checkpoint", "position"), [
    (f"{SERVER}:1-13:mytag:1-2", 4),  # before the tagged transaction: the stream starts at it
    (f"{SERVER}:1-13:MyTag:1-3", 541),  # after it: at the end of its commit
])
def test_failover_finds_the_checkpoint_by_tagged_gtids(monkeypatch: pytest.MonkeyPatch, checkpoint: str,
                                                       position: int) -> None:
    """A checkpoint taken on another server is found in the new server's binlog (the real MySQL 9.6 file, scanned
    by the reader's loop) by its tagged GTIDs; one with a tagged transaction the new server lacks is refused."""
    # anchor scans the binlog through a reader of the server's dump: the reader reads the file's events instead
    monkeypatch.setattr(binlog_reader, "BinlogDump", lambda _settings, _id, file, at, *_: TAGGED_BINLOG.open(file, at))
    server = ServerInfo("mysql", (9, 6, 0), "9.6.0")
    control = MySqlAnswers(f"{SERVER}:1-13:mytag:1-3", f"{SERVER}:1-13:mytag:1")
    old = BinlogOffset("binlog.000000", 1234, checkpoint, server="mysql server_uuid=another")  # numbered below
    config: Any = ReplicationConfig()
    anchored = anchor(control, server, config, 1, old)
    assert (anchored.file, anchored.position) == (TAGGED_FILE.rsplit("/", 1)[1], position)
    assert anchored.gtid == checkpoint and anchored.server == f"mysql server_uuid={SERVER}"
    with pytest.raises(ServerChangedError, match="lacks transactions the lake already has"):
        anchor(control, server, config, 1, replace(old, gtid=f"{SERVER}:1-13:mytag:1-4"))
