"""A stream worker for the crash tests: streams the checkpoint's tables into the lake until killed.

    python -m tests.stream_worker <base_uri> <connection json>   (password in MYSQL_CDC_PASSWORD)

It runs the same stream runner as the stream operator, without Airflow, with small batches (400
events), so that a test can kill -9 it at any moment, also in the middle of a transaction.
"""

from __future__ import annotations

import json
import os
import sys

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.stream_options import BatchLimits, StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.lake.stream_store import StreamStore


def run(base_uri: str, config: ConnectionConfig, once: bool = False) -> None:
    checkpoint = StreamStore(base_uri).read_checkpoint()
    if checkpoint is None:
        raise SystemExit(f"no stream checkpoint in {base_uri}: the test commits the first one")
    # one writer name for all the workers, so that each restart takes over the killed one's lease
    options = StreamOptions(base_uri, tuple(checkpoint.schemas), limits=BatchLimits(max_events=400), poll_interval=0.05,
                            writer="crash-test stream worker")
    runner, control = StreamRunner(options, config), config.connect()
    try:
        checkpoint, progress = runner.open(control), StreamProgress.start()
        if once:
            runner.catch_up(control, checkpoint, progress)
        else:
            runner.run(control, checkpoint, progress, may_wait=False)  # no stop condition: until killed
    finally:
        control.close()


if __name__ == "__main__":
    run(sys.argv[1], ConnectionConfig.from_dict(json.loads(sys.argv[2]), os.environ["MYSQL_CDC_PASSWORD"]))
