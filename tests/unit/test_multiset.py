"""``lake.write.multiset``: a keyless table's copies, changes as +1/-1 per image, the MERGE on (partition,
image, ``_dup``), as-of rolls, and the refusals where the multiset cannot be exact. Local Delta tables,
no server."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import check_keyless_source
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.verification.verify import compare
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.format.delta_schema import MERGE_APP_ID
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.multiset import (
    CURRENT_ROW,
    DUP_COLUMN,
    apply_counts,
    check_not_keyless,
    current_rows,
    dup_ordinals,
    merge_multiset,
    multiset_at,
    with_dup,
)

COLUMNS = ["k", "s"]
SCHEMA = TableSchema(TableId("shop", "bag"), (Column("k", "bigint", "bigint(20)", nullable=False),
                                              Column("s", "varchar", "varchar(9)")), (), "k")


def rows(images: list[tuple[int, str | None]], op: str = "+I", pos: int = 100, seq: int = 0) -> pa.Table:
    """Lake rows of ``images`` (all of one kind and position), partitioned by ``k // 10``."""
    n = len(images)
    return pa.table({
        "k": pa.array([i[0] for i in images], pa.int64()), "s": pa.array([i[1] for i in images], pa.string()),
        "_op": [op] * n, "_database": ["shop"] * n, "_table": ["bag"] * n, "_op_ts": pa.array([0] * n, pa.int64()),
        "_binlog_file": pa.array([1] * n, pa.int32()), "_binlog_pos": pa.array([pos] * n, pa.int64()),
        "_row_seq": pa.array([seq] * n, pa.int64()), "_batch": pa.array([i[0] // 10 for i in images], pa.int32()),
    })


def copies(uri: str) -> list[tuple[Any, ...]]:
    table = DeltaTable(uri).to_pyarrow_table(columns=[*COLUMNS, DUP_COLUMN])
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


SNAPSHOT = [(1, "a"), (1, "a"), (1, None), (2, "b"), (12, "x")]


def test_dup_numbers_equal_rows_and_nulls_are_equal() -> None:
    assert dup_ordinals(rows([(1, "a"), (1, None), (1, "a"), (1, None), (1, "a")]), COLUMNS).to_pylist() == [
        0, 0, 1, 1, 2]


def test_changes_count_once_each_in_order_never_below_zero() -> None:
    counts: Counter[str] = Counter({"a": 2})
    touched = apply_counts(counts, [("-D", "a"), ("-U", "a"), ("-D", "a"), ("+I", "a"), ("+U", "b"), ("-D", "c")])
    assert counts == Counter({"a": 1, "b": 1}) and touched == {"a", "b", "c"}


def test_the_merge_inserts_new_ordinals_and_deletes_the_highest(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    write_deltalake(uri, with_dup(rows(SNAPSHOT), COLUMNS), partition_by=["_batch"])
    changes = pa.concat_tables([
        rows([(1, "a")], "-D", 200, 2), rows([(1, None)], "+I", 201, 2), rows([(1, None)], "+I", 202, 2),
        rows([(2, "b")], "-U", 203, 2), rows([(2, "c")], "+U", 203, 3),
        rows([(12, "x")], "+I", 204, 2), rows([(12, "x")], "-D", 205, 2),  # cancel out: partition 1 untouched
    ])
    report = merge_multiset(DeltaLocation(uri), changes, COLUMNS, "k", through_seq=4)
    assert copies(uri) == sorted([(1, "a", 0), (1, None, 0), (1, None, 1), (1, None, 2), (2, "c", 0), (12, "x", 0)],
                                 key=repr)
    assert (report.rows_inserted, report.rows_deleted, report.files_removed) == (3, 2, 1)  # one partition rewritten
    assert DeltaTable(uri).transaction_version(MERGE_APP_ID) == 4
    # read_table's rule gives the same multiset from the snapshot and the changes alone
    read = [tuple(r.values()) for r in current_rows(rows(SNAPSHOT), changes, COLUMNS).to_pylist()]
    assert sorted(read, key=repr) == sorted((c[:2] for c in copies(uri)), key=repr)
    again = merge_multiset(DeltaLocation(uri), changes, COLUMNS, "k", through_seq=4)  # a retried merge: skipped
    assert again.skipped and copies(uri) == sorted(
        [(1, "a", 0), (1, None, 0), (1, None, 1), (1, None, 2), (2, "c", 0), (12, "x", 0)], key=repr)


def test_a_merge_of_changes_alone_creates_the_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    changes = pa.concat_tables([rows([(3, "q"), (3, "q"), (3, "q")], "+I", 10, 2), rows([(3, "q")], "-D", 11, 2),
                                rows([(4, "z")], "-D", 12, 2)])  # a row the lake never had: nothing to remove
    assert merge_multiset(DeltaLocation(uri), changes, COLUMNS, "", through_seq=1).created
    assert copies(uri) == [(3, "q", 0), (3, "q", 1)]
    merge_multiset(DeltaLocation(uri), rows([(3, "q")], "+I", 13, 2), COLUMNS, "", through_seq=2)
    assert copies(uri) == [(3, "q", 0), (3, "q", 1), (3, "q", 2)]


def test_as_of_adds_unmerged_changes_before_the_point_and_undoes_merged_ones_after_it() -> None:
    current = rows([(1, "a"), (1, "a")])  # after a merged insert at 300
    merged_after = rows([(1, "a")], "+I", 300, 2)
    unmerged = pa.concat_tables([rows([(1, "a")], "-D", 400, 2), rows([(2, "b")], "+I", 500, 2)])
    history = pa.concat_tables([current, merged_after, unmerged])
    history = history.append_column(CURRENT_ROW, pa.array([True, True, False, False, False]))
    history = history.append_column("__merged", pa.array([False, False, True, False, False]))

    def at(position: int) -> list[tuple[Any, ...]]:
        before = pa.array([True, True, *(p <= position for p in (300, 400, 500))])
        return [tuple(r.values()) for r in multiset_at(history, before, COLUMNS, "__merged").to_pylist()]

    assert at(250) == [(1, "a")]
    assert at(350) == [(1, "a"), (1, "a")]
    assert at(450) == [(1, "a")]
    assert at(600) == [(1, "a"), (2, "b")]


def test_verification_compares_chunks_as_multisets() -> None:
    source, replica = rows([(1, "a"), (1, "a"), (2, "b")]), rows([(1, "a"), (2, "b"), (2, "b")])
    missing, extra, different = compare(SCHEMA, source.select(COLUMNS), replica.select(COLUMNS))
    assert (missing.keys, extra.keys, different.count) == (((1, "a"),), ((2, "b"),), 0)
    assert compare(SCHEMA, source.select(COLUMNS), source.select(COLUMNS))[0].count == 0


def test_keyless_tables_are_refused_on_mysql_and_where_no_multiset_path_exists() -> None:
    mysql = ServerInfo("mysql", (8, 0, 36), "8.0.36")
    with pytest.raises(TableNotSupportedError, match="no binlog position of a consistent snapshot.*only be captured "
                                                     "from MariaDB"):
        check_keyless_source(None, mysql, SCHEMA)
    with pytest.raises(SnapshotStateError, match="as-is repair is not available.*re-snapshot the whole table"):
        check_not_keyless(SCHEMA, "as-is repair")
