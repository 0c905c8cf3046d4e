"""Snapshot + deferrable stream through the example DAG: writes during the snapshot and during the
stream; the lake's current state equals the table; a second run streams on from the checkpoint."""

from __future__ import annotations

import json
import random
import threading
import time
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.types import RowConverter, select_expression
from airflow_provider_mysqlcdc.lake.read import read_table
from airflow_provider_mysqlcdc.lake.stream_store import StreamStore
from tests.arrow_rows import canonical_rows
from tests.integration.test_snapshot_dag import example_dag


@pytest.fixture()
def connections(monkeypatch: pytest.MonkeyPatch, mariadb_server) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": mariadb_server.host, "port": mariadb_server.port,
        "login": mariadb_server.cdc_user, "password": mariadb_server.cdc_password,
        "extra": {"server_id": "5500-5515"},
    }))


class Writer(threading.Thread):
    """Random inserts, updates, deletes and delete+reinsert, for ``seconds``; with ``bulk_every``, every
    n-th transaction also updates 500 keys of 1..3000 at once (a transaction bigger than a batch)."""

    def __init__(self, server: Any, database: str, seconds: float, seed: int, bulk_every: int = 0) -> None:
        super().__init__(daemon=True)
        self.conn, self.seconds, self.seed, self.count = server.admin_connect(database), seconds, seed, 0
        self.bulk_every = bulk_every

    def run(self) -> None:
        rnd, deadline = random.Random(self.seed), time.monotonic() + self.seconds
        with self.conn.cursor() as cur:
            while time.monotonic() < deadline:
                key = rnd.randint(-50, 60_000)
                cur.execute("BEGIN")
                cur.execute("INSERT INTO orders VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE amount = amount + 1",
                            (key, key % 7, Decimal(key) / 100, f"w{key}"))
                cur.execute("UPDATE orders SET note = %s WHERE id = %s", (f"u{rnd.random():.5f}", key + 3))
                cur.execute("DELETE FROM orders WHERE id = %s", (key + 11,))
                if self.bulk_every and self.count % self.bulk_every == 0:
                    low = rnd.randint(1, 2500)
                    cur.execute("UPDATE orders SET customer = customer + 1 WHERE id BETWEEN %s AND %s",
                                (low, low + 499))
                cur.execute("COMMIT")
                self.count += 1
                time.sleep(0.002)


def table_rows(conn: Any, schema: TableSchema) -> list[tuple[Any, ...]]:
    convert = RowConverter(schema)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {schema.id.quoted} "
                    f"ORDER BY id")
        return [convert.from_select(r) for r in cur.fetchall()]


def test_snapshot_then_stream_equals_the_table_twice(airflow_db, connections, mariadb_server, admin, cdc_conn,
                                                     database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_50000")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()
    base_uri = str(tmp_path / "lake")
    conf = {"tables": [f"{database}.orders"], "base_uri": base_uri, "rows_per_batch": 20_000,
            "stop_after_idle_seconds": 4}
    schema = load_table_schema(cdc_conn, TableId(database, "orders"))

    writer = Writer(mariadb_server, database, seconds=25, seed=1)  # through the snapshot into the stream
    writer.start()
    run = example_dag().test(run_conf=conf)
    writer.join()
    assert run.state == "success" and writer.count > 100
    (stream,) = [ti for ti in run.get_task_instances() if ti.task_id == "stream"]
    summary = stream.xcom_pull(task_ids="stream")
    assert summary["rows"] > 0 and summary["stopped"] == "idle for 4 s"
    assert canonical_rows(read_table(base_uri, f"{database}.orders")) == table_rows(cdc_conn, schema)

    # the next run: no snapshot left, the stream continues from the checkpoint
    seq = StreamStore(base_uri).read_checkpoint().seq  # type: ignore[union-attr]
    Writer(mariadb_server, database, seconds=2, seed=2).run()
    rerun = example_dag().test(run_conf=conf)
    assert rerun.state == "success"
    assert not [ti for ti in rerun.get_task_instances() if ti.task_id == "snapshot" and ti.state == "success"]
    assert StreamStore(base_uri).read_checkpoint().seq > seq  # type: ignore[union-attr]
    assert canonical_rows(read_table(base_uri, f"{database}.orders")) == table_rows(cdc_conn, schema)
