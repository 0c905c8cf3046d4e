"""A finished replica without Spark or Airflow, for the as-of and verify tests.

The snapshot goes through the same engine functions the Spark job runs on its executors and driver
(``write_chunks`` per part, ``commit_batch``), the stream through the stream runner the operator uses,
and the MERGE through the runner's ``StateMerger``: the lake is the one the pipeline would write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_chunks
from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.engine.verification.verify import VerifyReport, summarize, verify_batch_locally
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, SnapshotStore, group_batches
from airflow_provider_mysqlcdc.lake.handle import Lake
from tests.stream_worker import ROOT


def snapshot(config: ConnectionConfig, base_uri: str, table: str, chunk_size: int, chunks_per_batch: int,
             parts: int = 2, after_batch: Callable[[int], None] | None = None, chunk_key: str | None = None) -> Plan:
    """Plan ``table`` and commit every batch of the plan, each read in ``parts`` contiguous parts;
    ``after_batch(number)`` runs after each batch is committed (a change between two batches);
    ``chunk_key``: split on that column (the split's ``chunk_key_columns``)."""
    control = config.connect()
    try:
        schema = load_table_schema(control, TableId.parse(table), chunk_key)
        chunks = split_table(control, schema, chunk_size)
    finally:
        control.close()
    plan = Plan(schema, chunks, group_batches(schema.id, chunks, chunks_per_batch))
    store = SnapshotStore(Lake.at(base_uri))
    store.write_plan(plan)
    for batch in plan.batches:
        mine = plan.chunks_of(batch)
        attempt = uuid.uuid4().hex[:12]
        results = [r for part in range(parts)
                   for r in write_chunks(store, batch, attempt, part, config, schema,
                                         mine[len(mine) * part // parts: len(mine) * (part + 1) // parts],
                                         config.server_id.allocate(part))]
        commit_batch(store, batch, attempt, schema, results, 1.0)
        if after_batch is not None:
            after_batch(batch.number)
    return plan


def stream(config: ConnectionConfig, base_uri: str, tables: list[str], merge: bool) -> Checkpoint:
    """Stream ``tables`` until caught up with the server (from the snapshot, or the lake's checkpoint);
    with ``merge``, MERGE the changes into the current tables too."""
    options = StreamOptions(base_uri, tuple(TableId.parse(t) for t in tables), writer="tests.replica")
    runner, control = StreamRunner(options, config), config.connect()
    try:
        checkpoint = runner.open(control)
        runner.catch_up(control, checkpoint, StreamProgress.start())
        if merge:
            StateMerger(Lake.at(base_uri), control).merge(checkpoint)
        runner.lease.release()
    finally:
        control.close()
    return checkpoint


def run_stopping_stream(config: ConnectionConfig, options: StreamOptions) -> None:
    """One run of the stream as a stopping stream task makes it (``options`` say when it stops, e.g.
    ``stop_after_idle_seconds=0``: once caught up), its MERGE included."""
    runner, control = StreamRunner(options, config), config.connect()
    try:
        runner.run(control, runner.open(control), StreamProgress.start(), may_wait=False)
    finally:
        control.close()


@contextmanager
def stream_running(config: ConnectionConfig, base_uri: str) -> Iterator[None]:
    """The stream following the server in a worker process (``tests.stream_worker``, from the lake's
    checkpoint: call :func:`stream` first) while the block runs; killed after it."""
    env = {**os.environ, "MYSQL_CDC_PASSWORD": config.password, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "tests.stream_worker", base_uri, json.dumps(config.to_dict())],
                              env=env, cwd=ROOT)
    try:
        yield
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()


def verify(config: ConnectionConfig, base_uri: str, plan: Plan, run: str,
           fail_on_difference: bool = False) -> VerifyReport:
    """Verify every batch of ``plan`` as run ``run`` (each in two parts, as two Spark tasks would) and
    summarise: the verification without Spark or Airflow."""
    for batch in plan.batches:
        verify_batch_locally(Lake.at(base_uri), config, batch, run, parts=2, wait_seconds=60)
    return summarize(Lake.at(base_uri), plan.schema.id, run, [b.number for b in plan.batches], fail_on_difference)
