"""A whole database against one table of the same rows, both through the example DAG as a user runs
it (``dag.test()``, Spark ``local[*]``), with a writer touching tables all along; writes its section of
bench/RESULTS.md.

- database: ``--tables`` tables, ``--big-tables`` of them of ``--big-rows`` rows, the others between
  ``--small-min`` and ``--small-max`` rows (the issue's shape: 1,000 tables, 10 of 500,000 rows, 990 of
  1,000-20,000); the baseline: one table of the same total rows, in the same run.
- time to a consistent replica: from the DAG run's start (split, mapped snapshot tasks, the stream) until
  the stream's checkpoint covers the writer's last transaction (``read_table`` then gives the source's
  rows), the writer updating one row in each of ``--touch`` tables a second (in the one-table case,
  ``--touch`` rows of it a second) until ``WRITE_AFTER_STREAM_SECONDS`` after the stream wrote its first
  checkpoint (a time, not a count of batches, so that smaller batches are no faster). Also the time until
  the run ends: the stream stops once idle for 5 s (not counted) and merges the changes into the current
  tables as it stops. The replica is then compared with the source table by table (row count and sum of
  a column, read with ``read_table``).
- Airflow's registration of the tasks' asset events (a snapshot task's one a table, ~7-10 ms each on SQLite),
  timed apart (``AssetRegistration``): a task succeeds, and its downstream tasks start, only after it.
- the stream (``bench.common.stream_spread``): its start (open to the first batch) and its steady row events/s
  over ``--events`` row updates spread over ``--touch`` tables, or all in the one table.
- peak memory of the Spark processes during the snapshot.

    .venv/bin/python -m bench.many_tables [--tables 1000] [--events 200000] [--port 33091]

A quick look: ``--tables 100 --big-tables 2 --big-rows 50000 --events 20000``. With ``--stream-only``
the stream alone, no DAG (tables of 2,000 rows), before (``--old``, main) against after (this checkout)
in one run: the section "Stream over many tables". Starts a throwaway MariaDB and Airflow home of its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.measure import PeakRss, machine, scratch_dir, seconds_until_in_lake
from bench.common.results import write_sections
from bench.common.server import LOAD_ANYWHERE, TABLE_ANYWHERE, throwaway_server
from bench.common.stream_spread import PER_TRANSACTION
from bench.common.stream_spread import measure as measure_stream
from dev.dag_file import load_dag, start_execution_api

ROOT = Path(__file__).resolve().parents[1]
WRITE_AFTER_STREAM_SECONDS = 10.0
"""How long the writer goes on once the stream has written its first checkpoint."""


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--big-tables", type=int, default=10)
    parser.add_argument("--big-rows", type=int, default=500_000)
    parser.add_argument("--small-min", type=int, default=1_000)
    parser.add_argument("--small-max", type=int, default=20_000)
    parser.add_argument("--touch", type=int, default=200, help="tables the writer touches a second")
    parser.add_argument("--events", type=int, default=200_000, help="row updates for the stream throughput")
    parser.add_argument("--port", type=int, default=33091)
    parser.add_argument("--server-ids", default=None,
                        help="the connection's server_id range (default: the connection's default, 9 ids)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--stream-only", action="store_true", help="the stream alone, before against after")
    parser.add_argument("--old", default="main", help="with --stream-only: the code before (a commit)")
    return parser.parse_args(argv)


def table_sizes(args: argparse.Namespace) -> dict[str, int]:
    rnd = random.Random(7)
    return {f"many.t_{i:04d}": args.big_rows if i < args.big_tables else rnd.randint(args.small_min, args.small_max)
            for i in range(args.tables)}


def load(server: Any, sizes: dict[str, int], one_rows: int | None = None) -> None:
    """The tables of ``sizes`` in database ``many``, and ``one.t`` of their total rows (or ``one_rows``)."""
    with server.admin_connect().cursor() as cur:
        cur.execute("CREATE DATABASE many")
        cur.execute("CREATE DATABASE one")
        cur.execute("USE bench")  # the sequence engine's seq_1_to_N tables resolve in any database
        for table, rows in {**sizes, "one.t": one_rows or sum(sizes.values())}.items():
            cur.execute(TABLE_ANYWHERE.format(table=table))
            cur.execute(LOAD_ANYWHERE.format(table=table, rows=rows))
        cur.execute("FLUSH TABLES")


class Writer(threading.Thread):
    """Each second, one single-row UPDATE in each of ``touch`` tables (or ``touch`` rows of one table),
    each its own transaction, until stopped."""

    def __init__(self, server: Any, tables: list[str], touch: int) -> None:
        super().__init__(daemon=True)
        self.conn, self.tables, self.touch = server.admin_connect(), tables, touch
        self.stop, self.transactions = threading.Event(), 0

    def run(self) -> None:
        rnd, due = random.Random(3), time.monotonic()
        with self.conn.cursor() as cur:
            cur.execute("SET autocommit = 1")
            while not self.stop.is_set():
                touched = rnd.sample(self.tables, self.touch) if len(self.tables) > 1 else self.tables * self.touch
                for table in touched:
                    cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = %s", (rnd.randint(1, 1000),))
                    self.transactions += 1
                due += 1.0
                time.sleep(max(0.0, due - time.monotonic()))


def run_dag(server: Any, base_uri: str, tables: list[str], writer: Writer) -> dict[str, Any]:
    """The example DAG over ``tables`` with the writer on until ``WRITE_AFTER_STREAM_SECONDS`` after the
    stream's first checkpoint: the seconds until the stream's checkpoint covers the writer's last transaction
    (a consistent replica, read with ``read_table``), and until the DAG run ends (the stream's MERGE of the
    current tables when it stops included, its idle wait not)."""
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    store, consistent, ended = StreamStore(Lake.at(base_uri)), dict[str, float](), threading.Event()

    def stop_writer() -> None:
        while store.lake.read_json(store.checkpoint_path) is None:  # not parsed: see seconds_until_in_lake
            if ended.wait(1):  # the run ended (failed) before its stream started
                writer.stop.set()
                return
        writer.stop.wait(WRITE_AFTER_STREAM_SECONDS)
        writer.stop.set()
        writer.join()
        stopped, control = time.perf_counter(), server.admin_connect()
        consistent["at"] = stopped + seconds_until_in_lake(store, control, ServerInfo.read(control), stopped, 900)
        control.close()

    dag = load_dag("mysql_cdc_example")
    watcher = threading.Thread(target=stop_writer, daemon=True)
    registering = AssetRegistration()
    groups: dict[str, tuple[Sequence[bytes], Sequence[bytes]]] = {
        "Spark (JVM and Python)": ([b"org.apache.spark.deploy.SparkSubmit", b"pyspark.daemon", b"snapshot_job.py"], [])}
    writer.start()
    watcher.start()
    started = time.perf_counter()
    with PeakRss(groups) as rss, registering:
        run = dag.test(run_conf={"tables": tables, "base_uri": base_uri, "stop_after_idle_seconds": 5,
                                 "defer_after_idle_seconds": 0})
    dag_seconds = time.perf_counter() - started - 5  # the stream's idle wait before it stops
    ended.set()
    if run.state != "success":
        raise SystemExit(f"the example DAG ended {run.state}")
    watcher.join()
    snapshot_tasks = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    snapshot_end = max(ti.end_date for ti in snapshot_tasks)
    return {"seconds": consistent["at"] - started, "dag_seconds": dag_seconds, "snapshot_tasks": len(snapshot_tasks),
            "snapshot_seconds": (snapshot_end - run.start_date).total_seconds(),
            "spark_peak_mib": rss.peak_total["Spark (JVM and Python)"] / 1024, "writes": writer.transactions,
            "asset_seconds": registering.seconds}


class AssetRegistration:
    """Times Airflow's registration of the tasks' asset events (``TaskInstance.register_asset_changes_in_db``,
    called by the execution API when a task succeeds, before its downstream tasks may start: in ``dag.test()``
    the API runs in this process). A snapshot task emits one event a table through the replicas' alias."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._patch: Any = None

    def __enter__(self) -> AssetRegistration:
        from unittest import mock

        from airflow.models.taskinstance import TaskInstance

        register = TaskInstance.register_asset_changes_in_db

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return register(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        self._patch = mock.patch.object(TaskInstance, "register_asset_changes_in_db", staticmethod(timed))
        self._patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.stop()


def check_equal(server: Any, base_uri: str, tables: list[str]) -> None:
    """Each replica's row count and sum of ``amount`` against the source's."""
    import pyarrow.compute as pc

    from airflow_provider_mysqlcdc.lake.read.replica import read_table

    with server.admin_connect().cursor() as cur:
        for table in tables:
            cur.execute(f"SELECT COUNT(*), SUM(amount) FROM {table}")
            rows, total = cur.fetchone()
            replica = read_table(base_uri, table)
            got = (replica.num_rows, pc.sum(replica.column("amount")).as_py())
            if got != (rows, total):
                raise SystemExit(f"{table}: the replica has {got} (rows, sum), the source {(rows, total)}")


def report(results: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int], facts: dict[str, Any]) -> str:
    one, many = results["one"], results["many"]
    total = sum(sizes.values())
    lines = [
        f"## Whole database: {args.tables:,} tables against one table of the same {total:,} rows",
        "",
        f"{dt.date.today().isoformat()}, `.venv/bin/python -m bench.many_tables --tables {args.tables} "
        f"--big-tables {args.big_tables} --big-rows {args.big_rows} --events {args.events}"
        f"{f' --server-ids {args.server_ids}' if args.server_ids else ''}`; {facts['cores']} cores, "
        f"{facts['server']}, airflow-provider-mysqlcdc {facts['airflow-provider-mysqlcdc']}. "
        f"{args.big_tables} tables of {args.big_rows:,} rows, the others of {args.small_min:,}-{args.small_max:,}; "
        f"a writer updating one row in each of {args.touch} tables a second (one table: {args.touch} rows of it) "
        f"until {WRITE_AFTER_STREAM_SECONDS:.0f} s after the stream's first checkpoint. Both replicas equal their "
        f"source (row counts and sums, read "
        f"with `read_table`).",
        "",
        "| | one table | whole database | ratio |",
        "|---|---|---|---|",
        f"| time to a consistent replica (example DAG, s) | {one['seconds']:.1f} | {many['seconds']:.1f} | "
        f"{many['seconds'] / one['seconds']:.2f}x |",
        f"| of which until the last snapshot task ended (s) | {one['snapshot_seconds']:.1f} | "
        f"{many['snapshot_seconds']:.1f} | {many['snapshot_seconds'] / one['snapshot_seconds']:.2f}x |",
        f"| until the DAG run ends (the stream's MERGE when it stops included, s) | {one['dag_seconds']:.1f} | "
        f"{many['dag_seconds']:.1f} | {many['dag_seconds'] / one['dag_seconds']:.2f}x |",
        f"| of which Airflow's registration of the tasks' asset events (s) | {one['asset_seconds']:.1f} | "
        f"{many['asset_seconds']:.1f} | |",
        f"| time to a consistent replica less that registration (s) | {one['seconds'] - one['asset_seconds']:.1f} | "
        f"{many['seconds'] - many['asset_seconds']:.1f} | "
        f"{(many['seconds'] - many['asset_seconds']) / (one['seconds'] - one['asset_seconds']):.2f}x |",
        f"| mapped snapshot tasks (Spark applications) | {one['snapshot_tasks']} | {many['snapshot_tasks']} | |",
        f"| peak memory of the Spark processes (MiB) | {one['spark_peak_mib']:,.0f} | "
        f"{many['spark_peak_mib']:,.0f} | |",
        "",
        STREAM_HEADER,
        *stream_rows(results["stream"], "this", args),
    ]
    return "\n".join(lines) + "\n"


