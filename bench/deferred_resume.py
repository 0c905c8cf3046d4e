"""What a deferred stream over many tables pays to wait and to resume (issue 27): the trigger's read of its
tables' schemas at each poll that saw the binlog move, and the stream's open after the wait, each against the
way it was done before, in the same run.

- The trigger: ``load_table_schema`` table by table (before) against ``load_table_schemas`` (two queries).
- The resume: ``StreamRunner.open`` of a lake whose last writer deferred cleanly (the lease's ``clean_seq``:
  no changelog opened) against one whose lease says nothing (what every resume did before, and what a
  start after a crash still does: every changelog opened for rows past the checkpoint), then the first batch
  after it, whose changelogs the scan had opened already: with a change in every table and in 1 table of 100.

    .venv/bin/python -m bench.deferred_resume [--tables 1000] [--rows 100]

Alternates the two ways three times and prints the figures. Starts a throwaway MariaDB of its own; the lake is
a temporary local folder.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema, load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.lake.handle import Lake
from bench.common.server import many_tables_arguments, small_tables_database

ROUNDS = 3
T = TypeVar("T")


def _timed(work: Callable[..., T], *args: Any) -> tuple[T, float]:
    """``work(*args)`` and the seconds it took."""
    started = time.perf_counter()
    result = work(*args)
    return result, time.perf_counter() - started


def _update(server: Any, tables: Sequence[TableId]) -> None:
    """One committed update of one row in each of ``tables``."""
    with server.admin_connect("bench").cursor() as cur:
        for table in tables:
            cur.execute(f"UPDATE bench.{table.table} SET w = w + 1 WHERE id = 1")


def main(argv: list[str] | None = None) -> int:
    args = many_tables_arguments(__doc__, argv, tables=1000, rows=100, port=33093)
    with small_tables_database(args) as (server, tables, config, folder):
        control = config.connect()
        try:
            _schema_reads(control, tables)
            _resumes(server, tables, config, folder, control)
        finally:
            control.close()
    return 0


def _schema_reads(control: Any, tables: list[TableId]) -> None:
    one_by_one, together = [], []
    for _ in range(ROUNDS):
        one_by_one.append(_timed(lambda: {t: load_table_schema(control, t) for t in tables})[1])
        together.append(_timed(load_table_schemas, control, tables)[1])
    print(f"the trigger's read of {len(tables)} tables' schemas: table by table {statistics.median(one_by_one):.3f} s, "
          f"in two queries {statistics.median(together):.3f} s (medians of {ROUNDS})", flush=True)


def _resumes(server: Any, tables: list[TableId], config: ConnectionConfig, folder: str, control: Any) -> None:
    options = StreamOptions(folder, tuple(tables), StartupMode.LATEST, writer="bench")
    runner = StreamRunner(options, config)
    checkpoint = runner.open(control)
    _update(server, tables)  # a first batch: every changelog made
    progress = StreamProgress.start()
    runner.catch_up(control, checkpoint, progress)
    runner.wait_until(progress, checkpoint)
    lake = Lake.at(folder)
    for touched in (tables, tables[::100]):
        for _ in range(ROUNDS):
            for clean in (True, False):
                if not clean:  # what the lease says after a crash (and before this change, always)
                    lake.write_json(lake.lease, {**lake.read_json(lake.lease), "clean_seq": None})
                resumed = StreamRunner(options, config)
                checkpoint, opened = _timed(resumed.open, control)
                _update(server, touched)
                progress = StreamProgress.start()
                _, batch = _timed(resumed.catch_up, control, checkpoint, progress)
                resumed.wait_until(progress, checkpoint)
                way = "after a clean deferral" if clean else "scanning every changelog (before)"
                print(f"resume over {len(tables)} tables, {way}: open {opened:.3f} s, then the first batch changing "
                      f"{len(touched)} of them {batch:.3f} s", flush=True)

if __name__ == "__main__":
    sys.exit(main())
