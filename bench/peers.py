"""Our pipeline against what a Python/Airflow user would run instead, side by side on this machine,
with medians over repeated runs and ratios computed per run; writes bench/RESULTS.md.

- snapshot: a table of ``--rows`` rows (~160 B each) read end to end by the example DAG (split +
  mapped SparkSubmit + Parquet + fix-up, through Airflow) against Spark's JDBC read into Parquet
  (MariaDB Connector/J) and the ``mariadb --batch --quick`` client to /dev/null (the practical limit);
  peak memory of the Spark processes while ours runs.
- binlog: ``--events`` row events (updates in 10,000-row transactions, plus inserts and deletes)
  captured into the lake by our stream, against raw mysql-replication iteration over the same
  events and ``mariadb-binlog --base64-output=decode-rows -v`` to /dev/null (the C decoder).
- latency: commit-to-visible-in-lake of single-row commits, idle and under a steady 1,000 rows/s,
  through the stream operator's own loop (following the binlog in the worker).
- memory: peak RSS of a stream process capturing one transaction of ``--big-transaction`` rows,
  with the default batch bounds and with bounds so large that the transaction is held whole.

    .venv/bin/python -m bench.peers [--rows 10000000] [--events 1000000] [--repeat 3] [--only binlog,latency]

Starts a throwaway MariaDB and Airflow home of its own; the full run takes about an hour here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from bench.common.measure import (
    PeakRss,
    child_peak_rss_mib,
    machine,
    quantile,
    scratch_dir,
    seconds_until_in_lake,
    timer,
)
from bench.common.results import write_sections
from bench.common.server import load_orders, raw_replication_rows, throwaway_server, write_events

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("snapshot", "binlog", "latency", "memory")


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the snapshot table")
    parser.add_argument("--rows-per-batch", type=int, default=SplitOptions.rows_per_batch,
                        help="the split operator's option (its default)")
    parser.add_argument("--events", type=int, default=1_000_000, help="row events for the binlog section")
    parser.add_argument("--big-transaction", type=int, default=1_000_000, help="rows of the memory section's one txn")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--port", type=int, default=33089)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    return parser.parse_args(argv)


# -- snapshot ----------------------------------------------------------------------------------------


def client_read(server: Any) -> float:
    """Seconds for the C client to fetch the whole table and throw it away."""
    with timer() as took:
        subprocess.run(["mariadb", "--no-defaults", "--batch", "--quick", "-h", server.host, "-P", str(server.port),
                        "-u", server.cdc_user, f"-p{server.cdc_password}", "-e", "SELECT * FROM bench.orders"],
                       stdout=subprocess.DEVNULL, check=True)
    return took[0]


def snapshot_section(server: Any, args: argparse.Namespace, home: str) -> dict[str, Any]:
    from bench.common.example_dag import run_example_dag, run_jdbc_baseline
    from dev.dag_file import start_execution_api

    start_execution_api()  # else the first run alone pays it
    runs = []
    for attempt in range(args.repeat):
        # the JVM's command line names the application too: the Python processes exclude it
        groups = {"Spark JVM (driver and local executor)": ([b"org.apache.spark.deploy.SparkSubmit"], []),
                  "Python (driver and workers)": ([b"pyspark.daemon", b"pyspark.worker", b"snapshot_job.py"],
                                                  [b"org.apache.spark.deploy.SparkSubmit"])}
        with PeakRss(groups) as rss:
            ours, summary = run_example_dag(f"{home}/lake-{attempt}", args.rows_per_batch)
        jdbc, _ = run_jdbc_baseline(server.host, server.port, server.cdc_user, server.cdc_password,
                                    f"{home}/jdbc-{attempt}")
        client = client_read(server)
        rows = summary["rows"]
        runs.append({"rows": rows, "batches": summary["batches"], "ours": rows / ours, "jdbc": rows / jdbc,
                     "client": rows / client, "vs_jdbc": jdbc / ours, "vs_client": client / ours,
                     "rss": {**{f"{g}, peak of the sum": v for g, v in rss.peak_total.items()},
                             **{f"{g}, largest one": v for g, v in rss.peak_single.items()}}})
        print(f"snapshot run {attempt + 1}: ours {runs[-1]['ours']:,.0f} rows/s, JDBC {runs[-1]['jdbc']:,.0f}, "
              f"client {runs[-1]['client']:,.0f}", flush=True)
    return {"runs": runs, "rows": args.rows, "setup": f"{args.rows:,} rows, batches of {args.rows_per_batch:,} rows"}


# -- binlog ------------------------------------------------------------------------------------------


def mariadb_binlog_read(server: Any, start: Any) -> float:
    """Seconds for the C decoder to fetch and print every row of the binlog from ``start``."""
    with timer() as took:
        subprocess.run(["mariadb-binlog", "--no-defaults", "--read-from-remote-server", "-h", server.host,
                        "-P", str(server.port), "-u", server.cdc_user, f"-p{server.cdc_password}",
                        f"--start-position={start.position}", "--base64-output=decode-rows", "-v",
                        "--to-last-log", start.file], stdout=subprocess.DEVNULL, check=True)
    return took[0]


def stream_into_lake(config: Any, start: Any, schema: Any, control: Any) -> int:
    """Our stream from ``start`` to the binlog's end into a fresh lake; returns the change rows written."""
    from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
    from airflow_provider_mysqlcdc.engine.stream.stream_batches import stream_batches
    from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    store = StreamStore(Lake.at(scratch_dir("bench-stream-")))
    checkpoint = Checkpoint(0, start, {schema.id: schema})
    store.commit(checkpoint, {})
    reports = stream_batches(config, 5552, store, checkpoint, control, lambda t: load_table_schema(control, t))
    return sum(sum(r.rows.values()) for r in reports)