def stream_rows(stream: dict[str, dict[str, dict[str, Any]]], label: str, args: argparse.Namespace) -> list[str]:
    """The rows of the stream's figures of one version (``bench.common.stream_spread``): one table, then the database
    with each transaction over all touched tables, and with each transaction in one of them, with ratios."""
    one, many, turns = stream["one"][label], stream["many"][label], stream["turns"][label]

    def row(title: str, key: str, form: str) -> str:
        a, b, c = one[key], many[key], turns[key]
        return f"| {title} | {a:{form}} | {b:{form}} | {b / a:.2f}x | {c:{form}} | {c / a:.2f}x |"

    return [
        row("stream start: open a new lake to its first batch (s)", "start_seconds", ",.2f"),
        row("open of that lake again (s)", "open_seconds", ",.2f"),
        row(f"{args.events:,} row updates: steady row events/s", "steady_events_per_second", ",.0f"),
        row("the same, overall (from the call to open)", "events_per_second", ",.0f"),
        *same_statements(stream, label, args),
    ]


def same_statements(stream: dict[str, dict[str, dict[str, Any]]], label: str, args: argparse.Namespace) -> list[str]:
    """The line that separates the cost of the tables from the cost of the statements: one table written with
    the whole database's statements (each transaction ``touch`` UPDATEs of a few rows, a rows event and a table
    map each, against one UPDATE of 1,000 rows in the one-table layout)."""
    small, many = stream["statements"][label]["steady_events_per_second"], stream["many"][label]
    rows = PER_TRANSACTION // args.touch
    return ["", f"One table written with the same statements as the whole database's ({args.touch} UPDATEs of "
                f"{rows} rows a transaction): {small:,.0f} steady row events/s; the whole database's "
                f"{many['steady_events_per_second']:,.0f} are {many['steady_events_per_second'] / small:.2f}x of it."]


