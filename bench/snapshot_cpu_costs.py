"""Two costs of a snapshot job measured in CPU seconds, which a loaded 2-core machine keeps far steadier
than wall time, each against its baseline in the same run, the two taking turns:

- reading a table's chunks as the chunk reader did, one SELECT per chunk between watermarks of its own,
  against one SELECT per group of 16 chunks between one pair of watermarks (``ArrowSelect.read_many``):
  CPU of this process (connectorx's threads included) and of the MariaDB server;
- a ``spark-submit`` of a PySpark application that starts, runs one two-task job and stops, with the
  JVM's default compilers against the quick compiler only (``operators.spark_submit.DRIVER_JIT``): CPU of
  the whole process tree (JVM, Python driver and workers).

    .venv/bin/python -m bench.snapshot_cpu_costs [--rows 1000000] [--repeat 3]

Starts a throwaway MariaDB of its own; writes its section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset, read_snapshot_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import DEFAULT_GROUP_SIZE
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.operators.spark_submit import DRIVER_JIT, job_spark_conf
from bench.common.measure import machine
from bench.common.results import write_sections
from bench.common.server import load_orders, throwaway_server

ROOT = Path(__file__).resolve().parents[1]
NOOP_JOB = '''
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("bench noop").getOrCreate()
assert spark.sparkContext.parallelize([1, 2], 2).map(lambda x: x * 2).collect() == [2, 4]
spark.stop()
'''


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_chunks(control: Any, info: ServerInfo, select: ArrowSelect, chunks: list[Any], together: int) -> int:
    """The chunk reader's steps without the fix-up: LW (a consistent snapshot's binlog position), SELECT,
    HW; per chunk, or per ``together`` chunks."""
    rows = 0
    for first in range(0, len(chunks), together):
        group = chunks[first : first + together]
        with control.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            read_snapshot_offset(control, with_gtid=False)
            cur.execute("COMMIT")
        rows += sum(t.num_rows for t in (select.read_many(group) if together > 1 else [select.read(group[0])]))
        read_current_offset(control, info, with_gtid=False)
    return rows


def chunk_reads(server: Any, repeat: int) -> dict[str, list[dict[str, float]]]:
    config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
    control = config.connect()
    info = ServerInfo.read(control)
    schema = load_table_schema(control, TableId("bench", "orders"))
    chunks = split_table(control, schema, 8096)
    select = ArrowSelect(config, schema)
    results: dict[str, list[dict[str, float]]] = {"each chunk": [], f"{DEFAULT_GROUP_SIZE} chunks a SELECT": []}
    for attempt in range(repeat):
        order = list(results) if attempt % 2 == 0 else list(reversed(results))
        for name in order:
            wall, mine, theirs = time.perf_counter(), time.process_time(), server_cpu(server.pid)
            rows = read_chunks(control, info, select, chunks, 1 if name == "each chunk" else DEFAULT_GROUP_SIZE)
            results[name].append({"rows": rows, "wall": time.perf_counter() - wall,
                                   "client_cpu": time.process_time() - mine,
                                   "server_cpu": server_cpu(server.pid) - theirs})
            print(f"{name}: {results[name][-1]}", flush=True)
    control.close()
    return results


def spark_submit_cpu(java_options: str, application: Path) -> dict[str, float]:
    conf = {**job_spark_conf(), "spark.driver.extraJavaOptions": java_options}
    python = sys.executable
    command = [str(Path(python).with_name("spark-submit")), "--master", "local[*]"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
           "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}"}
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([*command, str(application)], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": time.perf_counter() - wall,
            "cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime}


def spark_starts(repeat: int) -> dict[str, list[dict[str, float]]]:
    log4j = job_spark_conf()["spark.driver.extraJavaOptions"].replace(DRIVER_JIT, "").strip()
    variants = {"the JVM's default compilers": log4j, f"quick compiler only ({DRIVER_JIT})": f"{log4j} {DRIVER_JIT}"}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as folder:
        application = Path(folder) / "noop_job.py"
        application.write_text(NOOP_JOB)
        for attempt in range(repeat):
            order = list(variants) if attempt % 2 == 0 else list(reversed(variants))
            for name in order:
                results[name].append(spark_submit_cpu(variants[name], application))
                print(f"{name}: {results[name][-1]}", flush=True)
    return results


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(rows: int, reads: dict[str, list[dict[str, float]]], starts: dict[str, list[dict[str, float]]],
           facts: dict[str, Any], repeat: int, load: tuple[float, float]) -> str:
    base_read, base_start = next(iter(reads.values())), next(iter(starts.values()))
    lines = ["## Snapshot job costs in CPU seconds: grouped chunk SELECTs, the driver JVM's compiler", "",
             f"Written by `.venv/bin/python -m bench.snapshot_cpu_costs --rows {rows} --repeat {repeat}` (not by "
             f"`bench.peers`). {dt.date.today().isoformat()}, {repeat} alternating runs of each, medians; "
             + ", ".join(f"{k} {v}" for k, v in facts.items())
             + f"; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end (other jobs share the cores: "
               "the CPU seconds are the figures to read, the wall times vary with the load).", "",
             f"**Reading {rows:,} rows in chunks of 8,096 (LW, SELECT through connectorx, HW; no fix-up)**", "",
             "| reads | wall s | CPU s, this process | CPU s, MariaDB | CPU s, both / per chunk's |",
             "|---|---|---|---|---|"]
    for name, runs in reads.items():
        both = median(runs, "client_cpu") + median(runs, "server_cpu")
        lines.append(f"| {name} | {median(runs, 'wall'):.2f} | {median(runs, 'client_cpu'):.2f} | "
                     f"{median(runs, 'server_cpu'):.2f} | "
                     f"{both / (median(base_read, 'client_cpu') + median(base_read, 'server_cpu')):.2f}x |")
    lines += ["", "**A `spark-submit` of a job of two tasks on `local[*]`, start to stop**", "",
              "| driver JVM | wall s | CPU s, the process tree | CPU / the default's |", "|---|---|---|---|"]
    for name, runs in starts.items():
        lines.append(f"| {name} | {median(runs, 'wall'):.1f} | {median(runs, 'cpu'):.1f} | "
                     f"{median(runs, 'cpu') / median(base_start, 'cpu'):.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=33095)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    with throwaway_server(args.port) as server:
        with server.admin_connect("bench").cursor() as cur:
            load_orders(cur, args.rows)
            cur.execute("SELECT VERSION()")
            facts = machine(f"MariaDB {cur.fetchone()[0]}")
        reads = chunk_reads(server, args.repeat)
    starts = spark_starts(args.repeat)
    text = report(args.rows, reads, starts, facts, args.repeat, (load_start, os.getloadavg()[0]))
    write_sections(args.results, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
