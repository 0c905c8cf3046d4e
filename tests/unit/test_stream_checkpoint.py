"""The stream checkpoint of format 4 on a local lake, no server: schemas as documents named by content,
the upgrade of a format-3 checkpoint (and a torn upgrade), a newer one refused, one batch's Delta
commits made at once with the checkpoint only after all of them, and the MERGE's tables to open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
from airflow_provider_mysqlcdc.exceptions import LakeFormatError, LakeLeaseError, NewerLakeFormatError
from airflow_provider_mysqlcdc.lake.changelog import changes_table
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable
from airflow_provider_mysqlcdc.lake.documents.schema_documents import schema_ref
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_APP_ID
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

ID = Column("id", "int", "int(11)", nullable=False)
NAME = Column("name", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")


def schema(table: str, width: int = 1) -> TableSchema:
    extra = tuple(Column(f"c{i}", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
                  for i in range(width))
    return TableSchema(TableId.parse(table), (ID, NAME, *extra), ("id",))


def off(pos: int) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", pos)


def inserts(s: TableSchema, seq: int, count: int = 2) -> list[Any]:
    values = [None] * (len(s.columns) - 2)
    return [changes_table([ChangeRecord(ChangeKind.INSERT, s.id, (seq * 100 + k, f"n{k}", *values), off(seq * 100 + k),
                                        1_000) for k in range(count)], s)]


def documents(lake: Lake) -> list[str]:
    folder = Path(lake.root) / "_stream" / "schemas"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_schemas_are_documents_named_by_content_and_written_once(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    store = StreamStore(lake)
    orders, tags, old = schema("shop.orders"), schema("shop.tags", 3), schema("shop.old")
    checkpoint = Checkpoint(0, off(4), {orders.id: orders, tags.id: tags},
                            stopped={old.id: StoppedTable(old, off(4), [])}, kept={tags.id: orders})
    store.commit(checkpoint, {})
    document = lake.read_json(lake.checkpoint)
    assert document["format_version"] == 4
    assert document["schemas"] == {"shop.orders": schema_ref(orders), "shop.tags": schema_ref(tags)}
    assert document["stopped"]["shop.old"]["schema"] == schema_ref(old)
    assert document["kept"]["shop.tags"] == schema_ref(orders)
    assert documents(lake) == sorted(f"{schema_ref(s)}.json" for s in (orders, tags, old))
    assert (document["touched"], document["merged_seq"]) == ({}, None)

    read = StreamStore(lake).read_checkpoint()  # a new reader reads the documents
    assert read is not None
    assert (read.schemas, read.stopped, read.kept) == (checkpoint.schemas, checkpoint.stopped, checkpoint.kept)

    # a batch of one table: its rows, the checkpoint naming the same documents, none written again
    written = {n: (Path(lake.root) / "_stream" / "schemas" / n).stat().st_mtime_ns for n in documents(lake)}
    checkpoint.advance(1, off(200))
    store.commit(checkpoint, {orders.id: inserts(orders, 1)})
    assert {n: (Path(lake.root) / "_stream" / "schemas" / n).stat().st_mtime_ns for n in documents(lake)} == written
    assert lake.read_json(lake.checkpoint)["touched"] == {"shop.orders": 1}

    # a changed schema is a new document; the older one stays (an older checkpoint may name it)
    wider = schema("shop.orders", 2)
    checkpoint.schemas = {**checkpoint.schemas, orders.id: wider}
    checkpoint.advance(2, off(300))
    store.commit(checkpoint, {})
    assert f"{schema_ref(wider)}.json" in documents(lake) and f"{schema_ref(orders)}.json" in documents(lake)
    assert StreamStore(lake).read_checkpoint().schemas[orders.id] == wider  # type: ignore[union-attr]


def test_the_checkpoint_does_not_grow_with_the_schemas_of_untouched_tables(tmp_path: Path) -> None:
    sizes = []
    for width in (1, 40):
        lake = Lake.at(str(tmp_path / f"lake-{width}"))
        tables = {s.id: s for s in (schema(f"many.t{i:03d}", width) for i in range(60))}
        checkpoint = Checkpoint(0, off(4), tables)
        store = StreamStore(lake)
        store.commit(checkpoint, {})
        first = next(iter(tables.values()))
        checkpoint.advance(1, off(200))
        store.commit(checkpoint, {first.id: inserts(first, 1)})
        sizes.append(len(json.dumps(lake.read_json(lake.checkpoint))))
    assert sizes[0] == sizes[1]  # 60 tables of 3 columns or of 42: the same checkpoint


def format_3(s: TableSchema) -> dict[str, Any]:
    """A checkpoint as format 3 wrote it: every schema in it."""
    return {"format_version": 3, "seq": 5, "offset": off(500).to_dict(), "schemas": {str(s.id): s.to_dict()},
            "chunks": {}, "updated_at": "2026-11-24T10:00:00+00:00",
            "stopped": {"shop.old": {"schema": schema("shop.old").to_dict(), "offset": off(300).to_dict(),
                                     "chunks": [], "ddl": "DROP TABLE old"}},
            "visible_seq": 5, "visible_offset": off(500).to_dict(), "history_from": {}, "kept": {}}


def test_a_format_3_checkpoint_is_read_and_written_as_format_4(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    orders = schema("shop.orders")
    lake.write_json(lake.checkpoint, format_3(orders))
    store = StreamStore(lake)
    read = store.read_checkpoint()
    assert read is not None
    old = TableId.parse("shop.old")
    assert (read.seq, read.schemas, read.stopped[old].schema) == (5, {orders.id: orders}, schema("shop.old"))
    # not known: every table taken as written by the last batch, and the first MERGE looks at every table
    assert (read.touched, read.merged_seq) == ({orders.id: 5, old: 5}, None)
    assert [read.wrote_after(t, s) for t in (orders.id, old) for s in (4, 5)] == [True, False, True, False]
    assert StateMerger.due(read) == [orders.id, old]

    read.advance(6, off(600))
    store.commit(read, {orders.id: inserts(orders, 6)})
    document = lake.read_json(lake.checkpoint)
    assert document["format_version"] == 4 and document["schemas"] == {"shop.orders": schema_ref(orders)}
    again = StreamStore(lake).read_checkpoint()
    assert again is not None and (again.seq, again.schemas, again.touched) == (
        6, {orders.id: orders}, {orders.id: 6, old: 5})


def test_an_upgrade_torn_before_its_checkpoint_keeps_the_format_3_checkpoint(tmp_path: Path) -> None:
    """The schema documents are written before the checkpoint that names them: a writer stopped between
    them (here its lease lost) leaves the format-3 checkpoint, readable as before."""
    lake = Lake.at(str(tmp_path / "lake"))
    orders = schema("shop.orders")
    lake.write_json(lake.checkpoint, format_3(orders))
    before = lake.read_json(lake.checkpoint)
    fenced = {"calls": 0}

    def fence() -> None:
        fenced["calls"] += 1
        if fenced["calls"] == 2:  # the check before the checkpoint, after the Delta commits and documents
            raise LakeLeaseError("taken over")

    store = StreamStore(lake, fence=fence)
    checkpoint = store.read_checkpoint()
    assert checkpoint is not None
    checkpoint.advance(6, off(600))
    with pytest.raises(LakeLeaseError):
        store.commit(checkpoint, {orders.id: inserts(orders, 6)})
    assert documents(lake)  # written first
    assert lake.read_json(lake.checkpoint) == before
    assert StreamStore(lake).read_checkpoint().schemas == {orders.id: orders}  # type: ignore[union-attr]


def test_a_newer_checkpoint_or_a_missing_schema_document_is_refused(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    orders = schema("shop.orders")
    StreamStore(lake).commit(Checkpoint(0, off(4), {orders.id: orders}), {})
    document = lake.read_json(lake.checkpoint)
    lake.write_json(lake.checkpoint, {**document, "format_version": 5})
    with pytest.raises(NewerLakeFormatError, match=r"format_version 5, written by a newer version.*reads formats "
                                                   r"2 to 4"):
        StreamStore(lake).read_checkpoint()

    missing = {**document, "schemas": {"shop.orders": "0" * 32}}
    lake.write_json(lake.checkpoint, missing)
    with pytest.raises(LakeFormatError, match=r"names the table schema 0{32}, but .*0{32}\.json is missing"):
        StreamStore(lake).read_checkpoint()
    with pytest.raises(LakeFormatError, match=r"names its schemas by their documents"):
        Checkpoint.from_dict(missing)


def test_one_failed_commit_fails_the_batch_and_its_retry_commits_only_the_rest(tmp_path: Path) -> None:
    """The tables' commits of a batch run at once: one that fails (its changelog's place taken by a file)
    fails the batch before its checkpoint; the retry skips the tables committed and commits the rest."""
    lake = Lake.at(str(tmp_path / "lake"))
    tables = [schema(f"many.t{i:02d}") for i in range(12)]
    store = StreamStore(lake, threads=4)
    checkpoint = Checkpoint(0, off(4), {s.id: s for s in tables})
    store.commit(checkpoint, {})
    blocked = tables[5]
    place = Path(lake.table(blocked.id).changelog.uri)
    place.parent.mkdir(parents=True)
    place.write_text("not a Delta table")

    checkpoint.advance(1, off(200))
    changes = {s.id: inserts(s, 1) for s in tables}
    with pytest.raises(Exception):  # noqa: B017 (delta-rs's error for a path it cannot create)
        store.commit(checkpoint, changes)
    assert StreamStore(lake).read_checkpoint().seq == 0  # type: ignore[union-attr]
    committed = {s.id: DeltaTable(lake.table(s.id).changelog.uri).version() for s in tables if s is not blocked}
    assert all(DeltaTable(lake.table(t).changelog.uri).transaction_version(STREAM_APP_ID) == 1 for t in committed)

    place.unlink()
    store.commit(checkpoint, changes)
    assert {t: DeltaTable(lake.table(t).changelog.uri).version() for t in committed} == committed  # skipped
    assert StreamStore(lake).read_checkpoint().seq == 1  # type: ignore[union-attr]
    for s in tables:
        assert read_changes(lake.base_uri, str(s.id)).column("id").to_pylist() == [100, 101], s.id


def test_the_merge_opens_only_tables_with_changes_since_it_last_merged_each_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    tables = [schema(f"many.t{i:02d}") for i in range(6)]
    store = StreamStore(lake)
    checkpoint = Checkpoint(0, off(4), {s.id: s for s in tables})
    store.commit(checkpoint, {})
    checkpoint.advance(1, off(200))
    store.commit(checkpoint, {s.id: inserts(s, 1) for s in tables})
    merger = StateMerger(lake, control=None)  # integer keys need no server for their order
    assert merger.merge(checkpoint) == {s.id: 2 for s in tables}
    assert checkpoint.merged_seq == 1
    versions = {s.id: DeltaTable(lake.table(s.id).current.uri).version() for s in tables}

    opened: list[str] = []
    real_open = type(lake.table(tables[0].id).current).open

    def recording_open(location: Any, from_log: bool = False) -> Any:
        opened.append(location.uri)
        return real_open(location, from_log)

    monkeypatch.setattr(type(lake.table(tables[0].id).current), "open", recording_open)
    checkpoint.advance(2, off(300))
    store.commit(checkpoint, {tables[2].id: inserts(tables[2], 2)})
    opened.clear()
    assert merger.merge(checkpoint) == {tables[2].id: 2}
    places = lake.table(tables[2].id)  # its two tables, each opened once (the current state's log loaded once)
    assert sorted(opened) == sorted([places.current.uri, places.changelog.uri]), opened
    assert {s.id: DeltaTable(lake.table(s.id).current.uri).version() for s in tables} == {
        **versions, tables[2].id: versions[tables[2].id] + 1}

    # read back as another run would: the checkpoint carries what was merged up to its write
    checkpoint.advance(3, off(400))
    store.commit(checkpoint, {})
    again = StreamStore(lake).read_checkpoint()
    assert again is not None and again.merged_seq == 2 and StateMerger.due(again) == []


def test_a_shared_read_makes_the_checkpoint_again_only_when_its_document_changed(tmp_path: Path) -> None:
    """Readers that do not change it (the asset watcher polls it for each table it watches) share one
    checkpoint object while the document stays the same; a commit gives them the new one."""
    lake = Lake.at(str(tmp_path / "lake"))
    orders = schema("shop.orders")
    checkpoint = Checkpoint(0, off(4), {orders.id: orders})
    StreamStore(lake).commit(checkpoint, {})

    first = StreamStore(lake).read_checkpoint(shared=True)
    assert first is not None and StreamStore(lake).read_checkpoint(shared=True) is first
    own = StreamStore(lake).read_checkpoint()
    assert own is not first and own == first  # a writer's read is its own to change

    checkpoint.advance(1, off(200))
    StreamStore(lake).commit(checkpoint, {orders.id: inserts(orders, 1)})
    after = StreamStore(lake).read_checkpoint(shared=True)
    assert after is not None and after is not first and (after.seq, after.touched) == (1, {orders.id: 1})


def test_a_recent_shared_read_serves_a_poll_unread_and_never_goes_back_a_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The asset watchers of one lake take a checkpoint read within ``max_age`` without reading the document
    again (a GET each on an object store); a read of an older document, finishing after a newer one was
    shared, is its caller's alone."""
    lake = Lake.at(str(tmp_path / "lake"))
    orders = schema("shop.orders")
    checkpoint = Checkpoint(0, off(4), {orders.id: orders})
    StreamStore(lake).commit(checkpoint, {})
    older = lake.read_json(lake.checkpoint)
    reads: list[str] = []
    read_json = Lake.read_json
    monkeypatch.setattr(Lake, "read_json", lambda self, path: reads.append(path) or read_json(self, path))

    first = StreamStore(lake).read_checkpoint(shared=True, max_age=60)
    checkpoint.advance(1, off(200))
    StreamStore(lake).commit(checkpoint, {orders.id: inserts(orders, 1)})
    reads.clear()
    assert StreamStore(lake).read_checkpoint(shared=True, max_age=60) is first and reads == []
    newer = StreamStore(lake).read_checkpoint(shared=True)  # max_age 0: read
    assert newer is not None and newer.seq == 1 and len(reads) == 1

    lake.write_json(lake.checkpoint, older)  # as a slow read of the older document would have returned it
    late = StreamStore(lake).read_checkpoint(shared=True)
    assert late is not None and late.seq == 0
    assert StreamStore(lake).read_checkpoint(shared=True, max_age=60) is newer
