"""Commit-to-lake latency of a *deferred* stream under Airflow's real components: a commit made while
the stream task waits in the triggerer, until the lake's checkpoint covers it.

The path measured: the trigger's poll of the binlog position (``poll_interval`` 1 s) and its scan for a
captured change, the trigger event, the scheduler resuming the task, the LocalExecutor starting it
again, the stream runner opening the binlog at its checkpoint and committing the batch. (A stream
still polling in the worker, before ``defer_after_idle_seconds``, is much faster: see the "Commit-to-
lake latency" section that ``bench.peers`` writes.)

It starts a throwaway MariaDB and a deployment of ``dev/airflow_deployment.py``, runs the example DAG
on a small table (snapshot, then the stream with ``defer_after_idle_seconds`` 2), and for each sample
waits until the REST API shows the stream ``deferred``, commits one row and polls the checkpoint.
Appends (or replaces) its section of ``bench/RESULTS.md``.

    .venv/bin/python -m bench.deferred_latency [--samples 10] [--target 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common.measure import machine, quantile, seconds_until_in_lake
from bench.common.results import write_sections
from bench.common.server import throwaway_server
from dev import airflow_deployment

ROOT = Path(__file__).resolve().parents[1]
DAG_ID = "mysql_cdc_example"
SETTLE = 8.0  # seconds a sample waits after the stream has deferred before it commits
TITLE = "## Deferred stream: commit-to-lake latency under the real triggerer"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10, help="commits made while the stream is deferred")
    parser.add_argument("--target", type=float, default=3.0, help="seconds the median should stay under")
    parser.add_argument("--port", type=int, default=33091, help="the throwaway MariaDB's port")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace, work: Path) -> tuple[list[float], dict[str, object]]:
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.read.replica import read_table
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    with throwaway_server(args.port) as server:
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(80))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('n', seq) FROM seq_1_to_1000")
            cur.execute("SELECT VERSION()")
            facts = machine(f"MariaDB {cur.fetchone()[0]}")
        env = {
            "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps({
                "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
                "password": server.cdc_password, "extra": {"server_id": "5800-5809"}}),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        }
        base = work / "airflow"
        deployment = airflow_deployment.start(base, env=env, parallelism=4)
        try:
            deployment.unpause(DAG_ID)
            base_uri = str(work / "lake")
            run_id = deployment.trigger(DAG_ID, {"tables": ["bench.t"], "base_uri": base_uri,
                                                 "stop_after_idle_seconds": 3600, "defer_after_idle_seconds": 2})
            print(f"run {run_id} of {DAG_ID} at {deployment.url}; logs in {base}/logs", flush=True)
            stream_path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/stream"

            def deferred() -> bool:
                if deployment.dag_run(DAG_ID, run_id)["state"] not in ("queued", "running"):
                    raise RuntimeError(f"the run ended: {deployment.task_instances(DAG_ID, run_id)}")
                return bool(deployment.api("GET", stream_path)["state"] == "deferred")

            control = server.cdc_connect()
            info, store, latencies = ServerInfo.read(control), StreamStore(Lake.at(base_uri)), []
            with admin.cursor() as cur:
                inserted: list[int] = []
                while len(latencies) < args.samples:
                    sample = len(latencies)
                    try:
                        deployment.wait(deferred, 300, "the stream to defer", interval=0.2)
                    except TimeoutError:
                        raise TimeoutError(f"the stream did not defer again within 300 s: "
                                           f"{deployment.api('GET', stream_path)}; logs in {base}") from None
                    # a commit within ~5 s of the deferral meets Airflow 3.3.2's defer/resume race (the
                    # resumed try is marked up_for_retry): wait past it, then anywhere in the poll cycle
                    time.sleep(SETTLE + random.uniform(0.0, 1.0))
                    if deployment.api("GET", stream_path)["state"] != "deferred":
                        continue
                    tries = deployment.api("GET", stream_path)["try_number"]
                    inserted.append(100_000 + sample)
                    cur.execute("INSERT INTO t VALUES (%s, %s)", (inserted[-1], f"probe {sample}"))
                    latencies.append(seconds_until_in_lake(store, control, info, time.perf_counter()))
                    retried = deployment.api("GET", stream_path)["try_number"] != tries
                    print(f"sample {sample}: {latencies[-1]:.2f} s{' (the stream was retried)' if retried else ''}",
                          flush=True)
            ids = set(read_table(base_uri, "bench.t").column("id").to_pylist())
            missing = set(inserted) - ids
            if missing:
                raise RuntimeError(f"rows {sorted(missing)} committed but not in the replica")
            stream = deployment.api("GET", stream_path)
            facts_run = {"stream task try at the end": stream["try_number"]}
        finally:
            airflow_deployment.stop(base)
    return latencies, {**facts, **facts_run}


def section(latencies: list[float], facts: dict[str, object], target: float) -> str:
    median, p95 = statistics.median(latencies), quantile(latencies, 0.95)
    machine_facts = ", ".join(f"{k} {v}" for k, v in facts.items())
    verdict = "within" if median < target else "over"
    return "\n".join([
        TITLE, "",
        f"Written by `.venv/bin/python -m bench.deferred_latency` (not by `bench.peers`). "
        f"{dt.date.today().isoformat()}, 1 run of {len(latencies)} commits; {machine_facts}", "",
        "A single-row commit made while the stream task is deferred (it waits in the triggerer after "
        "`defer_after_idle_seconds` 2 s idle), until the lake's checkpoint covers it: trigger poll (1 s) "
        "and scan, trigger event, the scheduler resuming the task, the LocalExecutor starting it, the "
        "stream committing. Api-server, scheduler (LocalExecutor), dag-processor and triggerer as separate "
        "processes (`dev/airflow_deployment.py`). Each commit comes at least 8 s after the deferral: Airflow "
        "3.3.2 marks a task resumed within ~5 s of deferring up_for_retry (a race of the executor's events; "
        "the retry continues from the checkpoint, after `retry_delay`).", "",
        "| p50 | p95 | min | max | commits | target |", "|---|---|---|---|---|---|",
        f"| {median:.2f} s | {p95:.2f} s | {min(latencies):.2f} s | {max(latencies):.2f} s | {len(latencies)} "
        f"| p50 < {target:g} s: {verdict} |", "",
    ])


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    work = tempfile.mkdtemp(prefix="bench-deferred-")
    latencies, facts = measure(args, Path(work))  # a failed run keeps its folder (logs) for a look
    shutil.rmtree(work, ignore_errors=True)
    text = section(latencies, facts, args.target)
    write_sections(args.results, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
