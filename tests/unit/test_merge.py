"""``lake.write.merge.merge_changes`` on temporary local Delta tables, no server.

The current state is written as the snapshot writes it (rows with snapshot metadata, partitioned by
``_batch``); changes are changelog rows as the stream writes them (with ``_stream_seq``) plus the
``_batch`` the runner computes from the plan.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SchemaChangeError
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS
from airflow_provider_mysqlcdc.lake.format.delta_schema import MERGE_APP_ID
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.merge import last_change_per_key, merge_changes
from tests.unit.merge_rows import change, changes, snapshot_rows

META = [f.name for f in METADATA_FIELDS]


def write_snapshot(uri: str, keys: range = range(40)) -> None:
    """One file per batch of 10 keys, as the snapshot commits its batches."""
    for start in range(keys.start, keys.stop, 10):
        write_deltalake(uri, snapshot_rows(range(start, start + 10)), partition_by=["_batch"], mode="append")


def update(key: int, old: str, new: str, pos: int, row: int = 0) -> list[dict[str, Any]]:
    """An UPDATE's before and after image, numbered as ``changes_table`` does (after image bit set)."""
    return [change("-U", key, old, pos, row << 1), change("+U", key, new, pos, (row << 1) | 1)]


def state(uri: str) -> dict[int, str | None]:
    rows = DeltaTable(uri).to_pyarrow_table(columns=["id", "name"]).to_pylist()
    return {r["id"]: r["name"] for r in rows}


@pytest.fixture
def current(tmp_path: Path) -> str:
    uri = str(tmp_path / "current")
    write_snapshot(uri)
    return uri


def test_insert_update_delete(current: str) -> None:
    report = merge_changes(DeltaLocation(current), changes(
        change("+I", 100, "new", 200), *update(3, "n3", "three", 201), change("-D", 25, "n25", 202),
    ), ["id"], through_seq=1)
    got = state(current)
    assert got[100] == "new" and got[3] == "three" and 25 not in got and len(got) == 40
    assert (report.rows_inserted, report.rows_updated, report.rows_deleted) == (1, 1, 1)
    assert DeltaTable(current).transaction_version(MERGE_APP_ID) == 1
    assert "_stream_seq" not in DeltaTable(current).schema().to_arrow().names


def test_several_changes_per_key_last_wins_in_any_order(current: str) -> None:
    rows = [
        *update(5, "n5", "a", 300), *update(5, "a", "b", 301), *update(5, "b", "c", 301, row=1),
        change("-D", 6, "n6", 302), change("+I", 6, "back", 303),
        change("+I", 101, "x", 304), change("-D", 101, "x", 305),
    ]
    random.Random(7).shuffle(rows)
    merge_changes(DeltaLocation(current), changes(*rows), ["id"], through_seq=1)
    got = state(current)
    assert (got[5], got[6]) == ("c", "back") and 101 not in got


def test_key_update_deletes_the_old_key(current: str) -> None:
    """UPDATE ... SET id = 200 WHERE id = 7: the old key's last record is the before image."""
    merge_changes(DeltaLocation(current),
                  changes(change("-U", 7, "n7", 400, 0), change("+U", 200, "n7", 400, 1)), ["id"], 1)
    got = state(current)
    assert 7 not in got and got[200] == "n7"


def test_row_moving_to_another_batch(current: str) -> None:
    """A chunk key other than the row key: an update moved row 3 from batch 0 to batch 2 and back later."""
    moved = [{**r, "_batch": 2} if r["_op"] == "+U" else r for r in update(3, "n3", "moved", 1000)]
    merge_changes(DeltaLocation(current), changes(*moved), ["id"], 1)
    rows = DeltaTable(current).to_pyarrow_table(columns=["id", "_batch", "name"]).to_pylist()
    assert [(r["_batch"], r["name"]) for r in rows if r["id"] == 3] == [(2, "moved")]
    back = [{**r, "_batch": 2} if r["_op"] == "-U" else r for r in update(3, "moved", "home", 1001)]
    merge_changes(DeltaLocation(current), changes(*moved, *back), ["id"], 2, force=True)
    rows = DeltaTable(current).to_pyarrow_table(columns=["id", "_batch", "name"]).to_pylist()
    assert [(r["_batch"], r["name"]) for r in rows if r["id"] == 3] == [(0, "home")]


