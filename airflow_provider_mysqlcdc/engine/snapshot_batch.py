"""A snapshot batch: the columns it reads, its chunks into Parquet files, and the commit.

Each Spark task writes one Parquet file (a row group per chunk) into the batch's attempt folder and
returns only metadata, so no row passes through the Spark driver, which commits the batch's
manifest once every chunk is written. The Spark application (``spark/snapshot_job.py``) only
distributes these steps; the tests drive them without Spark.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.changelog import lake_schema, with_snapshot_metadata
from airflow_provider_mysqlcdc.lake.snapshot import Batch, SnapshotStore


def batch_schema(planned: TableSchema, config: ConnectionConfig, base_uri: str) -> TableSchema:
    """The columns this batch reads: the table's current ones. An ALTER TABLE since the split (or a retry
    after a SchemaChangeError) needs no new plan: the chunks hold as long as the chunk key column is the
    same, and files of batches read before and after the change are read together as the current types."""
    control = config.connect()
    try:
        current = load_table_schema(control, planned.id)
    finally:
        control.close()
    if current.columns == planned.columns:
        return planned
    key = planned.chunk_key
    if key not in current.column_names or current.column(key) != planned.column(key):
        raise SchemaChangeError(
            f"the chunk key column {key} of {planned.id} changed since its snapshot was planned, so its chunks no "
            f"longer hold: delete {base_uri.rstrip('/')}/{planned.id.database}/{planned.id.table}/snapshot and run "
            f"the DAG again to plan and read it anew"
        )
    print(f"snapshot: {planned.id} changed since its plan; this batch reads its current columns: "
          f"{', '.join(f'{c.name} {c.column_type}' for c in current.columns)}", flush=True)
    return TableSchema(current.id, current.columns, current.primary_key, key)


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


def commit_batch(
    store: SnapshotStore, batch: Batch, attempt: str, schema: TableSchema, records: list[dict[str, Any]],
    seconds: float,
) -> dict[str, Any]:
    """Commit the attempt whose every chunk is in ``records`` (from ``write_chunks``): its manifest."""
    records = sorted(records, key=lambda r: r["chunk"]["i"])
    files = sorted({r["file"] for r in records})
    rows = sum(r["rows"] for r in records)
    manifest = {
        "batch": batch.to_dict(),
        "attempt": attempt,
        "schema": schema.to_dict(),
        "chunks": records,
        "files": files,
        "rows": rows,
        "bytes": sum(store.lake.fs.get_file_info(f).size or 0 for f in files),
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds) if seconds else None,
        "changed_keys": sum(r["changed_keys"] for r in records),
    }
    store.commit(batch, manifest)
    return manifest
