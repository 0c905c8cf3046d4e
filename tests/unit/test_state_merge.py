"""Which partition of the current state a changed key belongs to: the snapshot batch whose chunks
hold it, so that a re-run of one batch (which replaces its partition) replaces exactly its keys."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake

ORDERS = TableId("shop", "orders")
SCHEMA = TableSchema(ORDERS, (Column("id", "int", "int(11)", nullable=False),), ("id",), "id")


def plan_with_chunk_ends(ends: list[int], chunks_per_batch: int) -> Plan:
    """Chunks [-inf, e0), [e0, e1), ..., [e_last, +inf), batched ``chunks_per_batch`` at a time."""
    bounds = [None, *ends, None]
    chunks = [Chunk(ORDERS, i, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    return Plan(SCHEMA, chunks, group_batches(ORDERS, chunks, chunks_per_batch))


def test_a_key_belongs_to_the_batch_of_its_chunk_with_half_open_bounds(tmp_path: Path) -> None:
    base_uri = str(tmp_path / "lake")
    # chunks (-inf,10) [10,20) | [20,30) [30,40) | [40,+inf): three batches
    SnapshotStore(Lake.at(base_uri)).write_plan(plan_with_chunk_ends([10, 20, 30, 40], chunks_per_batch=2))
    merger = StateMerger(Lake.at(base_uri), control=None)  # integer keys need no server for their order
    found = merger._batch_ranges(ORDERS, SCHEMA)
    assert found is not None and found[0] == "id"
    keys = pa.table({"id": pa.array([-5, 0, 19, 20, 29, 39, 40, 10**12, None], pa.int64())})
    assert merger._batches(ORDERS, SCHEMA, keys) == [0, 0, 0, 1, 1, 1, 2, 2, 0]


def test_a_table_without_snapshot_is_one_partition(tmp_path: Path) -> None:
    assert StateMerger(Lake.at(str(tmp_path / "lake")), control=None)._batch_ranges(ORDERS, SCHEMA) is None


def test_a_round_over_many_tables_logs_one_line(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """Each table's MERGE at INFO for a few tables; past ``ROUND_DETAIL_TABLES``, one line for the round (each
    table's at DEBUG), with the totals."""
    import logging

    from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
    from airflow_provider_mysqlcdc.engine.stream.state_merge import ROUND_DETAIL_TABLES
    from airflow_provider_mysqlcdc.lake.changelog import changes_table
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    def merged_lines(tables: int) -> list[str]:
        lake = Lake.at(str(tmp_path / f"lake-{tables}"))
        schemas = {s.id: s for s in (TableSchema(TableId("shop", f"t{i}"), SCHEMA.columns, ("id",), "id")
                                     for i in range(tables))}
        store, at = StreamStore(lake), BinlogOffset("mysql-bin.000001", 100)
        checkpoint = Checkpoint(0, BinlogOffset("mysql-bin.000001", 4), schemas)
        store.commit(checkpoint, {})
        checkpoint.advance(1, at)
        store.commit(checkpoint, {t: [changes_table([ChangeRecord(ChangeKind.INSERT, t, (k,), at, 1_000)
                                                     for k in range(3)], s)] for t, s in schemas.items()})
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="airflow_provider_mysqlcdc.engine.stream.state_merge"):
            assert StateMerger(lake, control=None).merge(checkpoint) == dict.fromkeys(schemas, 3)
        return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]

    few = merged_lines(2)
    assert len(few) == 2 and all(line.startswith("merged 3 changes of shop.t") for line in few)
    (line,) = merged_lines(ROUND_DETAIL_TABLES + 1)
    assert line.startswith(f"merged {3 * (ROUND_DETAIL_TABLES + 1)} changes of {ROUND_DETAIL_TABLES + 1} tables")
    assert f"{3 * (ROUND_DETAIL_TABLES + 1)} inserted, 0 updated, 0 deleted" in line
