"""A snapshot file's shape: its schema as the Delta log states it, and which columns are dictionary-encoded
(those whose values repeat in its first chunk)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import file_rows, file_schema, parquet_options
from airflow_provider_mysqlcdc.lake.changelog import SNAPSHOT_CONSTANTS

_COLUMNS = (Column("id", "bigint", "bigint unsigned", unsigned=True), Column("n", "int", "int"),
            Column("price", "decimal", "decimal(12,2)", precision=12, scale=2),
            Column("wide", "decimal", "decimal(60,10)", precision=60, scale=10),
            Column("t", "time", "time(6)", datetime_precision=6), Column("at", "datetime", "datetime"),
            Column("note", "varchar", "varchar(20)", char_max_length=20), Column("j", "json", "json"))


@pytest.mark.parametrize("key", [("id",), ()], ids=["keyed", "keyless"])
def test_the_file_schema_is_the_schema_of_the_rows_written(key: tuple[str, ...]) -> None:
    """What the batch's commit tells the Delta log of its files is what ``file_rows`` makes of a chunk's rows:
    stored types (no unsigned, time or wide decimal types), the metadata columns, ``_dup`` if keyless."""
    schema = TableSchema(TableId("shop", "orders"), _COLUMNS, key)
    rows = file_rows(arrow_schema(schema).empty_table(), schema, BinlogOffset("mysql-bin.000003", 1234))
    assert file_schema(schema) == rows.schema
    assert ("_dup" in file_schema(schema).names) == (not key)


def test_only_columns_whose_first_chunk_repeats_few_values_get_a_dictionary(tmp_path: Path) -> None:
    def chunk(first: int) -> pa.Table:
        keys = range(first, first + 8096)
        return pa.table({"id": pa.array(keys, pa.int64()),
                         "note": [f"note for order {k}" for k in keys],
                         "status": [("new", "paid", "shipped")[k % 3] for k in keys],
                         "_op": ["+I"] * 8096,
                         "gone": pa.nulls(8096, pa.string())})

    options = parquet_options(chunk(0))
    assert options["use_dictionary"] == ["status", "_op", "gone"]
    with pq.ParquetWriter(tmp_path / "part.parquet", chunk(0).schema, **options) as writer:
        for first in (0, 8096):
            writer.write_table(chunk(first))
    footer = pq.read_metadata(tmp_path / "part.parquet")
    for group in range(footer.num_row_groups):
        columns = [footer.row_group(group).column(i) for i in range(footer.num_columns)]
        encoded = {c.path_in_schema for c in columns if "RLE_DICTIONARY" in c.encodings}
        assert encoded == {"status", "_op", "gone"}


def test_a_wide_column_is_judged_by_its_first_values() -> None:
    """Not hashed whole (a chunk of wide rows would be copied): its first MiB repeats, so it gets a dictionary,
    which the writer gives up at the page limit if later values do not."""
    wide = pa.table({"blob": [b"x" * 1024] * 2048 + [bytes([i % 256]) * 1024 + bytes(i) for i in range(2048)]})
    assert parquet_options(wide)["use_dictionary"] == ["blob"]
    assert parquet_options(wide.slice(2048))["use_dictionary"] == []


def test_a_column_that_repeats_only_in_its_first_rows_is_judged_by_the_whole_chunk() -> None:
    """The first rows are a glance: few distinct values there do not decide, the chunk's do."""
    first = ["new"] * 1024 + [f"order {k}" for k in range(7072)]
    later = [f"order {k}" for k in range(1024)] + ["new"] * 7072
    table = pa.table({"first": first, "later": later, "status": ["new", "paid"] * 4048})
    assert parquet_options(table)["use_dictionary"] == ["status"]


def test_a_snapshot_files_constant_columns_are_what_hashing_would_find() -> None:
    """``SNAPSHOT_CONSTANTS`` spares the hashing of the metadata columns of a snapshot chunk: the choice is the
    one hashing makes, so a metadata column that stopped being one value a file would fail here."""
    schema = TableSchema(TableId("shop", "orders"), _COLUMNS[:2] + _COLUMNS[6:7], ("id",))
    rows = file_rows(pa.table({"id": pa.array(range(8096), pa.uint64()), "n": [k % 7 for k in range(8096)],
                               "note": [f"note {k}" for k in range(8096)]}, schema=arrow_schema(schema)),
                     schema, BinlogOffset("mysql-bin.000003", 1234))
    assert SNAPSHOT_CONSTANTS <= set(rows.column_names)
    chosen = parquet_options(rows, SNAPSHOT_CONSTANTS)["use_dictionary"]
    assert chosen == parquet_options(rows)["use_dictionary"]
    assert chosen == ["n", *(f for f in rows.column_names if f in SNAPSHOT_CONSTANTS)]
