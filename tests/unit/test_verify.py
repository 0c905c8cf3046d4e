"""Verification's comparison, its report documents and its wait for the stream, without a server."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.verification.verify import (
    ChunkVerdict,
    KeyList,
    VerifyReport,
    VerifyStore,
    compare,
    run_name,
    summarize,
    wait_for_checkpoint,
)
from airflow_provider_mysqlcdc.exceptions import AsOfError, InvalidOptionError, ReplicaMismatchError, VerifyError
from airflow_provider_mysqlcdc.lake.handle import Lake

LINES = TableId("shop", "lines")
SCHEMA = TableSchema(LINES, (Column("order_id", "int", "int(11)", nullable=False),
                             Column("line", "int", "int(11)", nullable=False),
                             Column("amount", "decimal", "decimal(12,2)", precision=12, scale=2),
                             Column("note", "varchar", "varchar(20)", charset="utf8mb4",
                                    collation="utf8mb4_general_ci")),
                     ("order_id", "line"))


def table(*rows: tuple[object, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.column_names, r, strict=True)) for r in rows], arrow_schema(SCHEMA))


ROWS = [(1, 1, Decimal("1.50"), "a"), (1, 2, None, None), (2, 1, Decimal("0.00"), "c")]


def test_equal_sides_in_any_order_show_no_key() -> None:
    assert compare(SCHEMA, table(*ROWS), table(*reversed(ROWS))) == (KeyList(), KeyList(), KeyList())


def test_a_different_value_or_null_names_its_key_only() -> None:
    replica = table(ROWS[0], (1, 2, None, "x"), (2, 1, None, "c"))
    assert compare(SCHEMA, table(*ROWS), replica) == (KeyList(), KeyList(), KeyList(2, ((1, 2), (2, 1))))


def test_missing_extra_and_different_keys_together() -> None:
    replica = table((1, 1, Decimal("1.51"), "a"), ROWS[2], (3, 1, None, None))
    missing, extra, different = compare(SCHEMA, table(*ROWS), replica)
    assert (missing, extra, different) == (KeyList(1, ((1, 2),)), KeyList(1, ((3, 1),)), KeyList(1, ((1, 1),)))
    assert compare(SCHEMA, table(*ROWS), table(), max_keys=2)[0] == KeyList(3, ((1, 1), (1, 2)))


def test_the_report_round_trips_and_sums_its_chunks(tmp_path: Path) -> None:
    hw = BinlogOffset("mysql-bin.000002", 400)
    verdicts = (ChunkVerdict(Chunk(LINES, 0, None, 2), hw, 2, 2),
                ChunkVerdict(Chunk(LINES, 1, 2, None), hw, 1, 1, different=KeyList(1, ((2, 1),))))
    parts = [VerifyReport(LINES, "manual__2026-11-23T10:00:00+00:00", (v,), 1.5, (n,)) for n, v in enumerate(verdicts)]
    store = VerifyStore(Lake.at(str(tmp_path)))
    for part in parts:
        store.write_batch(part)
    assert store.read_batch(LINES, parts[0].run, 1) == parts[1]
    with pytest.raises(ReplicaMismatchError, match=r"1 chunks differ \(1\): 0 keys missing .* 1 with different"):
        summarize(Lake.at(str(tmp_path)), LINES, parts[0].run, [0, 1], fail_on_difference=True)
    report = summarize(Lake.at(str(tmp_path)), LINES, parts[0].run, [1, 0], fail_on_difference=False)
    assert report.rows == 3 and report.seconds == 3.0 and report.batches == (0, 1)
    assert VerifyReport.from_dict(store.lake.read_json(store.report_path(LINES, report.run))) == report
    assert store.report_path(LINES, report.run).endswith("shop/lines/verify/manual__2026-11-23T10_00_00_00_00.json")
    with pytest.raises(VerifyError, match=r"no report of batches \[2\]"):
        summarize(Lake.at(str(tmp_path)), LINES, parts[0].run, [0, 1, 2], fail_on_difference=False)
    with pytest.raises(InvalidOptionError):
        run_name("::")


def test_waiting_for_a_stream_that_does_not_run_says_so(tmp_path: Path) -> None:
    slept: list[float] = []
    with pytest.raises(AsOfError, match="the lake has no stream checkpoint: .* start the stream task"):
        wait_for_checkpoint(Lake.at(str(tmp_path)), LINES, BinlogOffset("mysql-bin.000001", 4), 0.0, sleep=slept.append)