def binlog_section(server: Any, args: argparse.Namespace, config: Any, control: Any) -> dict[str, Any]:
    # what both sides import, imported before either is timed
    import pymysqlreplication  # noqa: F401

    import airflow_provider_mysqlcdc.cdc.binlog.row_columns  # noqa: F401
    import airflow_provider_mysqlcdc.engine.stream.stream_batches  # noqa: F401
    import airflow_provider_mysqlcdc.lake.write.stream_commit  # noqa: F401
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
    from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo

    schema = load_table_schema(control, TableId("bench", "events"))
    start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
    events = write_events(server, "events", 200_000, args.events)
    print(f"binlog: wrote {events:,} row events", flush=True)
    runs = []
    for attempt in range(args.repeat):
        with timer() as raw_took:
            raw = raw_replication_rows(config, start, 5551)
        with timer() as ours_took:
            written = stream_into_lake(config, start, schema, control)
        limit = mariadb_binlog_read(server, start)
        runs.append({"events": raw, "change_rows": written, "raw": raw / raw_took[0], "ours": raw / ours_took[0],
                     "c_decoder": raw / limit, "vs_raw": raw_took[0] / ours_took[0], "vs_c": limit / ours_took[0]})
        print(f"binlog run {attempt + 1}: ours {runs[-1]['ours']:,.0f} row events/s, raw mysql-replication "
              f"{runs[-1]['raw']:,.0f}, mariadb-binlog {runs[-1]['c_decoder']:,.0f}", flush=True)
    return {"runs": runs, "events": events}


# -- latency -----------------------------------------------------------------------------------------


class SteadyLoad(threading.Thread):
    """About ``rows_per_second`` row updates a second, in 10-row transactions."""

    def __init__(self, server: Any, table: str, rows: int, rows_per_second: int) -> None:
        super().__init__(daemon=True)
        self.conn, self.table, self.rows = server.admin_connect("bench"), table, rows
        self.pause, self.stop = 10 / rows_per_second, threading.Event()

    def run(self) -> None:
        rnd, due = random.Random(1), time.monotonic()
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                low = rnd.randint(1, self.rows - 10)
                cur.execute(f"UPDATE {self.table} SET amount = amount + 1 WHERE id BETWEEN %s AND %s", (low, low + 9))
                due += self.pause
                time.sleep(max(0.0, due - time.monotonic()))


def commit_to_lake_latencies(server: Any, control: Any, base_uri: str, probes: int) -> list[float]:
    """Seconds from each single-row commit until the lake's checkpoint covers it."""
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    info, store, latencies = ServerInfo.read(control), StreamStore(Lake.at(base_uri)), []
    with server.admin_connect("bench").cursor() as cur:
        for probe in range(probes):
            committed = time.perf_counter()
            # a new value every time: an UPDATE that changes nothing writes no row event
            cur.execute("UPDATE events SET note = %s WHERE id = %s", (f"probe {probe} at {time.time()}", probe + 1))
            latencies.append(seconds_until_in_lake(store, control, info, committed))
            time.sleep(random.uniform(0.3, 1.0))  # commits land anywhere in the stream's poll cycle
    return latencies


