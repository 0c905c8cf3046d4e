"""A snapshot batch: the columns it reads, its chunks into Parquet files (per Spark task), its commit.

Each Spark task writes one Parquet file (a row group per chunk) into the batch's partition folder of
the table's current-state Delta table and returns only a ``ChunkResult`` per chunk, so no row passes
through the Spark driver. Once every chunk is written the driver commits the batch: one Delta
transaction that replaces the batch's partition with this attempt's files
(``lake.write.snapshot_commit``), then the batch manifest with the chunks' watermarks. The Spark
application (``spark/snapshot_job.py``) only distributes these steps; the tests drive them without
Spark.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_columns, load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import (
    DEFAULT_GROUP_SIZE,
    ChunkReader,
    ChunkSnapshot,
    TableChunks,
    read_tables,
)
from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot.read_ahead import read_ahead
from airflow_provider_mysqlcdc.exceptions import (
    SchemaChangeError,
    SnapshotJobError,
    SnapshotStateError,
    TableNotSupportedError,
)
from airflow_provider_mysqlcdc.lake.changelog import SNAPSHOT_CONSTANTS, lake_schema, with_snapshot_metadata
from airflow_provider_mysqlcdc.lake.documents.snapshot import (
    Batch,
    BatchManifest,
    ChunkResult,
    SnapshotStore,
    part_file,
)
from airflow_provider_mysqlcdc.lake.format.delta_schema import for_delta, stored_schema
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.multiset import DUP_FIELD, with_dup
from airflow_provider_mysqlcdc.lake.write.snapshot_commit import data_file, replace_partition
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore


def batch_schema(planned: TableSchema, config: ConnectionConfig, lake: Lake) -> TableSchema:
    """The columns a batch of ``planned``'s table reads (``batch_schemas``)."""
    return batch_schemas([planned], config, lake)[planned.id]


def batch_schemas(planned: Sequence[TableSchema], config: ConnectionConfig, lake: Lake) -> dict[TableId, TableSchema]:
    """The columns the batches of each of ``planned``'s tables read: the table's current ones, read for all the
    tables at once. An ALTER TABLE since the split (or a retry after a SchemaChangeError) needs no new plan:
    the chunks hold as long as the chunk key column is the same; a column added since is added to the Delta
    table when the batch commits.

    The chunk key is the plan's: information_schema knows only the default one (the key's first
    column), not a configured ``chunk_key_column``, so the schema read here keeps everything but that."""
    control = config.connect()
    try:
        columns = load_table_columns(control, [p.id for p in planned])
        changed = load_table_schemas(control, [p.id for p in planned if columns.get(p.id) != p.columns])
    finally:
        control.close()
    schemas = {}
    for schema in planned:
        if schema.id not in columns:
            raise TableNotSupportedError(f"table {schema.id} does not exist or the CDC user cannot see it (GRANT "
                                         f"SELECT)")
        current = changed.get(schema.id, schema)
        if current is schema:
            schemas[schema.id] = schema
            continue
        key = schema.chunk_key
        if key not in current.column_names or current.column(key) != schema.column(key):
            raise SchemaChangeError(
                f"the chunk key column {key} of {schema.id} changed since its snapshot was planned, so its chunks "
                f"no longer hold: delete the table's folder {lake.table(schema.id).folder} "
                f"(its snapshot plan and its Delta tables) and run the DAG again to plan and read it anew"
            )
        print(f"snapshot: {schema.id} changed since its plan; its batches read its current columns: "
              f"{', '.join(f'{c.name} {c.column_type}' for c in current.columns)}", flush=True)
        schemas[schema.id] = replace(current, chunk_key=key)
    return schemas


