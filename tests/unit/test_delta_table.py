"""The Delta implementation of the table format seam (``lake.format.delta_table``): what the protocols promise
callers, checked on real Delta tables: commit tags come back in the history, files carry their
statistics and partition, a lost commit race is the seam's error, and a MERGE brings a DATETIME
column into an existing table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_provider_mysqlcdc.exceptions import TableCommitConflictError
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, MergeSpec, TableVersion


def rows(ids: list[int], batch: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "_batch": pa.array([batch] * len(ids), pa.int32())})


def opened(location: DeltaLocation) -> TableVersion:
    table = location.open()
    assert table is not None
    return table


def test_a_place_without_a_table_opens_as_none_and_appends_create_it(tmp_path: Path) -> None:
    location = DeltaLocation(str(tmp_path / "t"))
    assert location.open() is None
    location.append(rows([1, 2]), CommitTag("app", 3, {"stream_seq": "3"}))
    table = opened(location)
    assert (table.version(), table.count(), table.applied("app"), table.applied("other")) == (0, 2, 3, -1)


def test_history_gives_appended_rows_and_the_writers_metadata(tmp_path: Path) -> None:
    location = DeltaLocation(str(tmp_path / "t"))
    location.create_from(rows([1]), ["_batch"], CommitTag("merge", 0))
    location.append(rows([2, 3]), CommitTag("stream", 1, {"stream_seq": "1", "offset": "b.1:4"}))
    opened(location).delete('"id" = 2', CommitTag("stream", 1, {"note": "removed"}))
    newest, appended, created = opened(location).history()
    assert (newest.version, newest.appended_rows, newest.metadata) == (2, None, {"note": "removed"})
    assert (appended.version, appended.appended_rows, appended.metadata) == (1, 2, {"stream_seq": "1",
                                                                                   "offset": "b.1:4"})
    assert created.appended_rows is None and created.timestamp_ms > 0  # a create is no append


def test_an_opened_tables_append_fills_missing_columns_keeps_statistics_and_counts_its_rows(tmp_path: Path) -> None:
    """An append of the table's own columns and types writes its own file and commits it as an add action."""
    location = DeltaLocation(str(tmp_path / "t"))
    location.append(rows([1, 2]), CommitTag("stream", 1))
    table = opened(location)
    table.append(pa.table({"id": pa.array([7, 9], pa.int64())}), CommitTag("stream", 2, {"stream_seq": "2"}))
    table.refresh()  # the append leaves the handle where it was loaded

    assert (table.version(), table.applied("stream"), table.count()) == (1, 2, 4)
    newest = table.history(1)[0]
    assert (newest.appended_rows, newest.metadata) == (2, {"stream_seq": "2"})
    assert sorted((f.low["id"], f.high["id"]) for f in table.files()) == [(1, 2), (7, 9)]
    assert table.read(["id", "_batch"], pc.field("id") > 5).to_pylist() == [{"id": 7, "_batch": None},
                                                                            {"id": 9, "_batch": None}]


def test_an_opened_tables_append_of_a_new_column_adds_it(tmp_path: Path) -> None:
    location = DeltaLocation(str(tmp_path / "t"))
    location.append(rows([1]), CommitTag("stream", 1))
    opened(location).append(rows([2]).append_column("note", pa.array(["n"])), CommitTag("stream", 2))
    table = opened(location)
    assert table.schema().names == ["id", "_batch", "note"] and table.applied("stream") == 2
    assert table.read(["id", "note"]).sort_by("id").to_pylist() == [{"id": 1, "note": None}, {"id": 2, "note": "n"}]


def test_files_carry_their_partition_and_statistics(tmp_path: Path) -> None:
    location = DeltaLocation(str(tmp_path / "t"))
    location.create_from(pa.concat_tables([rows([1, 5], batch=0), rows([7, 9], batch=1)]), ["_batch"], CommitTag())
    files = sorted(opened(location).files(), key=lambda f: f.partition["_batch"])
    assert [(f.partition["_batch"], f.low["id"], f.high["id"]) for f in files] == [(0, 1, 5), (1, 7, 9)]
    assert all(f.uri.endswith(".parquet") and f.size > 0 for f in files)
    assert opened(location).read(["id"], pc.field("_batch") == 1).column("id").to_pylist() == [7, 9]


def test_a_commit_that_lost_a_race_is_the_seams_conflict(tmp_path: Path) -> None:
    location = DeltaLocation(str(tmp_path / "t"))
    location.create_from(rows([1, 2, 3]), ["_batch"], CommitTag())
    first, second = opened(location), opened(location)
    first.delete('"id" = 1', CommitTag())
    with pytest.raises(TableCommitConflictError):
        second.delete('"id" = 2', CommitTag())  # it read the file the first delete removed


def test_a_merge_bringing_a_datetime_column_turns_its_feature_on(tmp_path: Path) -> None:
    """delta-rs turns ``timestampNtz`` on when a write adds such a column, not when a MERGE does."""
    location = DeltaLocation(str(tmp_path / "t"))
    location.create_from(rows([1]), ["_batch"], CommitTag())
    later = rows([2]).append_column("at", pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us")))
    counts = opened(location).merge(MergeSpec(later, 't."id" = s."id"', None, None, "true", CommitTag("merge", 1)))
    assert counts.inserted == 1 and opened(location).applied("merge") == 1
    assert opened(location).read(["at"], pc.field("id") == 2).column("at").to_pylist() == [
        dt.datetime(2024, 1, 2, 3, 4, 5)]
