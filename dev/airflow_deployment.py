"""A throwaway Airflow 3.3 deployment made of its real components, for the tests and for a person.

``airflow api-server``, ``airflow scheduler`` (LocalExecutor, ``parallelism`` worker slots),
``airflow dag-processor`` and ``airflow triggerer`` run as separate processes, each in a process
group of its own, on a private ``AIRFLOW_HOME`` under ``--dir`` with this repository's ``dags/``
folder, the API on loopback at a free port, no login (the simple auth manager makes everyone an
admin) and no example DAGs; DAGs stay paused until unpaused (``--unpause DAG_ID``). The metadata
database is SQLite in the home folder: in Airflow 3 the task processes reach it only through the
API server, and parallel LocalExecutor tasks did not hit "database is locked" here.
Connections are passed as ``AIRFLOW_CONN_*`` variables of every component (``--conn ID=JSON``).

    python -m dev.airflow_deployment start --dir .local/airflow-deployment \\
        --conn spark_default='{"conn_type": "spark", "host": "local[2]"}' --unpause mysql_cdc_example
        # prints the deployment (url, home, logs, pids) as JSON
    python -m dev.airflow_deployment stop --dir .local/airflow-deployment

Then open the printed ``url`` in a browser. Each component logs to ``<dir>/logs/<component>.log``,
task logs are in the ``logs`` folder of the Airflow home inside ``<dir>``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dev.ports import free_port
from dev.processes import alive, stop_group

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
# Health keys of GET /api/v2/monitor/health for the components that report a heartbeat
_HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}


@dataclass
class AirflowDeployment:
    """A running deployment: where it lives, its URL, and the process (group) id of each component."""

    base: str
    home: str
    url: str
    port: int
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)

    # -- the REST API ----------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """``method`` on ``/api/v2/<path>`` (or an absolute path); the decoded JSON answer."""
        url = self.url + (path if path.startswith("/") else f"/api/v2/{path}")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback only)
                text = response.read().decode()
        except urllib.error.HTTPError as err:
            raise AirflowApiError(f"{method} {url}: HTTP {err.code}: {err.read().decode(errors='replace')[:2000]}",
                                  err.code) from None
        return json.loads(text) if text else None

    def trigger(self, dag_id: str, conf: Mapping[str, Any], run_id: str | None = None) -> str:
        """Triggers a run of ``dag_id`` with ``conf``; returns its run id."""
        body: dict[str, Any] = {"conf": dict(conf), "logical_date": None}
        if run_id:
            body["dag_run_id"] = run_id
        return str(self.api("POST", f"dags/{dag_id}/dagRuns", body)["dag_run_id"])

    def unpause(self, dag_id: str, timeout: float = 120.0) -> None:
        """Waits until the dag-processor has parsed ``dag_id`` (at most ``timeout`` s), then unpauses it."""

        def parsed() -> bool:
            try:
                self.api("GET", f"dags/{dag_id}")
            except AirflowApiError as err:
                if err.status != 404:
                    raise
                return False
            return True

        self.wait(parsed, timeout, f"the dag-processor to parse {dag_id}")
        self.api("PATCH", f"dags/{dag_id}", {"is_paused": False})

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped ones one per map index."""
        found: list[dict[str, Any]] = []
        while True:
            page = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100&offset={len(found)}")
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= page["total_entries"]:
                return found

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float,
                     states: tuple[str, ...] = ("success", "failed")) -> dict[str, Any]:
        """Polls the run until its state is one of ``states``; raises ``TimeoutError`` after ``timeout`` s."""
        return self.wait(lambda: (r if (r := self.dag_run(dag_id, run_id))["state"] in states else None), timeout,
                         f"run {run_id} of {dag_id} to reach {'/'.join(states)}")

    def wait(self, probe: Any, timeout: float, what: str, interval: float = 1.0) -> Any:
        """Calls ``probe()`` until it returns something truthy, for at most ``timeout`` seconds; checks
        on the way that every component is still alive (a dead one fails at once with its log's end)."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}; logs in {self.base}/logs")
            time.sleep(interval)

    # -- the processes ---------------------------------------------------------------------------

    def log_file(self, component: str) -> Path:
        return Path(self.base) / "logs" / f"{component}.log"

    def check_alive(self) -> None:
        for component, pid in self.pids.items():
            if not alive(pid):
                raise RuntimeError(f"airflow {component} (pid {pid}) has exited; its log ends:\n"
                                   f"{_tail(self.log_file(component))}")

    def start_component(self, component: str) -> int:
        """Starts one component (again) in a new process group; records its pid."""
        log = self.log_file(component).open("ab")
        args, env = [_airflow(), component], self.env
        if component == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
            # it serves the provider's "MySQL CDC" page, a plugin of the provider info, which Airflow loads only
            # when it discovers providers eagerly; the other components need not
            env = {**env, "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False"}
        elif component in ("scheduler", "triggerer"):
            args += ["--skip-serve-logs"]  # task and trigger logs are read from the shared home folder
        proc = subprocess.Popen(args, env=env, cwd=self.home, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.pids[component] = proc.pid
        self._save()
        return proc.pid

    def kill_component(self, component: str, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """Sends ``sig`` to the component's process group and waits for its leader to exit (SIGKILL
        after ``timeout``); the component is then no longer watched by ``check_alive``."""
        pid = self.pids.pop(component)
        self._save()
        stop_group(pid, sig, timeout)

    def wait_healthy(self, timeout: float, components: tuple[str, ...] = COMPONENTS) -> None:
        """Until the API answers and every heartbeat component in ``components`` reports healthy."""

        def healthy() -> bool:
            try:
                health = self.api("GET", "monitor/health", timeout=5)
            except (OSError, AirflowApiError):
                return False
            return health["metadatabase"]["status"] == "healthy" and all(
                (health.get(_HEALTH_KEYS[c]) or {}).get("status") == "healthy" for c in components if c in _HEALTH_KEYS
            )

        self.wait(healthy, timeout, f"the components {', '.join(components)} to report healthy")

    def _save(self) -> None:
        _state_file(Path(self.base)).write_text(json.dumps(asdict(self), indent=1))


class AirflowApiError(RuntimeError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _state_file(base: Path) -> Path:
    return base / "deployment.json"


def _airflow() -> str:
    return str(Path(sys.executable).with_name("airflow"))





def _tail(path: Path, size: int = 3000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else "(no log)"



def environment(home: Path, port: int, parallelism: int, dags_folder: Path,
                extra: Mapping[str, str]) -> dict[str, str]:
    """The components' environment: this one without any ``AIRFLOW_*`` variable, then the deployment's
    settings, then ``extra`` (connections as ``AIRFLOW_CONN_*``, other settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    url = f"http://127.0.0.1:{port}"
    env.update({
        "AIRFLOW_HOME": str(home),
        # spark-submit, and find-spark-home's python3, come from PATH: this environment's first
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # only the DAGs asked for run (unpause)
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        # new and changed DAG files are seen within seconds
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        # Airflow 3.3.2 can mark a task that defers and is resumed within a few seconds up_for_retry (the
        # stale "finished" event of the deferred workload meets the resumed one); the stream's retry
        # continues from its checkpoint, so let it come after seconds instead of the default 300 s
        "AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY": "10",
        # a triggerer that died hands its triggers to a live one after this many seconds without heartbeat
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    })
    env.update(extra)
    return env


def running(base: Path) -> AirflowDeployment | None:
    """The deployment recorded under ``base`` if all its components are alive."""
    state = _state_file(base.resolve())
    if not state.exists():
        return None
    deployment = AirflowDeployment(**json.loads(state.read_text()))
    if set(deployment.pids) != set(COMPONENTS) or not all(alive(p) for p in deployment.pids.values()):
        return None
    return deployment


def start(base: Path, port: int | None = None, env: Mapping[str, str] | None = None, parallelism: int = 4,
          dags_folder: Path = ROOT / "dags", timeout: float = 180.0) -> AirflowDeployment:
    """Migrates the metadata database and starts the four components under ``base``; returns once the
    API answers and the scheduler, dag-processor and triggerer report healthy (at most ``timeout`` s).
    A deployment already running under ``base`` is stopped first (its settings may differ)."""
    base = base.resolve()
    stop(base)
    home = base / "home"
    (base / "logs").mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    deployment = AirflowDeployment(str(base), str(home), f"http://127.0.0.1:{port}", port,
                                   environment(home, port, parallelism, dags_folder, env or {}))
    deployment._save()
    migrate = subprocess.run([_airflow(), "db", "migrate"], env=deployment.env, cwd=home, capture_output=True,
                             text=True, timeout=timeout)
    if migrate.returncode:
        raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-2000:]}\n{migrate.stderr[-3000:]}")
    try:
        for component in COMPONENTS:
            deployment.start_component(component)
        deployment.wait_healthy(timeout)
    except BaseException:
        stop(base)
        raise
    return deployment