def test_older_change_does_not_override_newer_target_row(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    write_deltalake(uri, snapshot_rows(range(10), hw=(2, 50)), partition_by=["_batch"])  # a re-run batch
    merge_changes(DeltaLocation(uri), changes(*update(1, "n1", "stale", 900, 0), change("-D", 2, "n2", 10, file=2),
                               change("+I", 3, "stale", 60, file=2)), ["id"], 1)
    got = state(uri)
    assert (got[1], got[2], got[3]) == ("n1", "n2", "stale")  # only the change after (2, 50) applies


def test_only_touched_partitions_are_rewritten(current: str) -> None:
    before = set(pa.table(DeltaTable(current).get_add_actions(flatten=True)).column("path").to_pylist())
    report = merge_changes(DeltaLocation(current),
                           changes(*update(12, "n12", "x", 500), change("+I", 15, "dup", 501)), ["id"], 1)
    after = set(pa.table(DeltaTable(current).get_add_actions(flatten=True)).column("path").to_pylist())
    assert (report.files_removed, report.files_added) == (1, 1)
    assert len(before - after) == 1 and all("_batch=1/" in p for p in before - after | (after - before))
    assert report.files_scanned == 1  # of 4: the other batches' files were pruned before the scan


def test_add_column_and_dropped_column(current: str) -> None:
    added = changes(change("+I", 101, "new", 600, note="hello"), *[
        {**r, "note": "changed" if r["_op"] == "+U" else None} for r in update(1, "n1", "one", 601)
    ], extra={"note": pa.string()})
    merge_changes(DeltaLocation(current), added, ["id"], 1)
    rows = {r["id"]: r for r in DeltaTable(current).to_pyarrow_table().to_pylist()}
    assert rows[101]["note"] == "hello" and rows[1]["note"] == "changed" and rows[2]["note"] is None
    dropped = changes(*update(1, "n1", "x", 700)).drop_columns(["name"])  # DROP COLUMN name upstream
    merge_changes(DeltaLocation(current), dropped.append_column("note", pa.array(["a", "b"])), ["id"], 2)
    rows = {r["id"]: r for r in DeltaTable(current).to_pyarrow_table().to_pylist()}
    assert rows[1]["name"] == "one" and rows[1]["note"] == "b" and rows[1]["_binlog_pos"] == 700


def test_quoted_identifiers(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    snapshot = snapshot_rows(range(10)).rename_columns(["Id", "Order Name", *META, "_batch"])
    write_deltalake(uri, snapshot, partition_by=["_batch"])
    change_rows = changes(*update(4, "n4", "four", 800), change("+I", 11, "eleven", 801))
    report = merge_changes(DeltaLocation(uri),
                           change_rows.rename_columns(["Id", "Order Name", *change_rows.column_names[2:]]),
                           ["Id"], 1)
    rows = {r["Id"]: r["Order Name"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()}
    assert (rows[4], rows[11], len(rows)) == ("four", "eleven", 11) and report.rows_updated == 1


def test_rerun_of_the_same_merge_is_skipped_or_changes_nothing(current: str) -> None:
    batch = changes(*update(3, "n3", "x", 900), change("-D", 4, "n4", 901), change("+I", 102, "y", 902))
    first = merge_changes(DeltaLocation(current), batch, ["id"], 3)
    again = merge_changes(DeltaLocation(current), batch, ["id"], 3)
    assert again.skipped and again.version == first.version
    forced = merge_changes(DeltaLocation(current), batch, ["id"], 3, force=True)
    assert (forced.rows_inserted, forced.rows_updated, forced.rows_deleted) == (0, 0, 0)
    assert state(current) == {**{k: f"n{k}" for k in range(40) if k != 4}, 3: "x", 102: "y"}


def test_missing_table_is_created_partitioned(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    report = merge_changes(DeltaLocation(uri),
                           changes(change("+I", 1, "a", 1), change("+I", 21, "b", 2), change("-D", 21, "b", 3),
                                   change("-D", 5, "c", 4)), ["id"], 7)
    table = DeltaTable(uri)
    assert report.created and state(uri) == {1: "a"}
    assert table.metadata().partition_columns == ["_batch"] and table.transaction_version(MERGE_APP_ID) == 7
    assert "_stream_seq" not in table.schema().to_arrow().names


def test_bad_changes_are_refused(current: str) -> None:
    with pytest.raises(InvalidOptionError, match="_batch"):
        merge_changes(DeltaLocation(current), changes(change("+I", 1, "a", 1)).drop_columns(["_batch"]), ["id"], 1)
    wrong = changes(change("+I", 1, "a", 1)).drop_columns(["name"])
    wrong = wrong.add_column(1, "name", pa.array([1], pa.int32()))
    with pytest.raises(SchemaChangeError, match="name"):
        merge_changes(DeltaLocation(current), wrong, ["id"], 1)


def test_last_change_per_key_keeps_input_rows() -> None:
    rows = changes(change("+I", 1, "a", 5), change("+U", 1, "b", 5, 3), change("+U", 1, "c", 4, 9),
                   change("+I", 2, "d", 1))
    assert last_change_per_key(rows, ["id"]).column("name").to_pylist() == ["b", "d"]


def test_a_column_widened_upstream_widens_the_current_state(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    write_deltalake(uri, snapshot_rows(range(10), qty=pa.array(range(10), pa.int32())), partition_by=["_batch"])
    merge_changes(DeltaLocation(uri), changes(change("+I", 1, "x", 1, qty=1), extra={"qty": pa.int32()}), ["id"],
                  through_seq=1)
    # ALTER TABLE ... MODIFY qty BIGINT, then a value an INT cannot hold
    big = changes(change("+I", 11, "big", 2, qty=30_000_000_000, stream_seq=2), extra={"qty": pa.int64()})
    merge_changes(DeltaLocation(uri), big, ["id"], through_seq=2)
    table = DeltaTable(uri)
    assert pa.schema(table.schema().to_arrow()).field("qty").type == pa.int64()
    rows = {r["id"]: r["qty"] for r in table.to_pyarrow_table(columns=["id", "qty"]).to_pylist()}
    assert rows[11] == 30_000_000_000 and rows[5] == 5 and len(rows) == 11
    assert table.transaction_version(MERGE_APP_ID) == 2
