"""Reading the replica as of a source position, on a temporary lake written with the real writers.

The snapshot batches commit with their manifests (their high watermarks bound what is covered), the
stream batches go through ``StreamStore.commit``, and the MERGE through ``merge_changes``: a read as of
a position must give the same rows before and after the changes are merged into the current table.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.offset.as_of import AsOf
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.exceptions import AsOfError, InvalidOptionError
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.documents.checkpoint import StoppedTable
from airflow_provider_mysqlcdc.lake.format import delta_table
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.as_of_read import History
from airflow_provider_mysqlcdc.lake.read.replica import read_table, scan_table
from tests.as_of_history import CHUNKS, EXPECTED, SNAPSHOT, merge, snapshot, stream
from tests.lakes import ORDERS, SCHEMA, Lakes, insert, off, rows_of, transaction


@pytest.mark.parametrize("merged", [0, 1, 2])
def test_as_of_reads_are_the_states_at_each_position_whatever_was_merged(lake: Lakes, merged: int) -> None:
    snapshot(lake)
    stream(lake)
    if merged:
        merge(lake, merged)
    for point, expected in EXPECTED:
        assert rows_of(read_table(lake.base_uri, "shop.orders", as_of=point)) == expected, point
    # the latest position is read_table's current state
    assert rows_of(read_table(lake.base_uri, "shop.orders")) == EXPECTED[6][1]


def test_one_history_serves_many_positions_and_a_batch_partition(lake: Lakes) -> None:
    snapshot(lake)
    stream(lake)
    merge(lake, 2)
    history = History.load(Lake.at(lake.base_uri), "shop.orders", batch=1)  # keys >= 10 from the current table
    in_batch = history.rows.filter(pa.compute.greater_equal(history.rows.column("id"), 10))
    assert rows_of(history.at(off(1, 400), in_batch)) == [(10, "j", 10), (11, "k", 11)]
    assert rows_of(history.at(off(1, 600), in_batch)) == [(11, "k", 11)]


def test_positions_outside_the_lake_are_refused_with_the_covered_range(lake: Lakes) -> None:
    snapshot(lake)
    stream(lake)
    with pytest.raises(AsOfError, match=r"from mysql-bin.000001:200 .* to mysql-bin.000001:600 .*before the snapshot"):
        read_table(lake.base_uri, "shop.orders", as_of="mysql-bin.000001:150")
    with pytest.raises(AsOfError, match="has not committed that far"):
        read_table(lake.base_uri, "shop.orders", as_of=off(1, 601))
    with pytest.raises(AsOfError, match="may not have read past"):
        read_table(lake.base_uri, "shop.orders", as_of=9_500)  # no change after it: not known to be complete
    with pytest.raises(AsOfError, match="before shop.orders's snapshot finished"):
        read_table(lake.base_uri, "shop.orders", as_of=4_000)  # before every change, and long before the snapshot
    with pytest.raises(AsOfError, match="resolve_as_of"):
        read_table(lake.base_uri, "shop.orders", as_of="0-1-100")


def test_a_stopped_table_is_covered_up_to_where_it_stopped(lake: Lakes) -> None:
    snapshot(lake)
    stream(lake)
    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None
    checkpoint.stopped = {ORDERS: StoppedTable(SCHEMA, off(1, 600), [])}
    checkpoint.schemas = {}
    checkpoint.offset = off(1, 900)
    lake.stream.lake.write_json(lake.stream.checkpoint_path, checkpoint.to_dict())
    assert rows_of(read_table(lake.base_uri, "shop.orders", as_of=off(1, 600))) == EXPECTED[6][1]
    with pytest.raises(AsOfError, match="to mysql-bin.000001:600"):
        read_table(lake.base_uri, "shop.orders", as_of=off(1, 700))


def test_tables_without_a_finished_snapshot_or_stream_are_refused(lake: Lakes) -> None:
    lake.plan(CHUNKS)
    lake.current(SNAPSHOT[:2], off(1, 100), batch=0)
    with pytest.raises(AsOfError, match="not finished"):
        read_table(lake.base_uri, "shop.orders", as_of=off(1, 100))
    snapshot(lake)
    with pytest.raises(AsOfError, match="has not captured"):
        read_table(lake.base_uri, "shop.orders", as_of=off(1, 200))


def test_a_stream_only_table_is_refused(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 900), (SCHEMA, transaction(1, 600, insert((2, "b", 2)))))
    with pytest.raises(AsOfError, match="no snapshot"):
        read_table(lake.base_uri, "shop.orders", as_of=off(1, 900))


@pytest.mark.parametrize(("value", "expected"), [
    ("mysql-bin.000003:4", AsOf(offset=BinlogOffset("mysql-bin.000003", 4))),
    (BinlogOffset("mysql-bin.000003", 4), AsOf(offset=BinlogOffset("mysql-bin.000003", 4))),
    ("0-1-100", AsOf(gtid="0-1-100")),
    ("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", AsOf(gtid="3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5")),
    (1_700_000_000_000, AsOf(timestamp_ms=1_700_000_000_000)),
    (dt.datetime(2026, 1, 1), AsOf(timestamp_ms=1_767_225_600_000)),  # naive = UTC
])
def test_as_of_parses_every_form_once(value: Any, expected: AsOf) -> None:
    assert AsOf.parse(value) == expected
    assert AsOf.parse(AsOf.parse(value)) == expected


@pytest.mark.parametrize("value", ["", "yesterday", "mysql-bin:4", 1.5, True])
def test_a_malformed_position_says_what_is_accepted(value: Any) -> None:
    with pytest.raises(InvalidOptionError, match="as_of must be a binlog offset"):
        AsOf.parse(value)


def test_the_current_table_is_read_where_the_merge_has_passed(lake: Lakes) -> None:
    """Merged changes up to the point are not consulted: a row damaged in the current table shows there (as
    in read_table), so verification sees it; before the merge's point, changes after it roll back."""
    snapshot(lake)
    stream(lake)
    merge(lake, 2)
    DeltaTable(table_uri(lake.base_uri, ORDERS)).update(updates={"name": "'x'"}, predicate="id IN (1, 11)")
    assert rows_of(read_table(lake.base_uri, "shop.orders", as_of=off(1, 600))) == [
        (1, "x", 1), (3, "c", 3), (4, "b", 2), (11, "x", 11)]
    # key 1 changed after 1:400 (its update at 1:500 holds the before image), key 11 did not
    assert rows_of(read_table(lake.base_uri, "shop.orders", as_of=off(1, 400))) == [
        (1, "b", 1), (2, "b", 2), (3, "c", 3), (10, "j", 10), (11, "x", 11)]


@pytest.mark.parametrize("merged", [0, 2])
def test_scan_table_streams_the_rows_read_table_gives(lake: Lakes, merged: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot(lake)
    stream(lake)
    if merged:
        merge(lake, merged)
    monkeypatch.setattr(delta_table, "SCAN_BATCH_ROWS", 1)  # one row a batch: the current table never whole
    for point, expected in [*EXPECTED[3:], (None, EXPECTED[6][1])]:
        reader = scan_table(lake.base_uri, "shop.orders", as_of=point)
        batches = list(reader)
        # key 11 (no change) comes as the current table has it, in a batch of its own; the changed keys after
        assert len(batches) >= 2 and [11] in [b.column(0).to_pylist() for b in batches], point
        if merged and point is None:  # nothing left to apply: every row passes in its own batch
            assert [b.num_rows for b in batches] == [1] * len(expected)
        assert rows_of(pa.Table.from_batches(batches, reader.schema).sort_by("id")) == expected, point