def stop(base: Path, timeout: float = 30.0) -> None:
    """Stops every component recorded under ``base`` by its process group (SIGTERM, then SIGKILL)."""
    state = _state_file(base.resolve())
    if not state.exists():
        return
    deployment = AirflowDeployment(**json.loads(state.read_text()))
    for component in reversed(COMPONENTS):
        pid = deployment.pids.pop(component, None)
        if pid is not None:
            stop_group(pid, signal.SIGTERM, timeout)
    deployment._save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--dir", default=".local/airflow-deployment", help="home, logs and state of the deployment")
    parser.add_argument("--port", type=int, default=0, help="the API server's port (default: a free one)")
    parser.add_argument("--parallelism", type=int, default=4, help="LocalExecutor worker slots")
    parser.add_argument("--conn", action="append", default=[], metavar="ID=JSON",
                        help="a connection for every component, e.g. spark_default='{\"conn_type\": \"spark\", ...}'")
    parser.add_argument("--unpause", action="append", default=[], metavar="DAG_ID", help="unpause this DAG")
    args = parser.parse_args(argv)
    base = Path(args.dir)
    if args.action == "start":
        extra = {}
        for item in args.conn:
            conn_id, _, value = item.partition("=")
            extra[f"AIRFLOW_CONN_{conn_id.upper()}"] = value
        deployment = start(base, args.port or None, extra, args.parallelism)
        for dag_id in args.unpause:
            deployment.unpause(dag_id)
        print(json.dumps({"url": deployment.url, "home": deployment.home, "logs": f"{deployment.base}/logs",
                          "pids": deployment.pids}))
    elif args.action == "stop":
        stop(base)
    else:
        deployment = running(base)
        print(json.dumps({"url": deployment.url, "pids": deployment.pids}) if deployment else "not running")
        return 0 if deployment else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
