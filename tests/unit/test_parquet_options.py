"""Which columns of a snapshot file are dictionary-encoded: those whose values repeat in its first chunk."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.engine.snapshot_batch import parquet_options


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