STREAM_HEADER = ("| | one table | whole database, every transaction over all touched tables | ratio "
                 "| whole database, a transaction per table in turn | ratio |\n|---|---|---|---|---|---|")


def stream_report(stream: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace, old: str,
                  facts: dict[str, Any]) -> str:
    """The section "Stream over many tables": before and after, each its table of one table against many."""
    lines = [
        "## Stream over many tables",
        "",
        f"{dt.date.today().isoformat()}, `.venv/bin/python -m bench.many_tables --stream-only --tables {args.tables} "
        f"--touch {args.touch} --events {args.events}`; {facts['cores']} cores, {facts['server']}. Each version "
        f"streams the same binlog in a process of its own (`bench.common.stream_spread`): before is {old}, after is "
        f"this "
        f"branch. {args.tables} tables captured, the writes spread over {args.touch} of them (transactions of 1,000 "
        f"rows: 5 in each of them, or all 1,000 in one of them in turn), against one table with all of them. "
        f"Steady: the updates over the time from the end of open to the last commit; overall: from the call to "
        f"open.",
        "",
    ]
    for label in stream["one"]:
        lines += [f"{label}:", "", STREAM_HEADER, *stream_rows(stream, label, args), ""]
    return "\n".join(lines)


def layouts(sizes: dict[str, int], touch: int) -> dict[str, tuple[list[str], list[str], bool]]:
    """The stream's layouts: captured tables, the tables written to, and whether a transaction spreads over
    all of them (else each transaction updates one of them, in turn)."""
    return {"one": (["one.t"], ["one.t"], True), "many": (list(sizes), list(sizes)[:touch], True),
            "turns": (list(sizes), list(sizes)[:touch], False),
            # one table written with the statements of "many" (``touch`` UPDATEs of a few rows a transaction):
            # what those statements cost apart from the tables they spread over
            "statements": (["one.t"], ["one.t"] * touch, True)}