PARQUET_OPTIONS: dict[str, Any] = {"compression": "snappy", "dictionary_pagesize_limit": 4 * 1024}
"""How a snapshot task writes its Parquet file, but for which columns are dictionary-encoded (``parquet_options``).
A column chunk's dictionary is given up once it passes 4 KiB (pyarrow's default: 1 MiB), so a column of few
distinct values (a status, a small code) keeps its dictionary and a column of unique values (ids, names, notes)
is written plain almost at once instead of hashing every value of its row group first. Measured by
``bench.parquet_write_bench`` against pyarrow's default (with ``parquet_options``): 35% less CPU and 14% smaller
files on the benchmark table, 38% and 24% with a five-value status column in it; no dictionaries at all is about
as fast, but larger where a column has few values (14% there)."""


DICTIONARY_GLANCE_ROWS = 1024
"""How many of a column's first values ``parquet_options`` hashes before the rest (``_repeats``)."""
DICTIONARY_SAMPLE_BYTES = 1 << 20
"""How much of a column's first values ``parquet_options`` looks at: all of a chunk of ordinary rows, and no
copy of a chunk of wide ones (its distinct values are hashed into a table of their own)."""


def parquet_options(first: pa.Table, constant: Collection[str] = ()) -> dict[str, Any]:
    """``PARQUET_OPTIONS`` for a file whose first chunk's rows are ``first``: a dictionary only for the columns
    whose distinct values in that chunk (or its first ``DICTIONARY_SAMPLE_BYTES``) fit in one dictionary page
    (a status), and for the ``constant`` ones, one value in every row of the file (a snapshot file's metadata
    columns), without hashing them: that was half of judging a small table's file (0.35 against 1.03 ms for an
    8,096-row chunk of the benchmark table). If later values do not fit, the dictionary is given up at the
    limit. A column whose dictionary is given up still hashes its first values of every row group into it:
    leaving those columns plain took a tenth off the writing's CPU and 2-3% off the file
    (``bench.parquet_write_bench``: 0.43 against 0.48 CPU s per 1,000,000 rows of the benchmark table, 0.30
    against 0.34 with a five-value status column)."""
    limit = PARQUET_OPTIONS["dictionary_pagesize_limit"]
    repeating = [name for name, column in zip(first.column_names, first.columns, strict=True)
                 if name in constant or _repeats(column, limit)]
    return {**PARQUET_OPTIONS, "use_dictionary": repeating}


def _repeats(column: pa.ChunkedArray, limit: int) -> bool:
    """Whether the distinct values of the column's first values (``_first_values``) fit in ``limit`` bytes,
    judged on the first ``DICTIONARY_GLANCE_ROWS`` of them first: a part's distinct values are some of the
    whole's, so a part past the limit decides it, and most columns (keys, names, notes, times) are decided
    there. Every small table of a database has a file of its own, each judged: hashing the whole first chunk
    took about 4 ms a file of the benchmark table's 8,096-row chunks, this about 1 ms."""
    sample = _first_values(column)
    glance = sample.slice(0, DICTIONARY_GLANCE_ROWS)
    if pc.unique(glance).nbytes > limit:
        return False
    return len(glance) == len(sample) or pc.unique(sample).nbytes <= limit


