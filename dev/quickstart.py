"""The quickstart on the embedded defaults: a local MariaDB with the sample shop database, the
example DAG run through Airflow (``dag.test()``, SQLite) with Spark on ``local[*]`` and the lake in
``.local/lake``, while a light writer changes the shop; then the replica read back.

The server keeps running afterwards (``.venv/bin/python -m dev.mariadb stop --dir .local/mariadb``
stops it); a second run reuses it and the lake: the snapshot is skipped and the stream continues
from its checkpoint. ``dev/quickstart.sh`` sets ``AIRFLOW_HOME`` before this module imports Airflow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from dev import mariadb, sample_shop
from dev.dag_file import load_dag

TABLES = ["shop.customers", "shop.products", "shop.orders"]


def start_server(data_dir: Path, port: int, orders: int, reload: bool) -> mariadb.MariaDbServer:
    server = mariadb.running(data_dir.resolve())
    if server is None:
        print(f"==> starting MariaDB on port {port} (data in {data_dir})", flush=True)
        server = mariadb.start(data_dir, port)
    admin = server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'shop'")
        (exists,) = cur.fetchone()
    if reload or not exists:
        print(f"==> loading the sample shop database ({orders:,} orders)", flush=True)
        sample_shop.load(admin, orders=orders, customers=20_000, products=5_000)
    admin.close()
    return server


def airflow_environment(server: mariadb.MariaDbServer) -> dict[str, str]:
    """The connections as Airflow environment variables (the api-server of ``--ui`` inherits them)."""
    env = {
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps({
            "conn_type": "mysql_cdc", "host": server.host, "port": server.port, "login": server.cdc_user,
            "password": server.cdc_password,
        }),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    }
    # spark-submit and the airflow commands from this environment first
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(".local/mariadb"), help="the server's data directory")
    parser.add_argument("--port", type=int, default=33061)
    parser.add_argument("--orders", type=int, default=300_000)
    parser.add_argument("--lake", type=Path, default=Path(".local/lake"))
    parser.add_argument("--reload", action="store_true", help="recreate the shop database (and the lake)")
    parser.add_argument("--ui", action="store_true",
                        help="after the run, serve Airflow's UI; print the URLs of the run and its MySQL CDC page")
    parser.add_argument("--ui-port", type=int, default=8080)
    args = parser.parse_args(argv)

    server = start_server(args.dir, args.port, args.orders, args.reload)
    lake = str(args.lake.resolve())
    if args.reload:
        shutil.rmtree(lake, ignore_errors=True)
    os.environ.update(airflow_environment(server))
    print(f"==> Airflow metadata database in {os.environ['AIRFLOW_HOME']} (SQLite)", flush=True)
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                   stdout=subprocess.DEVNULL)

    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.read.replica import read_table
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    dag = load_dag("mysql_cdc_example")
    writer = sample_shop.ShopWriter(server.admin_connect())
    checkpoint = StreamStore(Lake.at(lake)).read_checkpoint()
    first_seq = checkpoint.seq if checkpoint is not None else -1
    writer.start()
    print("==> running DAG mysql_cdc_example: split -> snapshot on Spark (local[*]) -> binlog stream, "
          "while a writer changes the shop; the stream stops once idle for 5 s", flush=True)
    started = time.monotonic()
    conf = {"tables": TABLES, "base_uri": lake, "stop_after_idle_seconds": 5, "defer_after_idle_seconds": 0}
    stopper = _stop_writer_once_streaming(writer, lake, first_seq)
    run = dag.test(run_conf=conf)
    writer.stop.set()
    stopper.join()
    writer.join()
    took = time.monotonic() - started
    print(f"==> DAG run {run.state} in {took:.0f} s; the writer committed {writer.transactions:,} transactions",
          flush=True)
    if run.state != "success":
        return 1

    cdc = server.cdc_connect()
    print(f"==> the replica in {lake}")
    replicas = {table: read_table(lake, table) for table in TABLES}
    for table, replica in replicas.items():
        with cdc.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 (a constant name)
            (rows,) = cur.fetchone()
        print(f"    {table}: {replica.num_rows:,} rows in the lake, {rows:,} in MariaDB")
    orders = replicas["shop.orders"]
    print("    the last three orders, read back with read_table():")
    for row in orders.slice(orders.num_rows - 3).to_pylist():
        print(f"      {row}")
    print(f"""
Read it yourself:
    .venv/bin/python -c "from airflow_provider_mysqlcdc.lake import read_table
print(read_table('{lake}', 'shop.orders'))"
Run it again (snapshot skipped, the stream continues): ./dev/quickstart.sh
MariaDB keeps running on port {server.port}: .venv/bin/python -m dev.mariadb stop --dir {args.dir}""")
    if args.ui:
        return serve_ui(run.run_id, args.ui_port)
    print("See this run and the MySQL CDC page in Airflow's UI: ./dev/quickstart.sh --ui (runs again, then serves it)")
    return 0


def serve_ui(run_id: str, port: int) -> int:
    """Airflow's api-server on ``port`` in the background (its own process group, its log in AIRFLOW_HOME),
    the UI without a login; prints the URLs of the run and of its MySQL CDC page once it answers."""
    home = Path(os.environ["AIRFLOW_HOME"])
    base = f"http://localhost:{port}"
    env = {**os.environ, "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
           "AIRFLOW__API__BASE_URL": base, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
           # the MySQL CDC page is a provider-info plugin, which Airflow loads only with eager discovery
           "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False"}
    log = home / "api-server.log"
    print(f"==> starting Airflow's api-server on {base} (log in {log})", flush=True)
    with log.open("ab") as out:
        server = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "api-server"], env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5):  # noqa: S310 (loopback)
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                print(f"the api-server did not start; its log: {log}", file=sys.stderr)
                return 1
            time.sleep(1)
    run = urllib.parse.quote(run_id, safe="")
    print(f"""==> Airflow's UI is up (no login):
    the run:             {base}/dags/mysql_cdc_example/runs/{run}
    its MySQL CDC page:  {base}/mysql-cdc/dags/mysql_cdc_example?run_id={run}
Stop it: kill -TERM -- -{server.pid}""")
    return 0


def _stop_writer_once_streaming(writer: sample_shop.ShopWriter, lake: str, first_seq: int) -> threading.Thread:
    """Let the writer go on until the stream has committed a few batches of its own, then stop it."""
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

    def watch() -> None:
        while not writer.stop.wait(1):
            checkpoint = StreamStore(Lake.at(lake)).read_checkpoint()
            if checkpoint is not None and checkpoint.seq >= first_seq + 4:
                writer.stop.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


if __name__ == "__main__":
    sys.exit(main())
