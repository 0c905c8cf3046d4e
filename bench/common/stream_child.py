"""One stream pass in a process of its own, so that the peer benchmark can read its peak memory.

    python -m bench.common.stream_child <base_uri> <connection json> <start offset json> <batch limits json>

The password comes from MYSQL_CDC_PASSWORD; prints ``rows=<change rows written>``. It runs the
stream operator's runner, started at the given offset (``startup_mode="specific-offset"``).
"""

from __future__ import annotations

import json
import os
import sys

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits, StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner


def main(argv: list[str]) -> int:
    base_uri, connection, start, limits = argv
    config = ConnectionConfig.from_dict(json.loads(connection), os.environ["MYSQL_CDC_PASSWORD"])
    offset = BinlogOffset.from_dict(json.loads(start))
    options = StreamOptions(base_uri, (TableId("bench", "big"),), StartupMode.SPECIFIC,
                            startup_offset=f"{offset.file}:{offset.position}",
                            limits=CommitLimits(**json.loads(limits)))
    runner, control, progress = StreamRunner(options, config), config.connect(), StreamProgress.start()
    try:
        runner.catch_up(control, runner.open(control), progress)
    finally:
        control.close()
    print(f"rows={progress.rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
