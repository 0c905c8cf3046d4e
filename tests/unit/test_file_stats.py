"""Delta file statistics from a Parquet footer (``lake.format.delta_table.file_stats``), and what delta-rs does
with them: a file whose first row group is empty (a snapshot chunk of no rows) keeps the bounds of its
other row groups, so a filtered read still finds its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.lake.format.delta_table import file_stats


def test_an_empty_row_group_does_not_take_the_files_bounds(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        writer.write_table(schema.empty_table())  # a chunk of no rows
        writer.write_table(pa.table({"id": [10409], "note": ["w"]}, schema=schema))
    metadata = pq.read_metadata(path)
    assert [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)] == [0, 1]
    stats = json.loads(file_stats(metadata))
    assert stats["minValues"]["id"] == stats["maxValues"]["id"] == 10409
    assert stats["nullCount"] == {"id": 0, "note": 0} and stats["numRecords"] == 1

