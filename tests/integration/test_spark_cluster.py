"""The example DAG's snapshot on a real Spark standalone cluster (``dev/spark_cluster.py``: a master and
two workers from pyspark's own distribution, on loopback), not on ``local[*]``.

What differs from a local master, and is checked here on the running job:

- the executors are JVMs of their own, started by the workers, with Python workers of their own; the
  operator injects nothing into their environment, so their Python comes the Spark way:
  ``spark.pyspark.python`` in the client's ``spark-defaults.conf`` (``SPARK_CONF_DIR``), which is what a
  user of a cluster whose workers have the same Python at the same path would set;
- the CDC password appears on no command line (``ps`` of the whole machine), in no Spark UI JSON (the
  application's ``/api/v1/.../environment`` and ``/executors`` on the driver's UI port, the master's and
  the workers' ``/json/``) and in no executor launch log, sampled while the snapshot job runs;
- the lake (a local path: on one machine the workers share the filesystem) equals the source,
  read with ``deltalake`` itself.

One cluster and one DAG run serve every assertion (about a minute and a half here).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import row_key_of
from airflow_provider_mysqlcdc.spark.py_files import is_local_master
from dev import spark_cluster
from dev.mariadb import CDC_GRANTS
from dev.ports import free_port
from dev.spark_cluster import SparkCluster, get_json
from tests.compared_rows import current_rows, table_contents
from tests.integration.example_dag import example_dag

ROWS = 30_000
USER = "cdc_cluster"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone master and two workers (1 core and 1 GB for executors each), stopped at the end."""
    base = tmp_path_factory.mktemp("spark-cluster")
    started = spark_cluster.start(base, workers=2, cores=1, memory="1g", timeout=120)
    yield started
    spark_cluster.stop(base)


class Watcher(threading.Thread):
    """Samples, while the DAG runs, what anyone on the machine can see of the Spark job: the process list
    and the cluster's and the application's UI JSON. Keeps every sample for the assertions."""

    def __init__(self, cluster: SparkCluster, ui_port: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.ui = cluster, f"http://127.0.0.1:{ui_port}/api/v1/applications"
        self.stopping = threading.Event()
        self.texts: list[str] = []  # every sample, for the password search
        # (pid, ppid, args) over all samples: a process's args change when it execs (spark-submit's shell
        # script becomes the SparkSubmit JVM under the same pid), so every form seen is kept
        self.processes: set[tuple[int, int, str]] = set()
        self.environment: dict[str, Any] | None = None
        self.executors: list[dict[str, Any]] = []
        self.app_id: str | None = None

    def run(self) -> None:
        while not self.stopping.wait(0.5):
            self.sample()

    def sample(self) -> None:
        ps = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,args="], capture_output=True, text=True).stdout
        self.texts.append(ps)
        for line in ps.splitlines():
            pid, ppid, args = (line.strip().split(None, 2) + ["", ""])[:3]
            self.processes.add((int(pid), int(ppid), args))
        for url in (f"{self.cluster.master_ui}/json/",
                    *(f"{w['webuiaddress']}/json/" for w in self._workers())):
            self._get(url)
        apps = self._get(self.ui)
        if apps:
            self.app_id = apps[0]["id"]
            environment = self._get(f"{self.ui}/{self.app_id}/environment")
            if environment:
                self.environment = environment
            executors = self._get(f"{self.ui}/{self.app_id}/executors")
            if executors and len(executors) >= len(self.executors):
                self.executors = executors

    def _workers(self) -> list[dict[str, Any]]:
        try:
            return list(self.cluster.status()["workers"])
        except OSError:
            return []

    def _get(self, url: str) -> Any:
        try:
            value = get_json(url, timeout=3)
        except (OSError, ValueError):
            return None
        self.texts.append(json.dumps(value))
        return value


@pytest.fixture()
def cdc_user(admin: Any) -> Iterator[str]:
    """A CDC user of its own with a long random password, so any occurrence of it is a leak."""
    password = f"pw-{secrets.token_hex(16)}"
    with admin.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS {USER}@'%'")
        cur.execute(f"CREATE USER {USER}@'%%' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT {CDC_GRANTS} ON *.* TO {USER}@'%'")
    yield password
    with admin.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS {USER}@'%'")


def test_local_masters_are_only_local() -> None:
    """PATH and PYSPARK_PYTHON are injected for these only; local-cluster has executor JVMs of its own."""
    assert all(is_local_master(m) for m in ("local", "local[2]", "local[*]", "local[4,3]", "local[*,2]"))
    assert not any(is_local_master(m) for m in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "yarn",
                                                "k8s://https://api:6443", "localhost"))