def latency_section(server: Any, args: argparse.Namespace, control: Any, home: str) -> dict[str, Any]:
    """The stream operator's own loop (no deferral: a caught-up stream waits on its binlog connection);
    it stops once idle for 5 s after the probes (and the load) end."""
    from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator

    results: dict[str, Any] = {}
    for label, load in (("idle", 0), ("1,000 rows/s", 1000)):
        samples: list[float] = []
        for attempt in range(args.repeat):
            base_uri = f"{home}/latency-{label[:4]}-{attempt}"
            operator = MySqlBinlogStreamOperator(task_id="stream", base_uri=base_uri, tables=["bench.events"],
                                                 startup_mode="latest-offset", deferrable=False,
                                                 stop_after_idle_seconds=5)
            stream = threading.Thread(target=operator.execute, args=({},), daemon=True)
            stream.start()
            writer = SteadyLoad(server, "events", 200_000, load) if load else None
            if writer:
                writer.start()
            samples += commit_to_lake_latencies(server, control, base_uri, probes=20)
            if writer:
                writer.stop.set()
                writer.join()
            stream.join()
        results[label] = {"p50": statistics.median(samples), "p95": quantile(samples, 0.95), "commits": len(samples),
                          "runs": args.repeat}
        print(f"latency {label}: p50 {results[label]['p50']:.2f} s, p95 {results[label]['p95']:.2f} s", flush=True)
    return results


# -- memory ------------------------------------------------------------------------------------------


def memory_section(server: Any, args: argparse.Namespace, config: Any, control: Any) -> dict[str, Any]:
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo

    with server.admin_connect("bench").cursor() as cur:
        load_orders(cur, args.big_transaction, table="big")
        start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
        cur.execute("UPDATE big SET amount = amount + 1")  # one transaction
    env = {**os.environ, "MYSQL_CDC_PASSWORD": config.password, "PYTHONPATH": str(ROOT)}
    results = {}
    for label, limits in (("default batch bounds", {}),
                          ("bounds above the transaction", {"max_events": 10**12, "max_bytes": 10**15})):
        command = [sys.executable, "-m", "bench.common.stream_child", scratch_dir("bench-rss-"),
                   json.dumps(config.to_dict()), json.dumps(start.to_dict()), json.dumps(limits)]
        peak, out = child_peak_rss_mib(command, env, ROOT)
        results[label] = {"peak_rss_mib": peak, "rows": int(out.split("rows=")[1])}
        print(f"memory, one {args.big_transaction:,}-row transaction, {label}: peak RSS {peak:,.0f} MiB", flush=True)
    return {"transaction_rows": args.big_transaction, "bounds": results}


# -- the report --------------------------------------------------------------------------------------


def _ratio_row(label: str, runs: list[dict[str, Any]], rate: str, ratio: str | None) -> str:
    rates = f"{statistics.median([r[rate] for r in runs]):,.0f}"
    return f"| {label} | {rates} | {'' if ratio is None else f'{statistics.median([r[ratio] for r in runs]):.2f}x'} |"


