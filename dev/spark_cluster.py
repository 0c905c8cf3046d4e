"""A throwaway Spark standalone cluster (one master, N workers) from pyspark's own distribution.

The snapshot operator behaves differently on a cluster master than on ``local[*]``: executors are
JVMs of their own, started by workers, with Python workers of their own, and nothing of the Airflow
worker's environment reaches them unless it is shipped. To test that on real parts without a cluster,
this starts the same classes a standalone deployment runs (``spark-class
org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``) on 127.0.0.1 and free ports,
each worker with bounded cores and memory, each process in a process group of its own (a worker's
executors are its children, so stopping the group stops them too). Readiness is the master's own
JSON (``/json/``) listing every worker ALIVE, within a bounded wait.

    python -m dev.spark_cluster start --dir .local/spark   # prints the cluster as JSON
    python -m dev.spark_cluster stop --dir .local/spark
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dev.ports import free_port
from dev.processes import alive, stop_group


def spark_home() -> Path:
    """pyspark's folder: it holds ``bin/spark-class`` and Spark's jars (the full pyspark, not pyspark-client)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise RuntimeError(f"{home} has no bin/spark-class or jars: this is pyspark-client, not the full pyspark; "
                           f"reinstall the package (pip install .), which pins both to one release")
    return home



@dataclass
class SparkCluster:
    base: str
    master_port: int
    master_ui_port: int
    pids: dict[str, int] = field(default_factory=dict)  # component name -> pid (= its process group)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's JSON: ``workers`` (with ``state``), ``activeapps``, ``completedapps``, ..."""
        status: dict[str, Any] = get_json(f"{self.master_ui}/json/", timeout)
        return status

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status()["workers"] if w.get("state") == "ALIVE"]

    def log_file(self, component: str) -> Path:
        return Path(self.base) / f"{component}.log"


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback only)
        return json.loads(response.read().decode())


def _state_file(base: Path) -> Path:
    return base / "cluster.json"


def _spawn(base: Path, name: str, args: list[str], env: dict[str, str]) -> int:
    log = (base / f"{name}.log").open("ab")
    try:
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env, cwd=base,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        log.close()
    return proc.pid


def _environment(base: Path, daemon_memory: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    conf_dir = base / "conf"  # empty: no spark-defaults.conf or spark-env.sh of the machine's
    conf_dir.mkdir(exist_ok=True)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_DAEMON_MEMORY": daemon_memory,  # the master's and workers' own heap (Spark's default: 1g)
        # no REST submission server on a fixed port (6066): the tests submit through spark://
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    })
    return env


def start(base: Path, workers: int = 2, cores: int = 1, memory: str = "1g", daemon_memory: str = "256m",
          timeout: float = 90.0) -> SparkCluster:
    """A master and ``workers`` workers, each offering ``cores`` cores and ``memory`` to executors; returns
    once the master lists every worker ALIVE (else stops what it started and raises, with the logs' ends)."""
    base.mkdir(parents=True, exist_ok=True)
    env = _environment(base, daemon_memory)
    cluster = SparkCluster(str(base), free_port(), free_port())
    try:
        cluster.pids["master"] = _spawn(base, "master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(cluster.master_port),
            "--webui-port", str(cluster.master_ui_port),
        ], env)
        for i in range(workers):
            work_dir = base / f"worker-{i}"
            work_dir.mkdir(exist_ok=True)
            cluster.pids[f"worker-{i}"] = _spawn(base, f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", cluster.master_url, "--host", "127.0.0.1",
                "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(cores),
                "--memory", memory, "--work-dir", str(work_dir),
            ], env)
        _state_file(base).write_text(json.dumps(asdict(cluster), indent=1))
        _wait_ready(cluster, workers, timeout)
    except BaseException:
        stop(base)
        raise
    return cluster


def _wait_ready(cluster: SparkCluster, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = "the master's UI did not answer"
    while time.monotonic() < deadline:
        for component, pid in cluster.pids.items():
            if not alive(pid):
                raise RuntimeError(f"spark {component} (pid {pid}) exited while starting; its log ends:\n"
                                   f"{_tail(cluster.log_file(component))}")
        try:
            ready = cluster.alive_workers()
        except OSError:
            pass
        except ValueError:  # a page of HTML at /json/: the master's UI is up before its status servlet
            seen = "the master's UI answered /json/ with a page, not its status"
        else:
            if len(ready) >= workers:
                return
            seen = f"{len(ready)} of {workers} workers ALIVE"
        time.sleep(0.5)
    logs = "\n".join(f"--- {c}:\n{_tail(cluster.log_file(c), 1500)}" for c in cluster.pids)
    raise TimeoutError(f"the Spark cluster was not ready within {timeout:.0f} s ({seen}); logs:\n{logs}")


def running(base: Path) -> SparkCluster | None:
    state = _state_file(base)
    if not state.exists():
        return None
    cluster = SparkCluster(**json.loads(state.read_text()))
    return cluster if any(alive(pid) for pid in cluster.pids.values()) else None


def stop(base: Path, timeout: float = 30.0) -> None:
    """Workers first (with their executors), then the master: SIGTERM to each process group, SIGKILL to
    what is left after ``timeout``."""
    state = _state_file(base)
    if not state.exists():
        return
    cluster = SparkCluster(**json.loads(state.read_text()))
    for component in sorted(cluster.pids, key=lambda c: c == "master"):
        stop_group(cluster.pids[component], signal.SIGTERM, timeout)
    state.unlink()





def _tail(path: Path, size: int = 3000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--dir", type=Path, required=True, help="the cluster's folder (logs, work dirs, state)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    parser.add_argument("--memory", default="1g", help="memory each worker offers to executors")
    args = parser.parse_args(argv)
    if args.action == "start":
        if running(args.dir):
            print(f"a cluster is already running from {args.dir}", file=sys.stderr)
            return 1
        cluster = start(args.dir.resolve(), args.workers, args.cores, args.memory)
        print(json.dumps({"master": cluster.master_url, "ui": cluster.master_ui, "pids": cluster.pids}))
    elif args.action == "stop":
        stop(args.dir)
    else:
        found = running(args.dir)
        print(json.dumps({"master": found.master_url, "ui": found.master_ui, "pids": found.pids})
              if found else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
