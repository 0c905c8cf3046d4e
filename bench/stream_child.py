"""One stream pass in a process of its own, so that the peer benchmark can read its peak memory.

    python -m bench.stream_child <base_uri> <connection json> <start offset json> <batch limits json>

The password comes from MYSQL_CDC_PASSWORD; prints ``rows=<change rows written>``.
"""

from __future__ import annotations

import json
import os
import sys

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.engine.stream_batches import BatchLimits, stream_batches
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore


def main(argv: list[str]) -> int:
    base_uri, connection, start, limits = argv
    config = ConnectionConfig.from_dict(json.loads(connection), os.environ["MYSQL_CDC_PASSWORD"])
    control = config.connect()
    table = TableId("bench", "big")
    store = StreamStore(base_uri)
    checkpoint = Checkpoint(0, BinlogOffset.from_dict(json.loads(start)), {table: load_table_schema(control, table)})
    store.commit(checkpoint, {})
    reports = stream_batches(config, 5554, store, checkpoint, control, lambda t: load_table_schema(control, t),
                             BatchLimits(**json.loads(limits)))
    print(f"rows={sum(sum(r.rows.values()) for r in reports)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
