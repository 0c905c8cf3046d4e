"""A whole database against one table of the same rows, both through the example DAG as a user runs
it (``dag.test()``, Spark ``local[*]``), with a writer touching tables all along; writes its section of
bench/RESULTS.md.

- database: ``--tables`` tables, ``--big-tables`` of them of ``--big-rows`` rows, the others between
  ``--small-min`` and ``--small-max`` rows (the issue's shape: 1,000 tables, 10 of 500,000 rows, 990 of
  1,000-20,000); the baseline: one table of the same total rows, in the same run.
- time to a consistent replica: the DAG run (split, mapped snapshot tasks, the stream until it has
  committed past the writer), the writer updating one row in each of ``--touch`` tables a second
  (in the one-table case, ``--touch`` rows of it a second) until the stream committed four batches; the
  stream then stops once idle for 5 s, which is not counted. The replica is then compared with the source
  table by table (row count and sum of a column, read with ``read_table``).
- stream throughput: ``--events`` row updates written while nothing streams, spread over ``--touch``
  tables (in transactions of 1,000 rows), or all in the one table; then the stream operator's own loop
  from the lake's checkpoint until it covers the server's offset: row events per second.
- peak memory of the Spark processes during the snapshot.

    .venv/bin/python -m bench.many_tables [--tables 1000] [--events 200000] [--port 33091]

A quick look: ``--tables 100 --big-tables 2 --big-rows 50000 --events 20000``. Starts a throwaway
MariaDB and Airflow home of its own.
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

from bench.measure import PeakRss, machine, scratch_dir, seconds_until_in_lake, write_sections
from bench.server import TABLE, throwaway_server

ROOT = Path(__file__).resolve().parents[1]
CREATE = TABLE.replace("bench.{table}", "{table}")  # the benchmark's table, in any database
LOAD = """INSERT INTO {table} (customer, sku, amount, created, updated, note)
    SELECT seq % 50000, CONCAT('SKU-', MD5(seq)), (seq % 100000) / 100, '2024-01-01' + INTERVAL seq SECOND,
           '2024-01-01' + INTERVAL seq SECOND, IF(seq % 3 = 0, NULL, CONCAT('note ', seq))
    FROM seq_1_to_{rows}"""


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
    return parser.parse_args(argv)


def table_sizes(args: argparse.Namespace) -> dict[str, int]:
    rnd = random.Random(7)
    return {f"many.t_{i:04d}": args.big_rows if i < args.big_tables else rnd.randint(args.small_min, args.small_max)
            for i in range(args.tables)}


def load(server: Any, sizes: dict[str, int]) -> None:
    with server.admin_connect().cursor() as cur:
        cur.execute("CREATE DATABASE many")
        cur.execute("CREATE DATABASE one")
        cur.execute("USE bench")  # the sequence engine's seq_1_to_N tables resolve in any database
        for table, rows in {**sizes, "one.t": sum(sizes.values())}.items():
            cur.execute(CREATE.format(table=table))
            cur.execute(LOAD.format(table=table, rows=rows))
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


def run_dag(base_uri: str, tables: list[str], writer: Writer) -> dict[str, Any]:
    """The example DAG over ``tables`` with the writer on until the stream has committed four batches."""
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.stream_store import StreamStore
    from dev.dag_file import load_dag

    def stop_writer() -> None:
        while not writer.stop.wait(1):
            checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
            if checkpoint is not None and checkpoint.seq >= 4:
                writer.stop.set()

    dag = load_dag("mysql_cdc_example")
    watcher = threading.Thread(target=stop_writer, daemon=True)
    groups: dict[str, tuple[Sequence[bytes], Sequence[bytes]]] = {
        "Spark (JVM and Python)": ([b"org.apache.spark.deploy.SparkSubmit", b"pyspark.daemon", b"snapshot_job.py"], [])}
    writer.start()
    watcher.start()
    started = time.perf_counter()
    with PeakRss(groups) as rss:
        run = dag.test(run_conf={"tables": tables, "base_uri": base_uri, "stop_after_idle_seconds": 5,
                                 "defer_after_idle_seconds": 0})
    seconds = time.perf_counter() - started - 5  # the stream's idle wait before it stops
    writer.stop.set()
    writer.join()
    watcher.join()
    if run.state != "success":
        raise SystemExit(f"the example DAG ended {run.state}")
    snapshot_tasks = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    snapshot_end = max(ti.end_date for ti in snapshot_tasks)
    return {"seconds": seconds, "snapshot_tasks": len(snapshot_tasks),
            "snapshot_seconds": (snapshot_end - run.start_date).total_seconds(),
            "spark_peak_mib": rss.peak_total["Spark (JVM and Python)"] / 1024, "writes": writer.transactions}


def check_equal(server: Any, base_uri: str, tables: list[str]) -> None:
    """Each replica's row count and sum of ``amount`` against the source's."""
    import pyarrow.compute as pc

    from airflow_provider_mysqlcdc.lake.read import read_table

    with server.admin_connect().cursor() as cur:
        for table in tables:
            cur.execute(f"SELECT COUNT(*), SUM(amount) FROM {table}")
            rows, total = cur.fetchone()
            replica = read_table(base_uri, table)
            got = (replica.num_rows, pc.sum(replica.column("amount")).as_py())
            if got != (rows, total):
                raise SystemExit(f"{table}: the replica has {got} (rows, sum), the source {(rows, total)}")


def stream_rate(server: Any, base_uri: str, tables: list[str], touch: int, events: int) -> float:
    """Row events per second of the stream over ``events`` updates spread over ``touch`` tables."""
    from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.stream_store import StreamStore
    from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator

    targets = tables[:touch] if len(tables) > 1 else tables
    per_transaction = 1000
    with server.admin_connect().cursor() as cur:
        written = 0
        while written < events:
            cur.execute("BEGIN")
            rows = per_transaction // len(targets) or 1
            for table in targets:
                low = 1 + written % 900
                cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id BETWEEN %s AND %s", (low, low + rows - 1))
                written += rows
            cur.execute("COMMIT")
    control = server.admin_connect()
    operator = MySqlBinlogStreamOperator(task_id="stream", base_uri=base_uri, tables=tables, deferrable=False,
                                         stop_after_idle_seconds=1)
    started = time.perf_counter()
    stream = threading.Thread(target=operator.execute, args=({},), daemon=True)
    stream.start()
    seconds = seconds_until_in_lake(StreamStore(Lake.at(base_uri)), control, ServerInfo.read(control), started,
                                    timeout=3600)
    stream.join()
    return written / seconds


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
        f"until the stream committed four batches. Both replicas equal their source (row counts and sums, read "
        f"with `read_table`).",
        "",
        "| | one table | whole database | ratio |",
        "|---|---|---|---|",
        f"| time to a consistent replica (example DAG, s) | {one['seconds']:.1f} | {many['seconds']:.1f} | "
        f"{many['seconds'] / one['seconds']:.2f}x |",
        f"| of which until the last snapshot task ended (s) | {one['snapshot_seconds']:.1f} | "
        f"{many['snapshot_seconds']:.1f} | {many['snapshot_seconds'] / one['snapshot_seconds']:.2f}x |",
        f"| mapped snapshot tasks (Spark applications) | {one['snapshot_tasks']} | {many['snapshot_tasks']} | |",
        f"| peak memory of the Spark processes (MiB) | {one['spark_peak_mib']:,.0f} | "
        f"{many['spark_peak_mib']:,.0f} | |",
        f"| stream, {args.events:,} row updates (row events/s) | {one['events_per_second']:,.0f} | "
        f"{many['events_per_second']:,.0f} (over {args.touch} tables) | "
        f"{many['events_per_second'] / one['events_per_second']:.2f}x |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    home = scratch_dir("bench-airflow-")  # before anything imports Airflow
    os.environ.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                       "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
                       # no DAG here is scheduled on the replicas' assets: Airflow warns at every snapshot event
                       "AIRFLOW__LOGGING__NAMESPACE_LEVELS": "airflow.assets.manager=ERROR"})
    args = arguments(argv)
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
        for label, tables in (("one", ["one.t"]), ("many", list(sizes))):
            base_uri = f"{home}/lake-{label}"
            measured = run_dag(base_uri, tables, Writer(server, tables, args.touch))
            check_equal(server, base_uri, tables)
            measured["events_per_second"] = stream_rate(server, base_uri, tables, args.touch, args.events)
            check_equal(server, base_uri, tables)
            results[label] = measured
            print(f"{label}: {json.dumps(measured, default=str)}", flush=True)
    text = report(results, args, sizes, machine(version))
    print(text)
    write_sections(args.results, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
