"""Server-id ranges: parsing, validation, the clash message, and distinct ids for every binlog reader of
a DAG run (all tables, all batches packed into jobs, every Spark task, the stream), one per job's task
whatever the number of tables, or a clear error naming the range to set."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.server_id import (
    ServerIdRange,
    assign_snapshot_readers,
    explain_server_id_clash,
)
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import assign_readers, job_server_id, job_tasks
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job, plan_jobs
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch, group_batches


def test_parse_and_allocate() -> None:
    ids = ServerIdRange.parse("5400-5408")
    assert (ids.start, ids.end, len(ids), str(ids)) == (5400, 5408, 9, "5400-5408")
    assert [ids.allocate(i) for i in range(9)] == list(range(5400, 5409))
    assert str(ServerIdRange.parse(" 7 ")) == "7" and ServerIdRange.parse(4294967295).end == 2**32 - 1
    with pytest.raises(InvalidOptionError, match="has only 9: widen the connection's server_id"):
        ids.allocate(9)


@pytest.mark.parametrize("bad", ["", "abc", "0", "5-3", "1-4294967296", "1,2"])
def test_bad_ranges_are_refused(bad: str) -> None:
    with pytest.raises(InvalidOptionError, match="server_id"):
        ServerIdRange.parse(bad)


@pytest.mark.parametrize(
    "text",
    [
        # MySQL before 8.0.26 (error 1236)
        "A slave with the same server_uuid/server_id as this slave has connected to the master; the first event "
        "'mysql-bin.000001' at 4",
        # MySQL 8.0.26+
        "A replica with the same server_uuid/server_id as this replica has connected to the source; the first event",
        # MariaDB 10.11 (error 4052, measured): the *older* reader gets it when a newer one takes its id
        "A slave with the same server_uuid/server_id is already connected; the first event 'mysql-bin.000001' at 4, "
        "the last event read from 'mysql-bin.000001' at 537",
    ],
)
def test_clash_message(text: str) -> None:
    error = explain_server_id_clash(text, 5401, ServerIdRange.parse("5400-5408"))
    assert error is not None and "server id 5401" in str(error) and "5400-5408" in str(error)


def test_other_errors_are_not_clashes() -> None:
    assert explain_server_id_clash("Could not find first log file name", 5401, ServerIdRange(1, 1)) is None


# -- every binlog reader of a DAG run gets its own id ---------------------------------------------

ROWS_PER_CHUNK = 1_000


def _run_of(tables: dict[str, int], chunks_per_batch: int, readers_per_batch: int,
            ids: ServerIdRange) -> list[Job]:
    """The packs a split task returns for tables of ``tables[name]`` chunks of ``ROWS_PER_CHUNK`` rows,
    batches of ``chunks_per_batch`` chunks packed into jobs of as many rows, as it assigns them."""
    pending = [b for name, n in tables.items() for b in group_batches(
        TableId.parse(name), [Chunk(TableId.parse(name), i, None, None) for i in range(n)], chunks_per_batch)]
    packs = plan_jobs(pending, [b.chunk_count * ROWS_PER_CHUNK for b in pending],
                         chunks_per_batch * ROWS_PER_CHUNK, max_jobs=64)
    # through XCom and back, as the mapped snapshot tasks get them
    return [Job.from_dict(p.to_dict()) for p in assign_readers(packs, ids, readers_per_batch)]


@pytest.mark.parametrize(("tables", "chunks_per_batch", "readers_per_batch"), [
    ({"shop.orders": 25, "shop.customers": 9, "shop.products": 1, "crm.accounts": 4}, 7, 2),
    ({"shop.orders": 25, "shop.customers": 9, "shop.products": 1, "crm.accounts": 4}, 3, 4),
    ({f"db.t{i}": 3 for i in range(12)}, 1, 3),  # batch numbers restart per table: 0, 1, 2 in every table
])
def test_readers_of_all_tables_and_batches_of_a_run_are_distinct(
    tables: dict[str, int], chunks_per_batch: int, readers_per_batch: int
) -> None:
    ids = ServerIdRange.parse("5400-5500")
    packs = _run_of(tables, chunks_per_batch, readers_per_batch, ids)
    batches = [b for p in packs for b in p.batches]
    assert len({b.table for b in batches}) == len(tables) and max(b.number for b in batches) > 0
    readers = [job_server_id(p, ids, task) for p in packs for task in range(job_tasks(p))]
    stream = ids.stream_id
    assert len(readers) == len(set(readers)) and stream not in readers
    assert readers == list(range(5400, 5400 + len(readers)))  # packed from the first id, in the order returned
    # at most readers_per_batch tasks a job, one per chunk at most
    assert all(job_tasks(p) == min(readers_per_batch, p.chunk_count) for p in packs)


def test_a_range_that_fits_exactly_is_enough() -> None:
    ids = ServerIdRange.parse("5400-5408")  # the default: 8 snapshot readers + the stream
    packs = _run_of({"shop.orders": 8}, 2, 2, ids)
    assert [job_server_id(p, ids, t) for p in packs for t in range(job_tasks(p))] == list(range(5400, 5408))


def test_the_ids_follow_the_jobs_not_the_tables() -> None:
    """A database of 500 one-chunk tables is one job: the default range serves it (one id per table
    would need 1,001)."""
    ids = ServerIdRange.parse("5400-5408")
    packs = _run_of({f"shop.t{i}": 1 for i in range(500)}, 1_000, 2, ids)
    assert len(packs) == 1 and len(packs[0].tables) == 500
    assert [job_server_id(packs[0], ids, t) for t in range(job_tasks(packs[0]))] == [5400, 5401]


def test_a_range_too_small_for_the_run_names_the_extra_and_a_range_that_fits() -> None:
    ids = ServerIdRange.parse("5400-5408")
    with pytest.raises(InvalidOptionError) as error:
        _run_of({"shop.orders": 25, "shop.customers": 5}, 7, 2, ids)  # 7+7+7+4 and 5 chunks: 5 jobs
    message = str(error.value)
    assert "the server_id extra of the connection gives 9 server ids (5400-5408)" in message
    assert "11 binlog readers at once" in message  # 10 for 5 jobs x 2 readers, + 1 for the stream
    assert "10 for its 5 snapshot jobs (up to readers_per_batch=2 Spark tasks each" in message
    assert "+ 1 for the stream" in message and "lower readers_per_batch" in message
    assert '"server_id": "5400-5410"' in message
    ServerIdRange.parse("5400-5410")  # and the range it suggests is valid and enough
    assert _run_of({"shop.orders": 25, "shop.customers": 5}, 7, 2, ServerIdRange.parse("5400-5410"))


def test_the_suggested_range_stays_within_the_id_space() -> None:
    top = ServerIdRange(2**32 - 3, 2**32 - 1)
    with pytest.raises(InvalidOptionError, match=f'"server_id": "{2**32 - 5}-{2**32 - 1}"'):
        assign_snapshot_readers(top, [2, 2], 2)
    with pytest.raises(InvalidOptionError, match="extra of the connection 'mysql_cdc_default' gives 3 server ids"):
        assign_snapshot_readers(top, [2, 2], 2, "mysql_cdc_default")


def test_a_batch_from_an_older_split_is_read_but_not_run() -> None:
    old = {"table": "shop.orders", "number": 1, "first_chunk": 7, "last_chunk": 13, "batch_id": "shop.orders:1",
           "label": "shop.orders chunks 7-13", "first_reader": 0, "readers": 2}
    batch = Batch.from_dict(old)  # manifests of older versions keep such dicts
    assert batch == Batch(TableId("shop", "orders"), 1, 7, 13)
    with pytest.raises(SnapshotStateError, match="not a job of batches.*older version.*clear the split task"):
        Job.from_dict(old)  # a mapped task of an older split's XCom
    pack = Job((batch,), (50_000,))
    with pytest.raises(SnapshotStateError, match="no binlog server ids assigned.*clear the split task"):
        job_tasks(pack)
    with pytest.raises(SnapshotStateError):
        job_server_id(pack, ServerIdRange.parse("5400-5408"), 0)


def test_a_job_runs_no_more_tasks_than_it_has_ids() -> None:
    pack = Job((Batch(TableId("shop", "orders"), 0, 0, 9),), (80_000,), first_reader=4, readers=3)
    assert (job_tasks(pack), job_tasks(pack, 2)) == (3, 2)
    with pytest.raises(InvalidOptionError, match="partitions=4 .* at most 3 tasks.*readers_per_batch"):
        job_tasks(pack, 4)
    ids = ServerIdRange.parse("5400-5408")
    assert [job_server_id(pack, ids, t) for t in range(3)] == [5404, 5405, 5406]
    with pytest.raises(InvalidOptionError, match="readers_per_batch"):
        job_server_id(pack, ids, 3)


def test_a_range_narrowed_after_the_split_is_refused_not_shared_with_the_stream() -> None:
    pack = Job((Batch(TableId("shop", "orders"), 0, 0, 9),), (80_000,), first_reader=6, readers=2)
    assert job_server_id(pack, ServerIdRange.parse("5400-5408"), 1) == 5407
    with pytest.raises(InvalidOptionError, match="server_id extra changed after the split task.*clear the split"):
        job_server_id(pack, ServerIdRange.parse("5400-5407"), 1)  # 5407 is now the stream's
