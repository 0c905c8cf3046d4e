"""The snapshot job's driver without Spark: a batch whose table changed while a task read it is read again
with the table's current columns (``read_job``), and the job's error reaches the operator as its own class
and message (``spark.job_error``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot import snapshot_batch
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError, SchemaChangeError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.documents.snapshot import ChunkResult, Plan, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.snapshot_commit import BatchCommitConflictError
from airflow_provider_mysqlcdc.spark.application import JobBatch, SparkApplication
from airflow_provider_mysqlcdc.spark.job_error import read_error, report_error
from airflow_provider_mysqlcdc.spark.snapshot_job import SCHEMA_CHANGE_ROUNDS, TaskFailure, read_job

ITEMS = TableId("shop", "items")
ID = Column("id", "int", "int(11)", nullable=False)
BEFORE = TableSchema(ITEMS, (ID, Column("n", "int", "int(11)")), ("id",))
AFTER = TableSchema(ITEMS, (ID, Column("n", "bigint", "bigint(20)")), ("id",))
CHUNKS = [Chunk(ITEMS, i, None if i == 0 else i * 10, None if i == 3 else (i + 1) * 10) for i in range(4)]


def application(tmp_path: Path) -> SparkApplication:
    """A job of two batches of two chunks each, read with ``BEFORE``."""
    batches = group_batches(ITEMS, CHUNKS, 2)
    plan = Plan(BEFORE, CHUNKS, batches)
    job = Job(tuple(batches), (20, 20))
    return SparkApplication("snapshot", Lake.at(str(tmp_path)), job, tuple(JobBatch(b, plan, BEFORE) for b in batches),
                            2, cast(ConnectionConfig, None))


def result(chunk: Chunk) -> ChunkResult:
    at = BinlogOffset("mysql-bin.000001", 100 + chunk.index)
    return ChunkResult(chunk, 10, 0, at, at, f"_batch=0/attempt-a-part-{chunk.index:05d}.parquet", 0.1)


class Reads:
    """A fake ``read``: each call's chunks as results, but a task of batch 1 stopped by a DDL in the first
    ``changes`` calls; records each call's schemas and chunks."""

    def __init__(self, changes: int) -> None:
        self.changes = changes
        self.calls: list[tuple[list[TableSchema], list[int]]] = []

    def __call__(self, app: SparkApplication, chunks: Sequence[Sequence[Chunk]]) -> list[ChunkResult | TaskFailure]:
        self.calls.append(([jb.schema for jb in app.batches], [c.index for cs in chunks for c in cs]))
        records: list[ChunkResult | TaskFailure] = [result(c) for cs in chunks for c in cs]
        if len(self.calls) <= self.changes:
            failed = app.batches[1].batch
            records = [r for r in records if not isinstance(r, ChunkResult) or r.chunk.index != 3]
            records.append(TaskFailure((failed,), SchemaChangeError(f"{ITEMS} changed while chunk 3 was read")))
        return records


@pytest.fixture()
def current_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source's columns now: ``AFTER`` (the batches' tables altered)."""
    monkeypatch.setattr(snapshot_batch, "batch_schemas",
                        lambda planned, config, lake: {p.id: AFTER for p in planned})


def test_a_batch_stopped_by_a_ddl_is_read_again_with_the_current_columns(tmp_path: Path,
                                                                           current_columns: None) -> None:
    reads = Reads(changes=1)
    app, records = read_job(application(tmp_path), reads)
    # the first read: every chunk; the second: batch 1's chunks alone, with the columns after the DDL
    assert reads.calls == [([BEFORE, BEFORE], [0, 1, 3, 2]), ([BEFORE, AFTER], [3, 2])]  # unbounded chunk first
    assert [jb.schema for jb in app.batches] == [BEFORE, AFTER]
    assert sorted(r.chunk.index for r in records) == [0, 1, 2, 3]  # batch 1's first reads are not kept


def test_a_table_that_keeps_changing_gives_up(tmp_path: Path, current_columns: None) -> None:
    with pytest.raises(SchemaChangeError, match=f"changed while they were read, {SCHEMA_CHANGE_ROUNDS} times"):
        read_job(application(tmp_path), Reads(changes=SCHEMA_CHANGE_ROUNDS))


def test_another_error_of_a_task_is_raised_as_it_is(tmp_path: Path) -> None:
    app = application(tmp_path)
    refused = TableNotSupportedError("table shop.items has no key")

    def read(app: SparkApplication, chunks: Sequence[Sequence[Chunk]]) -> list[ChunkResult | TaskFailure]:
        return [result(CHUNKS[0]), TaskFailure((app.batches[1].batch,), refused)]

    with pytest.raises(TableNotSupportedError) as raised:
        read_job(app, read)
    assert raised.value is refused


@pytest.mark.parametrize("error", [SchemaChangeError("items changed: re-snapshot"),
                                   BatchCommitConflictError("batch 1 lost 10 times"), MySqlCdcError("plain")])
def test_the_drivers_error_comes_back_as_its_class_and_message(tmp_path: Path, error: MySqlCdcError,
                                                               capsys: Any) -> None:
    path = str(tmp_path / "error.json")
    report_error("snapshot", path, error)
    back = read_error(path)
    assert type(back) is type(error) and str(back) == str(error)
    assert f"snapshot: {error}" in capsys.readouterr().err


def test_no_error_file_or_a_foreign_class(tmp_path: Path) -> None:
    assert read_error(str(tmp_path / "none.json")) is None
    (tmp_path / "os.json").write_text('{"module": "os", "class": "system", "message": "rm"}')
    back = read_error(str(tmp_path / "os.json"))
    assert type(back) is MySqlCdcError and str(back) == "system: rm"
    report_error("snapshot", str(tmp_path / "missing" / "error.json"), MySqlCdcError("elsewhere"))  # no raise
