"""What one mapped snapshot task runs: a job of snapshot batches, of one table or of many.

A ``Batch`` is a run of chunks of one table and one partition of its current-state Delta table. Each
mapped task is one Spark application, whose start costs seconds, so a database of many small tables
must not cost a task per table: the split puts the batches still to snapshot into as few ``Job``s as
``rows_per_batch`` estimated rows a job allow, the rows spread evenly over them (:func:`plan_jobs`): small
tables together, a large table's batches (each already about that size) one a job. A job's Spark
application spreads all its chunks over its Spark tasks (:func:`spread_chunks`), then
commits each batch as a batch is committed: one Delta transaction replacing that batch's partition,
then its manifest. So clearing one mapped task re-runs and replaces exactly its batches' partitions,
and a batch of a table stays where it was planned.

The binlog server ids of a DAG run are the jobs' (``engine.snapshot.batch_readers``): each job's Spark
application runs ``readers_per_batch`` tasks (fewer for fewer chunks), and the run needs one id per such task plus the
stream's, whatever the number of tables.

A job travels as JSON, in the split's XCom and on ``spark-submit``'s command line, where Linux limits
one argument to 128 KiB: a job holds at most ``MAX_JOB_TABLES`` tables, so that its names fit.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import DEFAULT_GROUP_SIZE
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch

MAX_JOB_TABLES = 500
"""Tables in one job at most: names of up to 129 characters and the batches' numbers keep its JSON
under ~100 KB, within Linux's 128 KiB for one command-line argument."""


@dataclass(frozen=True)
class Job:
    """The snapshot batches one mapped task (one Spark application) reads and commits, with the binlog
    server ids of its Spark tasks.

    ``rows`` is each batch's estimated rows (what the job was filled by, and how its Spark application spreads the
    chunks over its tasks); ``read_groups`` how many of each batch's chunks its reader selects at once and
    reads ahead (:func:`read_group`; none given: ``DEFAULT_GROUP_SIZE`` each). ``first_reader`` and
    ``readers``: the split gives the job ``readers`` indexes of the connection's ``server_id`` range from
    ``first_reader`` on, and its Spark application runs at most that many tasks, task ``i`` reading with index
    ``first_reader + i``. They travel in the job's XCom dict, so a re-run of one cleared task keeps its
    ids."""

    batches: tuple[Batch, ...]
    rows: tuple[int, ...]
    first_reader: int | None = None
    readers: int | None = None
    read_groups: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.batches or len(self.rows) != len(self.batches):
            raise ValueError("a job holds at least one batch, and one row estimate per batch")
        if not self.read_groups:
            object.__setattr__(self, "read_groups", (DEFAULT_GROUP_SIZE,) * len(self.batches))
        if len(self.read_groups) != len(self.batches) or min(self.read_groups) < 1:
            raise ValueError(f"a job needs one read group of at least 1 per batch, not {self.read_groups}")

    @property
    def chunk_count(self) -> int:
        return sum(b.chunk_count for b in self.batches)

    @property
    def tables(self) -> list[TableId]:
        """The job's tables, each once, in the order of its batches."""
        return list(dict.fromkeys(b.table for b in self.batches))

    @property
    def label(self) -> str:
        """The mapped task's label: a batch's own (``shop.orders chunks 0-15``) for one batch; for more, the
        table (or the databases) and the counts, e.g. ``shop: 212 tables, 240 chunks``."""
        if len(self.batches) == 1:
            return self.batches[0].label
        tables = self.tables
        if len(tables) == 1:
            return f"{tables[0]}: {len(self.batches)} batches, {self.chunk_count} chunks"
        databases = ", ".join(dict.fromkeys(t.database for t in tables))
        return f"{databases}: {len(tables)} tables, {self.chunk_count} chunks"

    def with_readers(self, first_reader: int, readers: int) -> Job:
        return replace(self, first_reader=first_reader, readers=readers)

    def with_read_groups(self, groups: Mapping[TableId, int]) -> Job:
        """The job with each batch's read group its table's in ``groups``."""
        return replace(self, read_groups=tuple(groups[b.table] for b in self.batches))

    def to_dict(self) -> dict[str, Any]:
        """Compact: ``tables`` maps each table to its batches as ``[number, first chunk, last chunk, rows, read
        group]``."""
        tables: dict[str, list[list[int]]] = {}
        for batch, rows, group in zip(self.batches, self.rows, self.read_groups, strict=True):
            tables.setdefault(str(batch.table), []).append(
                [batch.number, batch.first_chunk, batch.last_chunk, rows, group])
        return {"label": self.label, "first_reader": self.first_reader, "readers": self.readers,
                "chunks": self.chunk_count, "tables": tables}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        """Refuses what a split task of an earlier version returned: the dict of one batch, or batches without
        their read group."""
        if "tables" not in d or any(len(item) != 5 for items in d["tables"].values() for item in items):
            raise SnapshotStateError(
                f"the snapshot task was given {str(d)[:200]!r}, not a job of batches of this version (no 'tables', "
                f"or batches without their read group): it comes from a split task of an older version of this "
                f"provider; clear the split task of this DAG run with its downstream tasks (or trigger a new run) "
                f"so that it jobs the batches again"
            )
        batches, rows, groups = [], [], []
        for name, items in d["tables"].items():
            table = TableId.parse(name)
            for number, first, last, estimate, group in items:
                batches.append(Batch(table, number, first, last))
                rows.append(estimate)
                groups.append(group)
        return cls(tuple(batches), tuple(rows), d.get("first_reader"), d.get("readers"), tuple(groups))