def report(sections: dict[str, Any]) -> str:
    """This benchmark's sections of RESULTS.md from the stored results: each with the date, machine and runs it
    had; figures are medians over the runs, ratios are computed per run, then their median taken."""
    lines: list[str] = []

    def heading(name: str, title: str) -> None:
        section = sections[name]
        facts = ", ".join(f"{k} {v}" for k, v in section["machine"].items())
        lines.extend([f"## {title}", "", f"Written by `.venv/bin/python -m bench.peers`. {section['date']}, "
                      f"{section['repeat']} run(s), medians (ratios per run, then their median); {facts}", ""])

    for name in sorted((k for k in sections if k.startswith("snapshot")), key=lambda k: sections[k]["data"]["rows"]):
        runs = sections[name]["data"]["runs"]
        heading(name, f"Snapshot: {sections[name]['data']['setup']}, ~160 B a row")
        lines += ["| reader | rows/s | ours / it |", "|---|---|---|",
                  _ratio_row("our example DAG (split + mapped spark-submit + Parquet + fix-up, via Airflow)", runs,
                             "ours", None),
                  _ratio_row("Spark JDBC (Connector/J) -> Parquet, spark-submit wall", runs, "jdbc", "vs_jdbc"),
                  _ratio_row("`mariadb --batch --quick` > /dev/null", runs, "client", "vs_client"), "",
                  "Peak resident memory while ours ran (MiB): " + ", ".join(
                      f"{k} {statistics.median([r['rss'][k] for r in runs]) / 1024:,.0f}" for k in runs[0]["rss"]), ""]
    for name in sorted((k for k in sections if k.startswith("binlog")), key=lambda k: sections[k]["data"]["events"]):
        runs = sections[name]["data"]["runs"]
        heading(name, f"Binlog: {runs[0]['events']:,} row events (updates in 10,000-row transactions, 1 in 10 "
                      "an insert, 1 in 10 a delete)")
        lines += ["| reader | row events/s | ours / it |", "|---|---|---|",
                  _ratio_row(f"our stream into the lake ({runs[0]['change_rows']:,} change rows)", runs, "ours", None),
                  _ratio_row("raw mysql-replication iteration", runs, "raw", "vs_raw"),
                  _ratio_row("`mariadb-binlog --base64-output=decode-rows -v` > /dev/null", runs, "c_decoder",
                             "vs_c"), ""]
    if "latency" in sections:
        heading("latency", "Commit-to-lake latency (the stream operator following the binlog in the worker)")
        lines += ["| load | p50 | p95 | commits |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['p50']:.2f} s | {v['p95']:.2f} s | {v['commits']} |"
                  for k, v in sections["latency"]["data"].items()]
        lines += [""]
    if "memory" in sections:
        memory = sections["memory"]["data"]
        heading("memory", f"Stream memory: one transaction of {memory['transaction_rows']:,} rows")
        lines += ["| batch bounds | peak RSS of the stream process | change rows |", "|---|---|---|"]
        lines += [f"| {k} | {v['peak_rss_mib']:,.0f} MiB | {v['rows']:,} |" for k, v in memory["bounds"].items()]
        lines += [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    sections = [s for s in args.only.split(",") if s]
    if set(sections) - set(SECTIONS):
        raise SystemExit(f"--only takes {', '.join(SECTIONS)}")
    home = scratch_dir("bench-airflow-")  # before anything imports Airflow
    os.environ.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                       "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags")})
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig

    results: dict[str, Any] = {}
    with throwaway_server(args.port) as server:
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[*]"})
        os.environ["AIRFLOW_CONN_MYSQL_CDC_DEFAULT"] = json.dumps({
            "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": server.cdc_password})
        control = config.connect()
        with control.cursor() as cur:
            cur.execute("SELECT VERSION()")
            facts = machine(f"MariaDB {cur.fetchone()[0]}")
        if "snapshot" in sections:
            subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                           capture_output=True)
            with server.admin_connect("bench").cursor() as cur:
                load_orders(cur, args.rows)
            results[f"snapshot {args.rows}"] = snapshot_section(server, args, home)  # one result per table size
        if {"binlog", "latency"} & set(sections):
            with server.admin_connect("bench").cursor() as cur:
                load_orders(cur, 200_000, table="events")
        if "binlog" in sections:  # one result per number of events (RESULTS.md shows each)
            results[f"binlog {args.events}"] = binlog_section(server, args, config, control)
        if "latency" in sections:
            results["latency"] = latency_section(server, args, control, home)
        if "memory" in sections:
            results["memory"] = memory_section(server, args, config, control)
    # sections not run this time keep their last results
    stored_path = args.results.with_suffix(".json")
    stored = json.loads(stored_path.read_text()) if stored_path.exists() else {}
    for older in ("binlog", "snapshot"):  # results of older runs, whatever their number of events or rows
        stored.pop(older, None)
    for name, data in results.items():
        stored[name] = {"date": dt.date.today().isoformat(), "repeat": 1 if name == "memory" else args.repeat,
                        "machine": facts, "data": data}
    stored_path.write_text(json.dumps(stored, indent=1) + "\n")
    text = report(stored)
    write_sections(args.results, text)  # sections of other benchmarks stay
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