def test_cluster_deploy_mode_needs_the_password_from_a_secret() -> None:
    """A driver on the cluster does not inherit spark-submit's environment: refused, but for a Kubernetes
    driver given the variable from a secret (no Spark property holds the value)."""
    from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
    from airflow_provider_mysqlcdc.operators.spark_submit import check_password_reaches_driver

    secret = {"spark.kubernetes.driver.secretKeyRef.MYSQL_CDC_PASSWORD": "cdc:password"}
    for master in ("spark://127.0.0.1:7077", "yarn", "k8s://https://api:6443"):
        check_password_reaches_driver("spark_default", master, None, None, "MYSQL_CDC_PASSWORD")  # client mode
        check_password_reaches_driver("spark_default", master, "client", None, "MYSQL_CDC_PASSWORD")
        with pytest.raises(InvalidOptionError, match="client deploy mode"):
            check_password_reaches_driver("spark_default", master, "cluster", None, "MYSQL_CDC_PASSWORD")
    check_password_reaches_driver("spark_default", "k8s://https://api:6443", "cluster", secret, "MYSQL_CDC_PASSWORD")
    with pytest.raises(InvalidOptionError):
        check_password_reaches_driver("spark_default", "yarn", "cluster", secret, "MYSQL_CDC_PASSWORD")


def test_example_dag_snapshots_on_a_standalone_cluster_without_showing_the_password(
    airflow_db: None, cluster: SparkCluster, mariadb_server: Any, admin: Any, cdc_conn: Any, cdc_user: str,
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    password = cdc_user
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute(f"INSERT INTO orders SELECT seq, seq % 97, seq / 100, IF(seq % 5 = 0, NULL, CONCAT('n', seq)) "
                    f"FROM seq_1_to_{ROWS}")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()

    # the client side as a cluster user sets it up: spark-submit on PATH, Spark settings in spark-defaults.conf
    ui_port = free_port()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.pyspark.python {sys.executable}\n"  # the workers' Python: the same venv, on this machine
        f"spark.executor.memory 512m\n"
        # tasks wait for both executors (on standalone they would start on the first one to register)
        f"spark.cores.max 2\n"
        f"spark.scheduler.minRegisteredResourcesRatio 1.0\n"
        f"spark.ui.port {ui_port}\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": cluster.master_url}))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": mariadb_server.host, "port": mariadb_server.port, "login": USER,
        "password": password, "extra": {"server_id": "5820-5835"},
    }))
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [f"{database}.orders"], "base_uri": base_uri, "rows_per_batch": 1_000_000,
            "stop_after_idle_seconds": 0}

    watcher = Watcher(cluster, ui_port)
    watcher.start()
    try:
        run = example_dag().test(run_conf=conf)
    finally:
        watcher.stopping.set()
        watcher.join(30)
    assert run.state == "success"
    (snapshot,) = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    assert snapshot.state == "success"

    # the password: in no process's command line, no UI JSON, no executor launch log
    # (sampled while our job ran: its spark-submit, with the connection minus the password, was seen)
    assert any("SparkSubmit" in args and f'"user": "{USER}"' in args for _, _, args in watcher.processes)
    assert all(password not in text for text in watcher.texts)
    assert watcher.environment is not None
    system = dict(watcher.environment["systemProperties"])
    assert "--connection" in system["sun.java.command"]  # the driver's command line, as the UI shows it (unredacted)
    launch_logs = list(Path(cluster.base).glob("worker-*/app-*/*/std*"))
    assert launch_logs and any("Spark Executor Command" in p.read_text() for p in launch_logs)
    assert all(password not in p.read_text(errors="replace") for p in launch_logs)
    assert all(password not in p.read_text(errors="replace") for p in Path(cluster.base).glob("*.log"))

    # the job ran on the cluster: the master lists it, with executors on both workers
    apps = cluster.status()["completedapps"]
    assert watcher.app_id is not None
    assert [a["id"] for a in apps if a["name"].startswith("mysql-cdc snapshot")] == [watcher.app_id]
    workers = {pid for name, pid in cluster.pids.items() if name.startswith("worker")}
    executor_jvms = {pid for pid, ppid, args in watcher.processes
                     if ppid in workers and "CoarseGrainedExecutorBackend" in args and watcher.app_id in args}
    assert len(executor_jvms) == 2, watcher.processes
    assert {e["id"] for e in watcher.executors} == {"driver", "0", "1"}
    # ... whose Python workers are the venv's Python named by spark.pyspark.python, children of the executors
    daemons = [args for _, ppid, args in watcher.processes if ppid in executor_jvms and "pyspark.daemon" in args]
    assert daemons and all(args.startswith(sys.executable) for args in daemons), daemons
    properties = dict(watcher.environment["sparkProperties"])
    assert properties["spark.master"] == cluster.master_url
    assert properties["spark.pyspark.python"] == sys.executable
    assert not any("MYSQL_CDC" in key for key in properties)  # no spark.executorEnv.* for the password
    assert "--py-files" not in properties and "mysql_cdc_py_files.zip" in properties["spark.submit.pyFiles"]

    # the lake (a shared local path) equals the source
    schema = load_table_schema(cdc_conn, TableId(database, "orders"))
    key = row_key_of(schema)
    lake = {key(row): row for row in current_rows(base_uri, schema)}
    assert len(lake) == ROWS and lake == table_contents(cdc_conn, schema)
