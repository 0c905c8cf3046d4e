"""The lake documents' codec (``lake.documents.versions``): earlier versions upgraded step by step, the current one
written, newer and retired ones refused by name; and each document kind's own steps, fed documents in the
shapes earlier commits wrote (taken from each commit's ``to_dict``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk, FinishedChunkInfo
from airflow_provider_mysqlcdc.engine.verification.verify import ChunkVerdict, KeyList, VerifyReport
from airflow_provider_mysqlcdc.exceptions import LakeFormatError, NewerLakeFormatError, RetiredLakeFormatError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, BatchManifest, ChunkResult, Plan
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.write.lease import Lease

ORDERS, OLD = TableId("shop", "orders"), TableId("shop", "old")
SCHEMA = TableSchema(ORDERS, (Column("id", "int", "int(11)", nullable=False),), ("id",))


def off(position: int) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", position, "0-1-7", "mariadb")


# -- the codec ---------------------------------------------------------------------------------------


def _step(tag: str) -> Any:
    return lambda d: {**d, "steps": [*d.get("steps", []), tag]}


TOY = DocumentFormat("toy", version=3, oldest=1, upgrades={1: _step("1->2"), 2: _step("2->3")}, unversioned=1,
                     retired={0: "made of cardboard: throw it away"})


def test_a_document_is_written_with_the_current_version_and_read_back_without_it() -> None:
    assert TOY.write({"a": 1}) == {"format_version": 3, "a": 1}
    assert TOY.read(TOY.write({"a": 1})) == {"a": 1}


@pytest.mark.parametrize(("document", "steps"), [
    ({"format_version": 2, "a": 1}, ["2->3"]),
    ({"format_version": 1, "a": 1}, ["1->2", "2->3"]),
    ({"a": 1}, ["1->2", "2->3"]),  # unversioned: version 1
])
def test_an_earlier_version_is_upgraded_one_step_at_a_time_in_order(document: dict[str, Any], steps: list[str]) -> None:
    assert TOY.read(document) == {"a": 1, "steps": steps}


def test_a_newer_version_is_refused_naming_both_versions_and_what_to_do() -> None:
    with pytest.raises(NewerLakeFormatError) as error:
        TOY.read({"format_version": 4}, "/lake/x.json")
    assert str(error.value).startswith("the toy /lake/x.json has format_version 4, written by a newer version of "
                                       "airflow-provider-mysqlcdc; this one reads formats 1 to 3. Upgrade "
                                       "airflow-provider-mysqlcdc wherever the lake is written or read")


def test_a_retired_version_is_refused_with_its_reason() -> None:
    with pytest.raises(RetiredLakeFormatError, match="the toy has format_version 0: made of cardboard: throw it away"):
        TOY.read({"format_version": 0})


@pytest.mark.parametrize("version", [-1, "2", 2.0, True, None, [2]])
def test_a_version_no_release_writes_is_refused(version: Any) -> None:
    with pytest.raises(LakeFormatError, match=r"has format_version .*, not a format this or any version"):
        TOY.read({"format_version": version})


def test_a_document_that_is_no_json_object_is_refused() -> None:
    with pytest.raises(LakeFormatError, match="the toy x is not a JSON object but list"):
        TOY.read([1], "x")


def test_a_document_without_a_version_is_refused_where_every_version_had_one() -> None:
    strict = DocumentFormat("report", version=1, oldest=1)
    with pytest.raises(LakeFormatError, match="has format_version None, not a format"):
        strict.read({"a": 1})


def test_a_format_needs_a_step_from_every_version_it_reads() -> None:
    with pytest.raises(ValueError, match=r"one upgrade step from each version 1\.\.2, it has steps from \[1\]"):
        DocumentFormat("gappy", version=3, oldest=1, upgrades={1: _step("1->2")})
    with pytest.raises(ValueError, match="retires versions it reads"):
        DocumentFormat("muddled", version=2, oldest=1, upgrades={1: _step("1->2")}, retired={1: "?"})


# -- every document kind writes its current version and reads it back ------------------------------------


def test_every_document_round_trips_through_its_format() -> None:
    chunk = Chunk(ORDERS, 0, None, None)
    plan = Plan(SCHEMA, [chunk], [Batch(ORDERS, 0, 0, 0)])
    manifest = BatchManifest(Batch(ORDERS, 0, 0, 0), "a1", SCHEMA,
                             (ChunkResult(chunk, 3, 1, off(100), off(200), "_batch=0/a.parquet", 0.5),), 10, 1.0, 4)
    checkpoint = Checkpoint(5, off(300), {ORDERS: SCHEMA}, {ORDERS: [FinishedChunkInfo(None, None, off(200))]},
                            "2026-11-24T00:00:00+00:00", {OLD: StoppedTable(SCHEMA, off(250), [], "DROP TABLE old")},
                            4, off(280), {ORDERS: off(150)}, {ORDERS: SCHEMA})
    lease = Lease("dag/run/task", 3, 1.5, 12)
    report = VerifyReport(ORDERS, "r1", (ChunkVerdict(chunk, off(200), 3, 2, KeyList(1, ((7,),))),), 2.0, (0,))
    for document, kind in [(plan, Plan), (manifest, BatchManifest), (checkpoint, Checkpoint), (lease, Lease),
                           (report, VerifyReport)]:
        written = document.to_dict()
        assert written["format_version"] == kind.FORMAT.version, kind
        assert kind.from_dict(written) == document, kind


# -- the checkpoint's format 2, as each commit that changed it wrote it ------------------------------------


WITH_DDL = ("05122bd", "8756d12", "a517b08", "f60e00f")
WITH_VISIBLE = ("8756d12", "a517b08", "f60e00f")


def _checkpoint_2(era: str) -> dict[str, Any]:
    """A checkpoint of format 2 as written at ``era`` (the commit that last changed its shape)."""
    hw, stopped_hw = off(200).to_dict(), off(250).to_dict()
    chunk: Any = [None, 10, hw] if era == "69d7b38" else {"s": None, "e": 10, "hw": hw}
    stopped: dict[str, Any] = {"format_version": 2, "schema": SCHEMA.to_dict(), "offset": stopped_hw,
                               "chunks": [[None, None, stopped_hw]] if era == "69d7b38" else
                               [{"s": None, "e": None, "hw": stopped_hw}]}
    document: dict[str, Any] = {"format_version": 2, "seq": 5, "offset": off(300).to_dict(),
                                "schemas": {"shop.orders": SCHEMA.to_dict()}, "chunks": {"shop.orders": [chunk]},
                                "updated_at": "2026-11-23T15:00:00+00:00", "stopped": {"shop.old": stopped}}
    if era in WITH_DDL:
        stopped["ddl"] = "DROP TABLE old"
    if era in WITH_VISIBLE:
        document |= {"visible_seq": 4, "visible_offset": off(280).to_dict()}
    if era in ("a517b08", "f60e00f"):
        document["history_from"] = {"shop.orders": off(150).to_dict()}
    if era == "f60e00f":
        document["kept"] = {"shop.orders": SCHEMA.to_dict()}
    return document


@pytest.mark.parametrize("era", ["69d7b38", "362b35d", "05122bd", "8756d12", "a517b08", "f60e00f"])
def test_a_checkpoint_of_format_2_from_any_commit_is_read(era: str) -> None:
    read = Checkpoint.from_dict(_checkpoint_2(era))
    assert (read.seq, read.offset, read.schemas) == (5, off(300), {ORDERS: SCHEMA})
    assert read.chunks == {ORDERS: [FinishedChunkInfo(None, 10, off(200))]}
    assert read.stopped == {OLD: StoppedTable(SCHEMA, off(250), [FinishedChunkInfo(None, None, off(250))],
                                              "DROP TABLE old" if era in WITH_DDL else "")}
    # before visible_seq, a checkpoint was visible up to its own batch
    assert read.visible == ((4, off(280)) if era in WITH_VISIBLE else (5, off(300)))
    assert read.history_from == ({ORDERS: off(150)} if era in ("a517b08", "f60e00f") else {})
    assert read.kept == ({ORDERS: SCHEMA} if era == "f60e00f" else {})
    # and it is written back in the current format
    assert read.to_dict()["format_version"] == Checkpoint.FORMAT.version
    assert Checkpoint.from_dict(read.to_dict()) == read


def test_a_lease_from_before_it_was_versioned_is_read() -> None:
    assert Lease.from_dict({"holder": "a", "token": 2, "expires_at": 9.0}) == Lease("a", 2, 9.0, None)


def test_a_lease_of_format_1_says_nothing_of_a_clean_exit() -> None:
    document = {"format_version": 1, "holder": "a", "token": 2, "expires_at": 9.0}
    assert Lease.from_dict(document) == Lease("a", 2, 9.0, None)


def test_a_column_written_with_a_field_since_removed_reads_without_it() -> None:
    """Plans of versions before ``is_json`` was removed hold it in every column; a column of today's shape is
    read as written, and both round-trip through ``to_dict``."""
    today = Column("doc", "longtext", "longtext", members=("a",))
    assert Column.from_dict({**today.to_dict(), "is_json": True}) == today
    assert Column.from_dict(today.to_dict()) == today
