"""The snapshot's documents and its Delta commits on a temporary local folder, no server.

Batches are written by the package's own ``snapshot_batch.write_chunks`` (its MySQL chunk reading
replaced by one that hands out given rows) and committed by ``snapshot_batch.commit_batch``, as the
Spark tasks and driver do; the lake is read back with ``deltalake`` directly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, cast

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkSnapshot
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot import snapshot_batch
from airflow_provider_mysqlcdc.exceptions import (
    LakeFormatError,
    NewerLakeFormatError,
    RetiredLakeFormatError,
    SchemaChangeError,
)
from airflow_provider_mysqlcdc.lake.documents.snapshot import (
    BatchManifest,
    ChunkResult,
    Plan,
    SnapshotStore,
    batch_read_with,
    group_batches,
)
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri

ORDERS = TableId("shop", "orders")
ID = Column("id", "int", "int(11)", nullable=False)
NAME = Column("name", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
NOTE = Column("note", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci")
SCHEMA = TableSchema(ORDERS, (ID, NAME), ("id",))
WITH_NOTE = TableSchema(ORDERS, (ID, NAME, NOTE), ("id",))


def hw(position: int) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", position)


def chunks(n: int, width: int = 100) -> list[Chunk]:
    """``n`` chunks of ``width`` keys: [None, 100), [100, 200), ..., [.., None)."""
    bounds = [None, *range(width, width * n, width), None]
    return [Chunk(ORDERS, i, bounds[i], bounds[i + 1]) for i in range(n)]


class Snapshots:
    """Plans, writes and commits batches of ``shop.orders`` under one base URI."""

    def __init__(self, base_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.base_uri = base_uri
        self.store = SnapshotStore(Lake.at(base_uri))
        self.monkeypatch = monkeypatch

    def plan(self, n_chunks: int, chunks_per_batch: int = 1) -> Plan:
        plan = Plan(SCHEMA, chunks(n_chunks), group_batches(ORDERS, chunks(n_chunks), chunks_per_batch))
        self.store.write_plan(plan)
        return plan

    def run_batch(self, plan: Plan, number: int, attempt: str, schema: TableSchema = SCHEMA,
                  tag: str = "", position: int = 1000) -> BatchManifest:
        """Write each chunk of batch ``number`` as its own part (as if a Spark task each), then commit."""
        batch = plan.batches[number]
        _give_rows(self.monkeypatch, schema, tag, position)
        results: list[ChunkResult] = []
        for part, chunk in enumerate(plan.chunks_of(batch)):
            results += snapshot_batch.write_chunks(self.store, batch, attempt, part, cast(ConnectionConfig, None),
                                                   schema, [chunk], server_id=1)
        return snapshot_batch.commit_batch(self.store, batch, attempt, schema, results, seconds=1.0)

    def table(self) -> DeltaTable:
        return DeltaTable(table_uri(self.base_uri, ORDERS))

    def rows(self) -> list[dict[str, Any]]:
        """The current table's rows without metadata columns, by id."""
        table = self.table().to_pyarrow_table()
        keep = [c for c in table.column_names if not c.startswith("_") or c == BATCH_COLUMN]
        return sorted(table.select(keep).to_pylist(), key=lambda r: r["id"])


def _give_rows(monkeypatch: pytest.MonkeyPatch, schema: TableSchema, tag: str, position: int) -> None:
    """The chunk reading of ``write_chunks`` replaced: no session, and chunk [s, e) holds keys s+1, s+2 (1, 2
    for the first), named by ``tag``."""

    class NoSession:
        def __init__(self, config: ConnectionConfig) -> None:
            pass

        def __enter__(self) -> NoSession:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    class GivenRows:
        def __init__(self, config: ConnectionConfig, table_schema: TableSchema, server_id: int, group_size: int,
                     session: NoSession) -> None:
            assert table_schema == schema

    def read_tables(session: NoSession, server_id: int,
                    tables: list[tuple[GivenRows, list[Chunk]]]) -> Iterator[tuple[int, ChunkSnapshot]]:
        for index, (_, to_read) in enumerate(tables):
            for chunk in to_read:
                first = chunk.start or 0
                values = [{"id": k, "name": f"{tag}{k}", "note": f"n{k}"} for k in (first + 1, first + 2)]
                table = pa.Table.from_pylist([{c: v[c] for c in schema.column_names} for v in values],
                                             arrow_schema(schema))
                offset = hw(position + chunk.index)
                yield index, ChunkSnapshot(chunk=chunk, low_watermark=hw(position - 1), high_watermark=offset,
                                           table=table, changed_keys=1)

    monkeypatch.setattr(snapshot_batch, "SourceSession", NoSession)
    monkeypatch.setattr(snapshot_batch, "ChunkReader", GivenRows)
    monkeypatch.setattr(snapshot_batch, "read_tables", read_tables)