def _first_values(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if column.nbytes <= DICTIONARY_SAMPLE_BYTES:
        return column
    return column.slice(0, max(1, len(column) * DICTIONARY_SAMPLE_BYTES // column.nbytes))


def file_schema(schema: TableSchema) -> pa.Schema:
    """The columns of a batch's Parquet files: the table's and the metadata columns (``lake_schema``) in
    the types the Delta tables store (``for_delta``: no unsigned integers, durations or wide decimals),
    and for a keyless table the copy ordinal ``_dup`` (``lake.write.multiset``). No ``_batch`` column: the
    partition value is in the Delta log. Made from the schemas alone: through an empty table's conversions
    (``file_rows``) it took a fifth of a small table's commit."""
    stored = stored_schema(lake_schema(schema))
    return stored.append(DUP_FIELD) if schema.keyless else stored


def file_rows(rows: pa.Table, schema: TableSchema, high_watermark: BinlogOffset) -> pa.Table:
    """A chunk's rows as its file holds them: with a snapshot row's metadata columns, in stored types; a
    keyless table's with ``_dup`` numbering equal rows (all of them are in the chunk: the chunk key is
    one of their columns, so the chunk's ordinals are its partition's)."""
    stored = for_delta(with_snapshot_metadata(rows, schema, high_watermark))
    return with_dup(stored, schema.column_names) if schema.keyless else stored


@dataclass(frozen=True)
class BatchChunks:
    """What one snapshot task reads of one batch: its chunks, the columns the batch reads
    (``batch_schemas``) and the batch's read group (``engine.snapshot.jobs.read_group``)."""

    batch: Batch
    schema: TableSchema
    chunks: Sequence[Chunk]
    read_group: int = DEFAULT_GROUP_SIZE


def write_chunks(
    store: SnapshotStore,
    batch: Batch,
    attempt: str,
    part: int,
    config: ConnectionConfig,
    schema: TableSchema,
    chunks: Iterable[Chunk],
    server_id: int,
    read_group: int = DEFAULT_GROUP_SIZE,
) -> Iterator[ChunkResult]:
    """``write_batches`` of one batch."""
    yield from write_batches(store, attempt, part, config, [BatchChunks(batch, schema, list(chunks), read_group)],
                             server_id)


def write_batches(
    store: SnapshotStore, attempt: str, part: int, config: ConnectionConfig, batches: Sequence[BatchChunks],
    server_id: int,
) -> Iterator[ChunkResult]:
    """One Spark task's chunks of ``batches`` into one Parquet file of each batch (part ``part`` of
    ``attempt``); yields one result per chunk written (range, rows, LW, HW, file relative to the Delta table).

    The task reads all its batches through one source session (``cdc.source_session``: one control
    connection, opened once, closed when the task ends or fails) and ``cdc.chunk_reader.read_tables``: the
    chunks of several small tables are selected between one pair of watermarks and fixed up from one binlog
    pass, in groups of at most one read group's bytes. A batch's file is open from its first chunk written to
    its last."""
    batches = [b for b in batches if b.chunks]
    if not batches:
        return
    with SourceSession(config) as session:
        tables = [(ChunkReader(config, b.schema, server_id, group_size=b.read_group, session=session), b.chunks)
                  for b in batches]
        yield from _write(store, attempt, part, batches, _read(session, server_id, batches, tables))


def _read(session: SourceSession, server_id: int, batches: Sequence[BatchChunks],
          tables: Sequence[TableChunks]) -> Iterator[tuple[int, ChunkSnapshot]]:
    """The tables' chunks as ``read_tables`` reads them, each with its batch's index, a group ahead of the
    writing.

    The reader runs a group of chunks ahead in a thread of its own (``engine.snapshot.read_ahead``): the server sends
    the next chunks while these are written, so memory holds two groups of chunks, not one; the split sized a
    table's group so that both stay within one chunk_max_bytes, and a group of several tables' chunks weighs
    no more than one table's (``chunk_groups``), as the chunks ready ahead do. Batches of a read group of
    one (a table whose chunks may each be that large) are read one chunk at a time, none ahead, and a
    reader's memory stays what the production docs state (350 MiB + 5 x chunk_max_bytes at most)."""
    for alone, run in itertools.groupby(range(len(batches)), key=lambda i: batches[i].read_group == 1):
        indexes = list(run)
        snapshots = _shifted(read_tables(session, server_id, tables[indexes[0] : indexes[-1] + 1]), indexes[0])
        yield from snapshots if alone else read_ahead(snapshots, 1,
                                                      lambda item: Fraction(1, batches[item[0]].read_group))


def _shifted(snapshots: Iterator[tuple[int, ChunkSnapshot]], by: int) -> Iterator[tuple[int, ChunkSnapshot]]:
    for index, snapshot in snapshots:
        yield index + by, snapshot


def _write(store: SnapshotStore, attempt: str, part: int, batches: Sequence[BatchChunks],
           snapshots: Iterator[tuple[int, ChunkSnapshot]]) -> Iterator[ChunkResult]:
    """Each snapshot into its batch's file, opened at the batch's first chunk and closed after its last (or
    on a failure). Each result is yielded as its chunk is written, so that the driver's progress moves per
    chunk; a file only counts once the driver has every result and commits the batch."""
    left = [len(b.chunks) for b in batches]
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for index, snapshot in snapshots:
            todo = batches[index]
            started = time.perf_counter()
            rows = file_rows(snapshot.table, todo.schema, snapshot.high_watermark)
            writer = writers.get(index)
            if writer is None:  # its schema is file_schema's: the same file_rows made it, without a row
                path = store.part_path(todo.batch, attempt, part)
                store.lake.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
                writer = writers[index] = pq.ParquetWriter(path, rows.schema, filesystem=store.lake.fs,
                                                           **parquet_options(rows, SNAPSHOT_CONSTANTS))
            writer.write_table(rows)
            left[index] -= 1
            if not left[index]:
                writers.pop(index).close()
            yield ChunkResult(snapshot.chunk, snapshot.table.num_rows, snapshot.changed_keys, snapshot.low_watermark,
                              snapshot.high_watermark, part_file(todo.batch, attempt, part),
                              round(time.perf_counter() - started, 4))
    finally:
        for writer in writers.values():
            writer.close()


def refuse_keyless_rerun(store: SnapshotStore, batch: Batch) -> None:
    """A keyless table's committed batch is not replaced once the stream has captured its table: the new rows
    would be as of a later binlog position than the old ones, and the changelog's changes between the two
    would count twice in the multiset (``lake.write.multiset`` says why only a whole re-snapshot is exact)."""
    if store.read_manifest(batch) is None:
        return
    checkpoint = StreamStore(store.lake).read_checkpoint()
    if checkpoint is None or checkpoint.schema_of(batch.table) is None:
        return
    raise SnapshotStateError(
        f"{batch.label} of {batch.table}, a table without any key (a multiset of whole rows), was committed "
        f"before and the stream has captured changes of it since: replacing the batch's rows with rows read at a "
        f"later binlog position would count the changes between the two twice. Nothing was committed. To read "
        f"the table again, re-snapshot all of it: delete its folder "
        f"{store.lake.table(batch.table).folder} in the lake and run the DAG again"
    )


def commit_batch(
    store: SnapshotStore, batch: Batch, attempt: str, schema: TableSchema, results: list[ChunkResult],
    seconds: float,
) -> BatchManifest:
    """Commit the attempt whose every chunk is in ``results`` (from ``write_chunks``): one Delta
    transaction replacing the batch's partition, then its manifest."""
    results = sorted(results, key=lambda r: r.chunk.index)
    expected = list(range(batch.first_chunk, batch.last_chunk + 1))
    if [r.chunk.index for r in results] != expected:
        raise SnapshotJobError(f"{batch.label}: the attempt {attempt} wrote chunks "
                               f"{[r.chunk.index for r in results]}, not each of {expected} once; not committing")
    if schema.keyless:
        refuse_keyless_rerun(store, batch)
    files = sorted({r.file for r in results})
    table = store.lake.table(batch.table)
    written = [data_file(table, f) for f in files]
    version = replace_partition(
        table, batch.number, written, file_schema(schema),
        {"mysql_cdc.operation": "snapshot batch", "mysql_cdc.table": str(batch.table),
         "mysql_cdc.batch": str(batch.number), "mysql_cdc.attempt": attempt,
         "mysql_cdc.chunks": f"{batch.first_chunk}-{batch.last_chunk}"},
    )
    manifest = BatchManifest(batch, attempt, schema, tuple(results), sum(f.size for f in written), round(seconds, 3),
                             version)
    store.write_manifest(manifest)
    return manifest
