"""Packing snapshot batches into mapped tasks (``engine.snapshot.jobs``): small tables share a job up to the
rows budget, a large table's batches each fill one, the rows are spread evenly over the fewest jobs,
``max_batches`` bounds the jobs, the labels name what a job holds, its chunks are spread evenly over its Spark
tasks in runs of its read group (sized by the rows' bytes), and a job survives XCom and the command line."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot.jobs import (
    MAX_JOB_TABLES,
    Job,
    batch_rows,
    plan_jobs,
    read_group,
    spread_chunks,
)
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, group_batches

CHUNK = 8_096


def batches_of(table: str, chunks: int, chunks_per_batch: int) -> list[Batch]:
    table_id = TableId.parse(table)
    return group_batches(table_id, [Chunk(table_id, i, None, None) for i in range(chunks)], chunks_per_batch)


def test_small_tables_share_a_job_and_a_large_tables_batches_each_fill_one() -> None:
    big = batches_of("shop.orders", 40, 10)  # 4 batches of ~80,000 rows
    small = [b for i in range(60) for b in batches_of(f"shop.t{i:02d}", 1, 10)]  # 60 tables of 1,000 rows
    batches = big + small
    rows = [10 * CHUNK] * 4 + [1_000] * 60
    jobs = plan_jobs(batches, rows, rows_per_job=10 * CHUNK, max_jobs=64)
    assert [len(p.batches) for p in jobs] == [1, 1, 1, 1, 60]
    assert [p.label for p in jobs[:4]] == [f"shop.orders chunks {c}-{c + 9}" for c in (0, 10, 20, 30)]
    assert jobs[4].label == "shop: 60 tables, 60 chunks"
    assert every_batch_once_in_order(jobs, batches)
    assert jobs[4].rows == (1_000,) * 60


def test_the_budget_closes_a_job_before_it_overflows() -> None:
    batches = [b for i in range(10) for b in batches_of(f"crm.t{i}", 1, 1)]
    jobs = plan_jobs(batches, [300] * 10, rows_per_job=1_000, max_jobs=64)
    assert [len(p.batches) for p in jobs] == [3, 3, 3, 1]
    assert all(sum(p.rows) <= 1_000 for p in jobs)


def test_tables_of_several_databases_are_named_by_their_databases() -> None:
    batches = batches_of("shop.a", 1, 1) + batches_of("crm.b", 2, 2) + batches_of("shop.c", 1, 1)
    (job,) = plan_jobs(batches, [10, 20, 10], rows_per_job=1_000, max_jobs=64)
    assert job.label == "shop, crm: 3 tables, 4 chunks" and job.tables == [TableId("shop", "a"),
                                                                             TableId("crm", "b"), TableId("shop", "c")]


def test_several_batches_of_one_table_in_one_job_are_named_by_the_table() -> None:
    (job,) = plan_jobs(batches_of("shop.orders", 6, 2), [10, 10, 10], rows_per_job=1_000, max_jobs=64)
    assert job.label == "shop.orders: 3 batches, 6 chunks"


def test_max_batches_bounds_the_jobs() -> None:
    batches = [b for i in range(100) for b in batches_of(f"shop.t{i}", 1, 1)]
    rows = [1_000 + 37 * i for i in range(100)]
    jobs = plan_jobs(batches, rows, rows_per_job=1_000, max_jobs=7)  # alone, each would be a job
    assert len(jobs) == 7 and every_batch_once_in_order(jobs, batches)
    # about equal shares: none more than the average and one batch
    assert max(sum(p.rows) for p in jobs) <= sum(rows) / 7 + max(rows)


def every_batch_once_in_order(jobs: list[Job], batches: list[Batch]) -> bool:
    """Every batch in one job, each job's in the order given, the jobs in the order of their first."""
    position = {b: i for i, b in enumerate(batches)}
    orders = [[position[b] for b in p.batches] for p in jobs]
    return (sorted(i for order in orders for i in order) == list(range(len(batches)))
            and all(order == sorted(order) for order in orders)
            and [o[0] for o in orders] == sorted(o[0] for o in orders))