def connection(server: Any) -> dict[str, Any]:
    """The stream's connection (``ConnectionConfig.to_dict``: the password travels apart)."""
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig

    return ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port).to_dict()


def stream_only(args: argparse.Namespace, sizes: dict[str, int]) -> int:
    """The stream alone over tables of 2,000 rows, ``--old`` against this checkout, in one run."""
    from bench.common.two_commits import worktrees

    home = scratch_dir("bench-stream-")
    small = dict.fromkeys(sizes, 2000)
    with throwaway_server(args.port) as server, worktrees({"before": args.old}) as trees:
        load(server, small, one_rows=2000)
        with server.admin_connect().cursor() as cur:
            cur.execute("SELECT VERSION()")
            (version,) = cur.fetchone()
        old = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.old], check=True,
                             capture_output=True, text=True).stdout.strip()
        stream = measure_stream(server, {**trees, "after": ROOT}, layouts(small, args.touch), args.events, home,
                                connection(server), server.cdc_password)
    text = stream_report(stream, args, f"`{args.old}` ({old})", machine(version))
    print(text)
    write_sections(args.results, text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.stream_only:
        return stream_only(args, table_sizes(args))
    home = scratch_dir("bench-airflow-")  # before anything imports Airflow
    os.environ.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                       "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
                       # no DAG here is scheduled on the replicas' assets: Airflow warns at every snapshot event
                       "AIRFLOW__LOGGING__NAMESPACE_LEVELS": "airflow.assets.manager=ERROR"})
    sizes = table_sizes(args)
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True, capture_output=True)
    results: dict[str, Any] = {}
    with throwaway_server(args.port) as server:
        load(server, sizes)
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[*]"})
        # by default the connection's default server-id range: a whole database must not need a wider one
        os.environ["AIRFLOW_CONN_MYSQL_CDC_DEFAULT"] = json.dumps({
            "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": server.cdc_password, "extra": {"server_id": args.server_ids} if args.server_ids else {}})
        with server.admin_connect().cursor() as cur:
            cur.execute("SELECT VERSION()")
            (version,) = cur.fetchone()
        start_execution_api()  # else the first run alone pays it
        for label, tables in (("many", list(sizes)), ("one", ["one.t"])):
            base_uri = f"{home}/lake-{label}"
            measured = run_dag(server, base_uri, tables, Writer(server, tables, args.touch))
            check_equal(server, base_uri, tables)
            results[label] = measured
            print(f"{label}: {json.dumps(measured, default=str)}", flush=True)
        results["stream"] = measure_stream(server, {"this": ROOT}, layouts(sizes, args.touch), args.events, home,
                                           connection(server), server.cdc_password)
    text = report(results, args, sizes, machine(version))
    print(text)
    write_sections(args.results, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
