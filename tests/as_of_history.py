"""A lake of ``shop.orders`` with a known history, and its rows as of each position, for the as-of reads
(``read_table`` and the Spark views).

Two snapshot batches (``snapshot``) and two stream batches (``stream``); ``merge`` MERGEs the stream's
batches up to one into the current table, which must not change what a read as of any position gives
(``EXPECTED``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest, ChunkResult
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import unmerged_changes
from airflow_provider_mysqlcdc.lake.write.merge import merge_changes
from tests.lakes import ORDERS, SCHEMA, Lakes, delete, insert, off, transaction, update

CHUNKS = [Chunk(ORDERS, 0, None, 10), Chunk(ORDERS, 1, 10, None)]
SNAPSHOT = [(1, "a", 1), (2, "b", 2), (10, "j", 10), (11, "k", 11)]


def snapshot(lake: Lakes) -> None:
    """Two batches, one chunk each, with high watermarks 1:100 and 1:200 and their manifests."""
    plan = lake.plan(CHUNKS)
    for batch, rows, hw in ((0, SNAPSHOT[:2], off(1, 100)), (1, SNAPSHOT[2:], off(1, 200))):
        lake.current(rows, hw, batch=batch)
        version = DeltaTable(table_uri(lake.base_uri, ORDERS)).version()
        chunk = ChunkResult(plan.chunks[batch], len(rows), 0, off(1, 50), hw, f"_batch={batch}/part.parquet")
        lake.snapshots.write_manifest(BatchManifest(plan.batches[batch], "a1", SCHEMA, (chunk,), 1, 1.0, version))


def stream(lake: Lakes) -> None:
    """Batch 1 (to 1:400): at 1:250 key 1 updated, then 3 inserted (two row events of one transaction);
    batch 2 (to 1:600): at 1:450 key 10 deleted and key 2 changed to 4; at 1:500 key 1 updated again."""
    lake.commit_stream(1, off(1, 400), (SCHEMA, transaction(1, 250, *update((1, "a", 1), (1, "b", 1)),
                                                            insert((3, "c", 3)), ts_ms=5_000)))
    lake.commit_stream(2, off(1, 600),
                       (SCHEMA, transaction(1, 450, delete((10, "j", 10)), *update((2, "b", 2), (4, "b", 2)),
                                            ts_ms=7_000)),
                       (SCHEMA, transaction(1, 500, *update((1, "b", 1), (1, "c", 1)), ts_ms=9_000)))


EXPECTED: list[tuple[Any, list[tuple[Any, ...]]]] = [
    (off(1, 200), SNAPSHOT),
    (off(1, 250), SNAPSHOT),  # the transaction starting there is after it
    (off(1, 250, 0, 1), [(1, "b", 1), *SNAPSHOT[1:]]),  # inside it: the update taken, the insert not yet
    (off(1, 400), [(1, "b", 1), (2, "b", 2), (3, "c", 3), (10, "j", 10), (11, "k", 11)]),
    ("mysql-bin.000001:450", [(1, "b", 1), (2, "b", 2), (3, "c", 3), (10, "j", 10), (11, "k", 11)]),
    (off(1, 500), [(1, "b", 1), (3, "c", 3), (4, "b", 2), (11, "k", 11)]),
    (off(1, 600), [(1, "c", 1), (3, "c", 3), (4, "b", 2), (11, "k", 11)]),
    (6_000, [(1, "b", 1), (2, "b", 2), (3, "c", 3), (10, "j", 10), (11, "k", 11)]),
    (dt.datetime.fromtimestamp(7.5, dt.UTC), [(1, "b", 1), (3, "c", 3), (4, "b", 2), (11, "k", 11)]),
]


def merge(lake: Lakes, through: int) -> None:
    """The stream's MERGE of every batch up to ``through`` into the current table (each key to its batch)."""
    changes = unmerged_changes(Lake.at(lake.base_uri), ORDERS, SCHEMA, -1, through)
    batches = pa.array([0 if k < 10 else 1 for k in changes.column("id").to_pylist()], pa.int32())
    merge_changes(Lake.at(lake.base_uri).table(ORDERS).current, changes.append_column(BATCH_COLUMN, batches), ["id"],
                  through)