def test_a_database_of_many_tables_is_spread_evenly_over_the_fewest_jobs() -> None:
    """1,000 tables of 15M rows (10 of 500,000): two jobs of about equal rows, not 10M, 5M and a last one of
    a few tables (what filling one job after another made: a third Spark application for 1% of the rows)."""
    big = [b for i in range(10) for b in batches_of(f"many.t{i:04d}", 62, 2_000)]
    small = [b for i in range(10, 1_000) for b in batches_of(f"many.t{i:04d}", 2, 2_000)]
    rows = [500_000] * 10 + [1_000 + (i * 7_919) % 19_000 for i in range(990)]
    jobs = plan_jobs(big + small, rows, rows_per_job=10_000_000, max_jobs=64)
    assert len(jobs) == 2 and every_batch_once_in_order(jobs, big + small)
    assert [len(p.tables) for p in jobs] == [MAX_JOB_TABLES, MAX_JOB_TABLES]
    assert [sum(p.rows[:1]) for p in jobs] == [500_000, 500_000]  # the large tables split between them
    heavier, lighter = sorted(sum(p.rows) for p in jobs)[::-1]
    assert heavier <= 10_000_000 and heavier - lighter <= 500_000


def test_a_job_holds_at_most_max_job_tables_tables() -> None:
    batches = [b for i in range(MAX_JOB_TABLES + 10) for b in batches_of(f"shop.t{i}", 1, 1)]
    jobs = plan_jobs(batches, [1] * len(batches), rows_per_job=10**9, max_jobs=64)
    assert [len(p.tables) for p in jobs] == [255, 255]  # as few jobs as the limit allows, evenly


def test_a_job_of_the_largest_tables_fits_one_command_line_argument() -> None:
    """Linux takes one argument of 128 KiB at most: the job's JSON on spark-submit's command line."""
    names = [f"{'d' * 64}.{'t' * 60}{i:04d}" for i in range(MAX_JOB_TABLES)]
    batches = [b for name in names for b in batches_of(name, 1, 1)]
    (job,) = plan_jobs(batches, [1] * len(batches), rows_per_job=10**9, max_jobs=64)
    text = json.dumps(job.with_readers(0, 2).to_dict(), separators=(",", ":"))
    assert len(text.encode()) < 128 * 1024


def test_a_job_through_xcom_is_the_same_job() -> None:
    batches = batches_of("shop.orders", 5, 2) + batches_of("crm.accounts", 1, 1)
    job = Job(tuple(batches), (16_000, 16_000, 8_000, 300), first_reader=2, readers=2).with_read_groups(
        {TableId("shop", "orders"): 16, TableId("crm", "accounts"): 1})
    back = Job.from_dict(json.loads(json.dumps(job.to_dict())))
    assert back == job and back.label == job.label == "shop, crm: 2 tables, 6 chunks"
    assert back.read_groups == (16, 16, 16, 1)
    assert job.to_dict()["chunks"] == 6


def test_a_job_without_read_groups_from_an_older_split_is_refused() -> None:
    older = {"label": "shop.orders chunks 0-1", "first_reader": 0, "readers": 2, "chunks": 2,
             "tables": {"shop.orders": [[0, 0, 1, 16_000]]}}
    with pytest.raises(SnapshotStateError, match="without their read group.*clear the split task"):
        Job.from_dict(older)


MIB = 1024 * 1024


@pytest.mark.parametrize(("chunk_rows", "row_bytes", "wide", "expected"), [
    (CHUNK, 160, True, 16),  # narrow rows beside a TEXT column: 1.3 MB chunks, the most a group holds
    (CHUNK, 2_000, False, 2),  # 16 MB chunks: two groups of two within 64 MiB
    (CHUNK, 4_200, True, 1),  # 34 MB chunks: one at a time, none ahead
    (10, 6 * MIB, True, 1),  # chunks of 10 rows of 6 MB: each about chunk_max_bytes
    (CHUNK, 0, False, 16),  # rows of unknown size, no wide column: the reader's group
    (CHUNK, 0, True, 1),  # rows of unknown size beside wide columns: one at a time
])
def test_a_read_group_keeps_two_groups_within_chunk_max_bytes(chunk_rows: int, row_bytes: int, wide: bool,
                                                               expected: int) -> None:
    assert read_group(chunk_rows, row_bytes, 64 * MIB, wide) == expected


