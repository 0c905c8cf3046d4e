"""Reading a run of chunks and writing them into a batch attempt: what one Spark task does.

Each task writes one Parquet file (a row group per chunk) into the attempt folder and returns only
metadata, so no row passes through the Spark driver.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.lake.changelog import lake_schema, with_snapshot_metadata
from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore


def write_chunks(
    store: SnapshotStore,
    batch: Batch,
    attempt: str,
    part: int,
    config: ConnectionConfig,
    schema: TableSchema,
    chunks: Iterable[Chunk],
    server_id: int,
) -> Iterator[dict[str, Any]]:
    """Yields one metadata record per chunk written (range, rows, LW, HW, file)."""
    chunks = list(chunks)
    if not chunks:
        return
    directory = store.attempt_dir(batch, attempt)
    store.lake.fs.create_dir(directory, recursive=True)
    path = f"{directory}/part-{part:05d}.parquet"
    # each record is yielded as its chunk is written, so that the driver's progress moves per chunk;
    # the file only counts once the driver has every record and commits the manifest
    with ChunkReader(config, schema, server_id=server_id) as reader, pq.ParquetWriter(
        path, lake_schema(schema), filesystem=store.lake.fs, compression="snappy"
    ) as writer:
        for snapshot in reader.read(chunks):
            started = time.perf_counter()
            writer.write_table(with_snapshot_metadata(snapshot.table, schema, snapshot.high_watermark))
            yield {
                "chunk": snapshot.chunk.to_dict(),
                "rows": snapshot.table.num_rows,
                "changed_keys": snapshot.changed_keys,
                "low_watermark": snapshot.low_watermark.to_dict(),
                "high_watermark": snapshot.high_watermark.to_dict(),
                "file": path,
                "write_seconds": round(time.perf_counter() - started, 4),
            }
