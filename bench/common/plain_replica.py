"""A replica made without Spark or Airflow, for the benchmarks that compare something with its making.

``snapshot``: each batch of the plan is read as its Spark job reads it, by the engine's own functions: its chunks in
``PARTS`` contiguous parts, one after the other (what the job's tasks do in parallel), ``write_chunks`` per
part, then ``commit_batch``. Spark's start (~10-30 s a job) is left out. ``catch_up``: the stream as the
operator runs it, started, caught up with the server and its changes merged.
"""

from __future__ import annotations

import time
import uuid

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_chunks
from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake

PARTS = 2


def snapshot(config: ConnectionConfig, plan: Plan, base_uri: str) -> float:
    """Every batch of ``plan`` into the lake at ``base_uri``; the seconds it took."""
    store = SnapshotStore(Lake.at(base_uri))
    store.write_plan(plan)
    started = time.perf_counter()
    for batch in plan.batches:
        mine, attempt = plan.chunks_of(batch), uuid.uuid4().hex[:12]
        results = [r for part in range(PARTS)
                   for r in write_chunks(store, batch, attempt, part, config, plan.schema,
                                         mine[len(mine) * part // PARTS: len(mine) * (part + 1) // PARTS],
                                         config.server_id.allocate(part))]
        commit_batch(store, batch, attempt, plan.schema, results, 1.0)
    return time.perf_counter() - started


def catch_up(config: ConnectionConfig, options: StreamOptions) -> None:
    """The stream of ``options`` started (from the lake's checkpoint or the snapshot), caught up and merged."""
    runner, control = StreamRunner(options, config), config.connect()
    try:
        checkpoint = runner.open(control)
        runner.catch_up(control, checkpoint, StreamProgress.start())
        StateMerger(options.lake, control).merge(checkpoint)
        runner.lease.release()
    finally:
        control.close()
