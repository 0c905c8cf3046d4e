"""A stream worker for the crash tests: streams the checkpoint's tables into the lake until killed.

    python -m tests.stream_worker <base_uri> <connection json> [once]   (password in MYSQL_CDC_PASSWORD)

It runs the same stream runner as the stream operator, without Airflow, with small batches (400
events), so that a test can kill -9 it at any moment, also in the middle of a transaction;
``kill_repeatedly`` is that test's loop.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits, StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

ROOT = Path(__file__).resolve().parents[1]


def run(base_uri: str, config: ConnectionConfig, once: bool = False) -> None:
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    if checkpoint is None:
        raise SystemExit(f"no stream checkpoint in {base_uri}: the test commits the first one")
    # one writer name for all the workers, so that each restart takes over the killed one's lease
    options = StreamOptions(base_uri, tuple(checkpoint.schemas), limits=CommitLimits(max_events=400),
                            poll_interval=0.05, writer="crash-test stream worker")
    runner, control = StreamRunner(options, config), config.connect()
    try:
        checkpoint, progress = runner.open(control), StreamProgress.start()
        if once:
            runner.catch_up(control, checkpoint, progress)
        else:
            runner.run(control, checkpoint, progress, may_wait=False)  # no stop condition: until killed
    finally:
        control.close()


def kill_repeatedly(base_uri: str, config: ConnectionConfig, rnd: random.Random, go_on: Callable[[int], bool],
                    after_kill: Callable[[], None] = lambda: None, max_delay: float = 1.2) -> int:
    """Start a worker, let it commit once (its start, imports and lease take a while on a loaded machine),
    then kill -9 it at a random moment: reading, in a Delta commit, writing its checkpoint. Repeats while
    ``go_on(kills so far)``; returns the number of kills."""
    store, kills = StreamStore(Lake.at(base_uri)), 0
    env = {**os.environ, "MYSQL_CDC_PASSWORD": config.password, "PYTHONPATH": str(ROOT)}
    while go_on(kills):
        committed = store.read_checkpoint().seq  # type: ignore[union-attr]
        worker = subprocess.Popen([sys.executable, "-m", "tests.stream_worker", base_uri, json.dumps(config.to_dict())],
                                  env=env, cwd=ROOT)
        progress_by = time.monotonic() + 30
        while store.read_checkpoint().seq == committed and time.monotonic() < progress_by:  # type: ignore[union-attr]
            time.sleep(0.05)
        time.sleep(rnd.uniform(0.0, max_delay))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        kills += 1
        after_kill()
    return kills


if __name__ == "__main__":  # a third argument "once": catch up with the server, then exit
    run(sys.argv[1], ConnectionConfig.from_dict(json.loads(sys.argv[2]), os.environ["MYSQL_CDC_PASSWORD"]),
        once=sys.argv[3:] == ["once"])


def tear_and_catch_up(base_uri: str, config: ConnectionConfig, table: TableId, schema: TableSchema) -> pa.Table:
    """A torn batch made on purpose (a changelog commit for the next sequence number, no checkpoint naming
    it, as a worker killed between the two leaves), then a catch-up in this process. Checks that readers
    never see the torn row, that the catch-up removed it, and that no change was written twice; returns
    the table's changes."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    from airflow_provider_mysqlcdc.lake.changelog import lake_schema
    from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_APP_ID, STREAM_SEQ_COLUMN, for_delta
    from airflow_provider_mysqlcdc.lake.read.replica import read_changes

    store = StreamStore(Lake.at(base_uri))
    seq = store.read_checkpoint().seq + 1  # type: ignore[union-attr]
    torn = pa.Table.from_pylist([{"id": 0, "_op": "+I", "_binlog_file": 1}], schema=lake_schema(schema))
    torn = for_delta(torn).append_column(STREAM_SEQ_COLUMN, pa.array([seq], pa.int64()))
    write_deltalake(store.lake.table(table).changelog.uri, torn, mode="append", schema_mode="merge",
                    commit_properties=CommitProperties(app_transactions=[Transaction(STREAM_APP_ID, seq)]))
    assert 0 not in read_changes(base_uri, str(table)).column("id").to_pylist()

    run(base_uri, config, once=True)
    changes = read_changes(base_uri, str(table))
    order = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_row_seq")),
                     strict=True))
    assert len(order) == len(set(order)), "a change was written twice"
    assert 0 not in changes.column("id").to_pylist()  # the torn batch was removed, not read
    return changes