def read_group(chunk_rows: int, row_bytes: int, chunk_max_bytes: int, wide: bool) -> int:
    """How many chunks of a table its snapshot reader selects at once and reads ahead
    (``engine.snapshot.snapshot_batch.write_chunks``): as many as keep the two groups a reader holds (the one being
    written, the next one read) within one ``chunk_max_bytes``, at most ``DEFAULT_GROUP_SIZE``. So a reader
    holds no more than it would for one chunk of ``chunk_max_bytes`` read alone (the memory the production
    docs state), and a table whose chunks are each about that large (wide rows) reads one chunk at a time,
    none ahead. ``chunk_rows`` is the split's rows a chunk, ``row_bytes`` the table's average
    (``discovery.average_row_bytes``); unknown (0), a table with wide columns (``discovery.wide_columns``),
    whose chunks may be that large, reads one at a time, any other ``DEFAULT_GROUP_SIZE``."""
    if row_bytes <= 0:
        return 1 if wide else DEFAULT_GROUP_SIZE
    return max(1, min(DEFAULT_GROUP_SIZE, chunk_max_bytes // (2 * max(1, chunk_rows) * row_bytes)))


def batch_rows(batch: Batch, planned_chunks: int, table_rows: int, chunk_size: int) -> int:
    """A batch's estimated rows: its share of the table's row estimate (``information_schema``'s
    ``TABLE_ROWS``), at most ``chunk_size`` a chunk, at least one row; without an estimate (0, e.g. right
    after a bulk load) ``chunk_size`` a chunk, the most its bounded chunks hold."""
    most = batch.chunk_count * chunk_size
    if table_rows <= 0:
        return most
    return max(1, min(most, math.ceil(table_rows * batch.chunk_count / max(1, planned_chunks))))


def plan_jobs(batches: Sequence[Batch], rows: Sequence[int], rows_per_job: int, max_jobs: int) -> list[Job]:
    """``batches`` packed into as few jobs as ``rows_per_job`` estimated rows (``rows``, one per batch) and
    ``MAX_JOB_TABLES`` tables a job allow, their rows spread evenly over the jobs; a batch of more rows
    than that has a job of its own. When the rows ask for more than ``max_jobs`` jobs, they are spread
    over ``max_jobs`` jobs of about equal rows instead (as the table limit allows).

    Spreading evenly matters as much as the count: filling one job after another left a last job of a
    few tables (1,000 tables of 15M rows made jobs of 10M, 5M and 0.1M rows, a third Spark application
    and its start for 1% of the rows). Each job keeps its batches in the order given (the order their
    chunks should be read: an unbounded chunk first), and the jobs are in the order of their first batch."""
    if not batches:
        return []
    weights = [max(1, r) for r in rows]
    count = math.ceil(sum(weights) / rows_per_job)
    budget: int | None = rows_per_job
    if count > max_jobs:  # fewer, larger jobs: rows spread over max_jobs, no row budget
        count, budget = max_jobs, None
    tables = len({b.table for b in batches})
    jobs = _spread(batches, weights, max(count, math.ceil(tables / MAX_JOB_TABLES)), budget)
    return [Job(tuple(batches[i] for i in job), tuple(rows[i] for i in job)) for job in jobs]


def _spread(batches: Sequence[Batch], weights: Sequence[int], count: int, budget: int | None) -> list[list[int]]:
    """Indexes of ``batches`` in jobs: the heaviest batch first, each into the job with the fewest rows that
    takes it (its rows within ``budget``, its table among the job's or the job under ``MAX_JOB_TABLES``
    tables); a batch no job takes opens a job of its own. ``count`` jobs to start with."""
    jobs: list[list[int]] = [[] for _ in range(count)]
    tables: list[set[TableId]] = [set() for _ in range(count)]
    loads = [(0, p) for p in range(count)]
    for i in sorted(range(len(batches)), key=lambda i: (-weights[i], i)):
        weight, table = weights[i], batches[i].table
        refused = []
        while loads:
            load, p = heapq.heappop(loads)
            if not jobs[p] or ((budget is None or load + weight <= budget)
                                and (table in tables[p] or len(tables[p]) < MAX_JOB_TABLES)):
                break
            refused.append((load, p))
        else:
            load, p = 0, len(jobs)
            jobs.append([])
            tables.append(set())
        jobs[p].append(i)
        tables[p].add(table)
        for item in (*refused, (load + weight, p)):
            heapq.heappush(loads, item)
    return sorted((sorted(job) for job in jobs if job), key=lambda job: job[0])


def spread_chunks(job: Job, chunks: Sequence[Sequence[Chunk]], tasks: int) -> list[list[tuple[int, Chunk]]]:
    """The chunks of the job's batches (``chunks[i]``: batch ``i``'s, in the order its Spark application reads them)
    over ``tasks`` Spark tasks, as ``(batch index, chunk)`` pairs: each chunk weighs its batch's estimated
    rows per chunk, and goes to the task with the fewest rows so far, the heaviest first, so that a large
    table's chunks and many small tables' share the tasks evenly. A task reads its chunks batch by batch
    (one chunk reader a table), each batch's in the order given (an unbounded last chunk first).

    A batch's chunks go to the tasks in runs of consecutive ones, up to the batch's read group (fewer
    when the batch has fewer chunks than tasks x group), so that a reader selects a group of neighbouring
    chunks as one key range (``cdc.arrow_select.ArrowSelect.read_many``) rather than every other chunk."""
    items = []
    for b, cs in enumerate(chunks):
        weight, run = max(1.0, job.rows[b] / max(1, len(cs))), max(1, min(job.read_groups[b], len(cs) // tasks))
        items += [(weight * len(cs[p : p + run]), b, p, cs[p : p + run]) for p in range(0, len(cs), run)]
    loads = [(0.0, task) for task in range(tasks)]
    shares: list[list[tuple[int, int, Sequence[Chunk]]]] = [[] for _ in range(tasks)]
    for weight, b, position, part in sorted(items, key=lambda item: (-item[0], item[1], item[2])):
        load, task = heapq.heappop(loads)
        shares[task].append((b, position, part))
        heapq.heappush(loads, (load + weight, task))
    return [[(b, chunk) for b, _, part in sorted(share, key=lambda item: (item[0], item[1])) for chunk in part]
            for share in shares]