@pytest.fixture()
def snapshots(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Snapshots:
    return Snapshots(str(tmp_path / "lake"), monkeypatch)


# -- the documents -------------------------------------------------------------------------------


def test_plan_and_manifest_round_trip(snapshots: Snapshots) -> None:
    plan = snapshots.plan(4, chunks_per_batch=2)
    assert snapshots.store.read_plan(ORDERS) == plan
    manifest = snapshots.run_batch(plan, 1, "a1")
    read = snapshots.store.read_manifest(plan.batches[1])
    assert read == manifest and manifest.to_dict()["format_version"] == BatchManifest.FORMAT.version == 1
    assert [c.chunk for c in read.chunks] == plan.chunks_of(plan.batches[1])
    assert read.rows == 4 and read.changed_keys == 2 and read.high_watermark == hw(1003)
    assert read.files == ["_batch=1/attempt-a1-part-00000.parquet", "_batch=1/attempt-a1-part-00001.parquet"]
    assert snapshots.store.manifests(plan) == [None, manifest]
    assert snapshots.store.pending_batches(plan) == [plan.batches[0]]
    # the XCom form is plain JSON with what the example DAG's summary reads
    xcom = json.loads(json.dumps(manifest.to_dict()))
    assert (xcom["rows"], xcom["bytes"], len(xcom["chunks"])) == (4, manifest.bytes, 2)
    assert xcom["chunks"][0]["high_watermark"] == hw(1002).to_dict()
    assert BatchManifest.from_dict(xcom) == manifest


@pytest.mark.parametrize(("version", "error", "message"), [
    (None, RetiredLakeFormatError, r"has no format_version \(format 0\): the snapshot layout from before the "
                                   r"current-state Delta table.*delete its folder"),
    (0, RetiredLakeFormatError, r"has format_version 0: the snapshot layout from before.*delete its folder"),
    (2, NewerLakeFormatError, r"has format_version 2, written by a newer version.*reads formats 1 to 1\. "
                              r"Upgrade airflow-provider-mysqlcdc"),
    ("1", LakeFormatError, r"has format_version '1', not a format .* restore it from a copy"),
])
def test_unknown_format_versions_are_refused(snapshots: Snapshots, version: Any, error: type[LakeFormatError],
                                             message: str) -> None:
    plan = snapshots.plan(2)
    snapshots.run_batch(plan, 0, "a1")
    lake, first = snapshots.store.lake, plan.batches[0]
    path = lake.table(first.table).manifest(first.number)
    for document_path, read in [(path, lambda: snapshots.store.read_manifest(plan.batches[0])),
                                (path.split("/batch=")[0] + "/_plan.json", lambda: snapshots.store.read_plan(ORDERS))]:
        document = lake.read_json(document_path)
        if version is None:
            del document["format_version"]
        else:
            document["format_version"] = version
        lake.write_json(document_path, document)
        with pytest.raises(error, match=message) as raised:
            read()
        assert document_path in str(raised.value)


def test_batch_read_with_picks_by_high_watermark(snapshots: Snapshots) -> None:
    plan = snapshots.plan(2)
    early = snapshots.run_batch(plan, 0, "a1", position=100)
    late = snapshots.run_batch(plan, 1, "a1", schema=WITH_NOTE, position=500)
    assert batch_read_with([late, early], plan, latest=False) == SCHEMA
    assert batch_read_with([early, late], plan, latest=True) == WITH_NOTE
    assert batch_read_with([], plan, latest=True) == plan.schema


# -- the Delta commits -----------------------------------------------------------------------------


def test_a_second_attempt_replaces_exactly_its_batch(snapshots: Snapshots) -> None:
    plan = snapshots.plan(3)
    for number in range(3):
        snapshots.run_batch(plan, number, "first", tag="a")
    again = snapshots.run_batch(plan, 1, "second", tag="b")
    rows = snapshots.rows()
    assert [(r["id"], r["name"], r[BATCH_COLUMN]) for r in rows] == [
        (1, "a1", 0), (2, "a2", 0), (101, "b101", 1), (102, "b102", 1), (201, "a201", 2), (202, "a202", 2)]
    table = snapshots.table()
    assert again.delta_version == table.version() == 3  # 0 created the table with batch 0's files
    files = sorted(table.file_uris())
    assert [f.rsplit("/", 2)[-2:] for f in files] == [
        ["_batch=0", "attempt-first-part-00000.parquet"], ["_batch=1", "attempt-second-part-00000.parquet"],
        ["_batch=2", "attempt-first-part-00000.parquet"]]
    # the first attempt's file stays for readers of older versions (until a vacuum)
    old = DeltaTable(table_uri(snapshots.base_uri, ORDERS), version=2).to_pyarrow_table()
    assert sorted(old.column("name").to_pylist()) == ["a1", "a101", "a102", "a2", "a201", "a202"]
    last = table.history(1)[0]
    assert (last["mysql_cdc.batch"], last["mysql_cdc.attempt"]) == ("1", "second")


def test_files_carry_statistics(snapshots: Snapshots) -> None:
    plan = snapshots.plan(2, chunks_per_batch=2)
    snapshots.run_batch(plan, 0, "a1")
    adds = pa.table(snapshots.table().get_add_actions(flatten=True)).to_pylist()
    first = next(a for a in adds if a["path"].endswith("part-00000.parquet"))
    assert first["num_records"] == 2
    assert (first["min.id"], first["max.id"], first["null_count.id"]) == (1, 2, 0)
    assert (first["min._binlog_pos"], first["max._binlog_pos"]) == (1000, 1000)
    assert (first["min.name"], first["max.name"]) == ("1", "2")


def test_concurrent_commits_of_different_batches_all_land(snapshots: Snapshots) -> None:
    plan = snapshots.plan(8)
    errors: list[BaseException] = []
    # the chunk reader is patched once for all threads (monkeypatch is not thread-safe)
    _give_rows(snapshots.monkeypatch, SCHEMA, "", 1000)

    def run(number: int) -> None:
        batch = plan.batches[number]
        try:
            results = list(snapshot_batch.write_chunks(snapshots.store, batch, "t", 0, cast(ConnectionConfig, None),
                                                       SCHEMA, plan.chunks_of(batch), server_id=1))
            snapshot_batch.commit_batch(snapshots.store, batch, "t", SCHEMA, results, seconds=1.0)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert len(snapshots.rows()) == 16 and {r[BATCH_COLUMN] for r in snapshots.rows()} == set(range(8))
    versions = sorted(m.delta_version for m in snapshots.store.manifests(plan) if m is not None)
    assert len(versions) == 8 and len(set(versions)) == 8


def test_a_column_added_between_batches(snapshots: Snapshots) -> None:
    plan = snapshots.plan(3)
    snapshots.run_batch(plan, 0, "a1", schema=SCHEMA)
    snapshots.run_batch(plan, 1, "a1", schema=WITH_NOTE)
    snapshots.run_batch(plan, 2, "a1", schema=SCHEMA)  # read before the ALTER, committed after it
    assert [f.name for f in snapshots.table().schema().fields] == ["id", "name", *_metadata(), BATCH_COLUMN, "note"]
    assert [(r["id"], r["note"]) for r in snapshots.rows()] == [
        (1, None), (2, None), (101, "n101"), (102, "n102"), (201, None), (202, None)]


@pytest.mark.parametrize("order", ["widened after", "widened before"])
def test_a_type_widened_between_batches_takes_the_wider_type(snapshots: Snapshots, order: str) -> None:
    """INT -> BIGINT between the reads of two batches: whichever commits first, the table ends with BIGINT
    for every batch (the batches before rewritten, or the later batch's files)."""
    plan = snapshots.plan(3)
    wider = TableSchema(ORDERS, (Column("id", "bigint", "bigint(20)", nullable=False), NAME), ("id",))
    first, second = (SCHEMA, wider) if order == "widened after" else (wider, SCHEMA)
    snapshots.run_batch(plan, 0, "a1", schema=first)
    snapshots.run_batch(plan, 1, "a1", schema=second)
    snapshots.run_batch(plan, 2, "a1", schema=wider)
    assert str(snapshots.table().schema().fields[0].type) == 'PrimitiveType("long")'
    assert [r["id"] for r in snapshots.rows()] == [1, 2, 101, 102, 201, 202]
    manifests = [snapshots.store.read_manifest(b) for b in plan.batches]
    assert all(m is not None for m in manifests)


def test_a_type_converted_between_batches_needs_a_new_snapshot(snapshots: Snapshots) -> None:
    plan = snapshots.plan(2)
    snapshots.run_batch(plan, 0, "a1")
    real = TableSchema(ORDERS, (Column("id", "double", "double", nullable=False), NAME), ("id",))
    expected = r"\(id int32 -> double\), and no type holds.*delete its folder .*/lake/shop/orders and run"
    with pytest.raises(SchemaChangeError, match=expected):
        snapshots.run_batch(plan, 1, "a1", schema=real)
    assert snapshots.store.read_manifest(plan.batches[1]) is None
    assert len(snapshots.rows()) == 2


def _metadata() -> list[str]:
    from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS

    return [f.name for f in METADATA_FIELDS]
