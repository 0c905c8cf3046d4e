"""The snapshot's metrics and the operators' extra links, from one run of the example DAG on a small table.

The metrics arrive at Airflow's real StatsD backend on a UDP socket (``test_stream_metrics``'s
listener, influx-style tags on, to see the tags). The links are resolved as the API server resolves
them: the scheduler's deserialized task reads each link's XCom (``XComOperatorLink``); while the Spark
job runs, its link is read from that XCom as the UI would and opened: the job's live UI. Spark reads a
``spark-defaults.conf`` naming a history server and writing event logs, as a cluster's client
configuration would: once the job ended, the Spark application link is the history server's page of
the application whose event log Spark wrote, as a real history server (pyspark's own, started after
the run on that folder) serves it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from airflow_provider_mysqlcdc.operators.links import SparkApplicationLink
from dev.dag_file import load_dag
from dev.ports import free_port
from dev.spark_cluster import spark_home
from tests.integration.statsd_listener import StatsdListener, total

SERVER_IDS = "5460-5475"  # this module's binlog reader ids (the ``connections`` fixture)

ROWS = 20_000  # three chunks of 8096 rows, one batch
HISTORY_PORT = free_port()  # the history server starts after the run, on the port the job was told


@pytest.fixture()
def spark_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A client configuration with a history server and event logs; returns the event log folder."""
    events, conf_dir = tmp_path / "spark-events", tmp_path / "spark-conf"
    events.mkdir()
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir {events.as_uri()}\n"
        f"spark.yarn.historyServer.address 127.0.0.1:{HISTORY_PORT}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    return events


@contextmanager
def history_server(events: Path, base: Path) -> Iterator[None]:
    """pyspark's Spark history server on ``HISTORY_PORT``, reading ``events``, in a process group of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOG_DIR": str(base), "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_CONF_DIR": str(base), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_HISTORY_OPTS": f"-Dspark.history.fs.logDirectory={events.as_uri()} "
                                      f"-Dspark.history.ui.port={HISTORY_PORT} -Dspark.history.fs.update.interval=1s"})
    with (base / "history-server.log").open("wb") as log:
        server = subprocess.Popen([str(spark_home() / "bin" / "spark-class"),
                                   "org.apache.spark.deploy.history.HistoryServer"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def fetch(url: str, timeout: float = 90) -> str:
    """The page at ``url`` (redirects followed) once the server answers it, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback only)
                return str(response.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def page_title(page: str) -> str:
    title = re.search(r"<title>([^<]*)</title>", page)
    assert title is not None, page[:500]
    return title.group(1)


class LiveLink(threading.Thread):
    """Watches the snapshot task's Spark application XCom while the DAG runs; the first URL seen there is
    opened at once (the job is still running), its page's title kept."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopping = threading.Event()
        self.url: str | None = None
        self.title: str | None = None
        from airflow import settings

        # plain SQL, no ORM: SQLAlchemy configuring Airflow's models in this thread while the DAG run imports
        # more of them deadlocked; the runs already in the database (other tests') are not this one
        self.engine, self.key = settings.engine, SparkApplicationLink().xcom_key
        self.earlier = {run for (run,) in self.select("SELECT run_id FROM xcom")}

    def select(self, columns: str) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.exec_driver_sql(f"{columns} WHERE task_id = 'snapshot' AND key = ?", (self.key,)))

    def run(self) -> None:
        while self.url is None and not self.stopping.wait(0.2):
            value = next((v for run, v in self.select("SELECT run_id, value FROM xcom") if run not in self.earlier),
                         None)
            if value is not None:
                self.url = json.loads(value) if isinstance(value, str) else value
                self.title = page_title(fetch(str(self.url), timeout=10))


def link(ti: Any, name: str) -> str | None:
    """The URL the API server answers for the task instance's link: ``GET .../links`` reads it through the
    task of the serialized DAG, whose links are ``XComOperatorLink``s."""
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(ti.dag_id)
    assert dag is not None
    return dag.get_task(ti.task_id).get_extra_links(ti, name) or None


def test_snapshot_sends_metrics_and_every_task_links_its_places(
    airflow_db, connections, admin, database, tmp_path, spark_defaults: Path,  # noqa: F811
    statsd: StatsdListener, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    table = f"{database}.measured"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE measured (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO measured SELECT seq, CONCAT('v', seq) FROM seq_1_to_{ROWS}")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")
    statsd.initialise_stats()
    base_uri = str(tmp_path / "lake")
    live = LiveLink()
    live.start()
    try:
        run = load_dag("mysql_cdc_example").test(
            run_conf={"tables": [table], "base_uri": base_uri, "stop_after_idle_seconds": 0})
    finally:
        live.stopping.set()
        live.join(30)
    assert run.state == "success"
    store = SnapshotStore(Lake.at(base_uri))
    plan = store.read_plan(TableId.parse(table))
    assert plan is not None and len(plan.batches) == 1
    manifest = store.read_manifest(plan.batches[0])
    assert manifest is not None and manifest.rows == ROWS and len(manifest.chunks) == 3

    got = statsd.metrics()
    snapshot = {name: values for name, values in got.items() if name.startswith("mysql_cdc.snapshot.")}
    assert total(snapshot["mysql_cdc.snapshot.batches"], "c") == 1
    assert total(snapshot["mysql_cdc.snapshot.rows"], "c") == ROWS
    assert total(snapshot["mysql_cdc.snapshot.chunks"], "c") == 3
    assert snapshot["mysql_cdc.snapshot.batch_rows"] == [(ROWS, "g")]
    assert snapshot["mysql_cdc.snapshot.rows_per_second"] == [(manifest.rows_per_second, "g")]
    ((duration, kind),) = snapshot["mysql_cdc.snapshot.duration"]
    assert kind == "ms" and duration == pytest.approx(manifest.seconds * 1000, abs=1)
    for name in snapshot:
        for tags, _ in statsd.tagged[name]:
            assert (tags["dag_id"], tags["task_id"], tags["table"]) == ("mysql_cdc_example", "snapshot", table), tags

    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    current = Path(table_uri(base_uri, table)).as_uri()
    for task_id in ("split", "snapshot", "stream"):
        assert link(tis[task_id], "Lake table") == current, task_id
    (event_log,) = [p.name.removeprefix("eventlog_v2_") for p in spark_defaults.iterdir()]  # Spark 4 rolls its logs
    url = link(tis["snapshot"], "Spark application")
    assert url == f"http://127.0.0.1:{HISTORY_PORT}/history/{event_log}/"
    application = f"mysql-cdc snapshot {plan.batches[0].label}"
    with history_server(spark_defaults, tmp_path):
        title, deadline = page_title(fetch(url)), time.monotonic() + 60
        # until the server has listed the new event log, the application's URL answers with its own page
        while title == "History Server" and time.monotonic() < deadline:
            time.sleep(1)
            title = page_title(fetch(url))
    assert title.startswith(application), title
    # while the job ran, the same link was its live UI, which served that application's pages
    assert live.url is not None and re.fullmatch(r"http://[^/:]+:\d+", live.url), live.url
    assert live.title is not None and live.title.startswith(application), live.title