def test_no_empty_job() -> None:
    assert plan_jobs([], [], 10, 10) == []
    with pytest.raises(ValueError, match="at least one batch"):
        Job((), ())


@pytest.mark.parametrize(("table_rows", "expected"), [
    (0, 3 * CHUNK),  # no estimate (right after a bulk load): the most its chunks hold
    (120, 36),  # its share of the table's estimate: 3 of 10 chunks
    (10**9, 3 * CHUNK),  # an estimate above what the chunks hold: at most chunk_size a chunk
    (1, 1),  # at least one row
])
def test_batch_rows_are_the_tables_estimate_shared_by_chunks(table_rows: int, expected: int) -> None:
    (batch,) = batches_of("shop.orders", 3, 3)
    assert batch_rows(batch, planned_chunks=10, table_rows=table_rows, chunk_size=CHUNK) == expected


def test_a_jobs_chunks_are_spread_evenly_over_its_tasks() -> None:
    big = batches_of("shop.orders", 8, 8)
    small = [b for i in range(40) for b in batches_of(f"shop.t{i:02d}", 1, 1)]
    job = Job(tuple(big + small), (8 * CHUNK, *([CHUNK // 2] * 40)))
    chunks = [[Chunk(b.table, i, None, None) for i in range(b.first_chunk, b.last_chunk + 1)] for b in job.batches]
    shares = spread_chunks(job, chunks, 2)
    weights = [sum(CHUNK if n == 0 else CHUNK // 2 for n, _ in share) for share in shares]
    assert sorted((str(c.table), c.index) for share in shares for _, c in share) == \
        sorted((str(c.table), c.index) for cs in chunks for c in cs)
    assert abs(weights[0] - weights[1]) <= CHUNK  # 8 large chunks and 40 half-size ones: 6 chunks' rows each
    for share in shares:  # batch by batch, each batch's chunks in the order given
        numbers = [n for n, _ in share]
        assert numbers == sorted(numbers)
        assert all(a.index < b.index for (n, a), (m, b) in zip(share, share[1:], strict=False) if n == m)


def test_a_large_batch_goes_to_the_tasks_in_runs_of_neighbouring_chunks() -> None:
    (batch,) = batches_of("shop.orders", 100, 100)
    job = Job((batch,), (100 * CHUNK,))
    chunks = [Chunk(batch.table, i, i * 10, i * 10 + 10) for i in range(100)]
    shares = spread_chunks(job, [chunks], 2)
    # runs of 16 (the chunk reader's group), the heaviest first: 0-15, 32-47, 64-79 and 96-99 to one task
    assert [[c.index for _, c in share] for share in shares] == [
        [*range(0, 16), *range(32, 48), *range(64, 80), *range(96, 100)],
        [*range(16, 32), *range(48, 64), *range(80, 96)],
    ]


def test_a_batchs_chunks_go_to_the_tasks_in_runs_of_its_read_group() -> None:
    (batch,) = batches_of("shop.orders", 20, 20)
    job = Job((batch,), (20 * CHUNK,), read_groups=(4,))
    chunks = [Chunk(batch.table, i, i * 10, i * 10 + 10) for i in range(20)]
    shares = spread_chunks(job, [chunks], 2)
    assert [[c.index for _, c in share] for share in shares] == [
        [*range(0, 4), *range(8, 12), *range(16, 20)], [*range(4, 8), *range(12, 16)]]


def test_an_unbounded_chunk_stays_first_of_its_batch_in_its_task() -> None:
    (batch,) = batches_of("shop.orders", 4, 4)
    job = Job((batch,), (4 * CHUNK,))
    table = batch.table
    order = [Chunk(table, 3, 300, None), Chunk(table, 0, None, 100), Chunk(table, 1, 100, 200),
             Chunk(table, 2, 200, 300)]
    (share,) = spread_chunks(job, [order], 1)
    assert [c.index for _, c in share] == [3, 0, 1, 2]
