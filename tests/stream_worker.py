"""A stream worker for the crash tests: streams one table into the lake until killed.

    python -m tests.stream_worker <base_uri> <connection json>   (password in MYSQL_CDC_PASSWORD)

It is what the stream operator does between deferrals, without Airflow, so that a test can kill -9
it at any moment.
"""

from __future__ import annotations

import json
import os
import sys
import time

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.engine.stream_batches import BatchLimits, stream_batches
from airflow_provider_mysqlcdc.lake.stream_store import StreamStore


def run(base_uri: str, config: ConnectionConfig, once: bool = False) -> None:
    store = StreamStore(base_uri)
    control = config.connect()
    while True:
        checkpoint = store.read_checkpoint()
        assert checkpoint is not None
        for _ in stream_batches(config, 5530, store, checkpoint, control,
                                lambda table: load_table_schema(control, table), BatchLimits(max_events=40)):
            pass
        if once:
            return
        time.sleep(0.05)


if __name__ == "__main__":
    run(sys.argv[1], ConnectionConfig.from_dict(json.loads(sys.argv[2]), os.environ["MYSQL_CDC_PASSWORD"]))
