"""TLS end to end, against a MariaDB that refuses connections without it and a CDC user ``REQUIRE SSL``.

With the connection's ``ssl`` extra, everything works: the Test button, the split, the Spark snapshot
(real ``spark-submit``; connectorx's Arrow SELECT over TLS), the stream and its trigger. Without it, or
with a CA that did not sign the server's certificate, each fails saying which extra to set.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter, arrow_schema, select_expression
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.exceptions import SourceConfigError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger
from dev.dag_file import load_dag
from dev.tls_certs import TlsFiles
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.orders import OrdersWriter
from tests.integration.type_matrix import MATRIX

DATABASE = "t_tls"
SERVER_IDS = "5800-5815"
# a few rows of the type matrix: the values connectorx's MySQL source reads through SQL expressions
TYPES = ("d65", "d12", "db", "da", "t1", "dm1", "ts4", "b9", "s9", "v3", "vbw", "nbu", "nti", "nda")


@pytest.fixture(scope="module")
def server(tls_mariadb_server) -> Iterator[Any]:
    with tls_mariadb_server.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4")
        cur.execute(f"USE {DATABASE}")
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_30000")
    yield tls_mariadb_server


def use_connection(monkeypatch: pytest.MonkeyPatch, server: Any, ssl: dict[str, Any] | None,
                   host: str = "localhost") -> ConnectionConfig:
    """``mysql_cdc_default`` to the TLS server with this ``ssl`` extra (None: none), and Spark on local[2].
    The server's certificate names ``localhost``, not ``127.0.0.1`` (``server.host``)."""
    extra: dict[str, Any] = {"server_id": SERVER_IDS} | ({"ssl": ssl} if ssl is not None else {})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({
        "conn_type": "mysql_cdc", "host": host, "port": server.port, "login": server.cdc_user,
        "password": server.cdc_password, "schema": DATABASE, "extra": extra}))
    return MySqlCdcHook().get_config()


def test_the_test_button_with_and_without_tls(monkeypatch, server, tls_files: TlsFiles) -> None:
    for ssl, host in (({"ca": tls_files.ca}, "localhost"), ({"ca": tls_files.ca, "verify": "ca"}, server.host),
                      ({"verify": False}, server.host),
                      ({"ca": tls_files.ca, "cert": tls_files.client_cert, "key": tls_files.client_key}, "localhost")):
        use_connection(monkeypatch, server, ssl, host)
        ok, message = MySqlCdcHook().test_connection()
        assert ok, (ssl, message)
    use_connection(monkeypatch, server, None)
    ok, message = MySqlCdcHook().test_connection()
    assert not ok and "refused cdc@localhost" in message and "without TLS" in message and "ssl extra" in message
    assert server.cdc_password not in message
    use_connection(monkeypatch, server, {"ca": tls_files.ca}, server.host)  # not the name in the certificate
    ok, message = MySqlCdcHook().test_connection()
    assert not ok and f"does not name the host of cdc@{server.host}" in message and 'verify to "ca"' in message
    use_connection(monkeypatch, server, {"ca": tls_files.other_ca})
    ok, message = MySqlCdcHook().test_connection()
    assert not ok and f"not signed by the CA in the ssl extra's ca ({tls_files.other_ca})" in message
    use_connection(monkeypatch, server, {"verify": "identity"})  # the system's CAs do not know the test CA
    ok, message = MySqlCdcHook().test_connection()
    assert not ok and "not signed by the system's CAs (the ssl extra has no ca)" in message
    use_connection(monkeypatch, server, {})  # an empty object, as an empty form field: no TLS
    ok, message = MySqlCdcHook().test_connection()
    assert not ok and "without TLS" in message


def test_every_connection_is_tls_and_the_server_sees_it(monkeypatch, server, tls_files: TlsFiles) -> None:
    config = use_connection(monkeypatch, server, {"ca": tls_files.ca})
    conn = config.connect()
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLSv1")
    conn.close()
    # the snapshot's Arrow SELECT goes through connectorx over TLS, verifying the CA and the host name: the
    # certificate's name passes, the address it does not name fails (connectorx's error, explained)
    with config.connect() as conn:
        schema = load_table_schema(conn, TableId(DATABASE, "orders"))
    assert config.ssl is not None and config.ssl.connectorx_params() is not None
    table = ArrowSelect(config, schema).read(Chunk(schema.id, 0, None, 1001))
    assert table.num_rows == 1000 and table.column("amount")[999].as_py() == Decimal("10.00")
    by_address = ConnectionConfig(server.host, config.user, config.password, config.port, ssl=config.ssl)
    with pytest.raises(SourceConfigError, match=f"does not name the host of cdc@{server.host}"):
        ArrowSelect(by_address, schema).read(Chunk(schema.id, 0, None, 1001))


def test_split_fails_clearly_without_tls_and_with_a_wrong_ca(monkeypatch, server, tls_files, tmp_path) -> None:
    from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator  # Airflow: after collection

    def split() -> list[dict[str, Any]]:
        return MySqlChunkSplitOperator(task_id="split", tables=[f"{DATABASE}.orders"],
                                       base_uri=str(tmp_path / "lake")).execute({})

    use_connection(monkeypatch, server, None)
    with pytest.raises(SourceConfigError, match="without TLS.*Set the mysql_cdc connection's ssl extra"):
        split()
    use_connection(monkeypatch, server, {"ca": tls_files.other_ca})
    with pytest.raises(SourceConfigError, match="not signed by the CA in the ssl extra's ca"):
        split()


def test_the_trigger_reports_a_wrong_ca(monkeypatch, server, tls_files: TlsFiles) -> None:
    config = use_connection(monkeypatch, server, {"ca": tls_files.ca})
    with config.connect() as conn:
        offset = read_current_offset(conn, ServerInfo.read(conn), with_gtid=False).to_dict()
    use_connection(monkeypatch, server, {"ca": tls_files.other_ca})
    trigger = MySqlBinlogTrigger("mysql_cdc_default", offset, time.time() + 30, 0.2, {}, [f"{DATABASE}.orders"])

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    payload = asyncio.run(first())
    assert payload["reason"] == "error" and payload["error_type"] == "SourceConfigError"
    assert "ssl extra's ca" in payload["error"]


def test_types_read_over_tls_equal_the_plain_select(monkeypatch, server, tls_files: TlsFiles) -> None:
    """A few rows of the type matrix through connectorx over TLS, against pymysql's SELECT over TLS."""
    columns = {name: MATRIX[name] for name in TYPES}
    rows = max(len(values) for _, values, _ in columns.values())
    with server.admin_connect(DATABASE) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # zero dates, as legacy applications write them
        cur.execute(f"CREATE TABLE types (id INT PRIMARY KEY, "
                    f"{', '.join(f'`{n}` {ddl}' for n, (ddl, _, _) in columns.items())})")
        for row in range(1, rows + 2):  # the last row is NULL wherever it can be
            names = [n for n, (_, values, _) in columns.items() if row <= len(values)]
            cur.execute(f"INSERT INTO types (id{''.join(', `' + n + '`' for n in names)}) VALUES "
                        f"({row}{''.join(', ' + columns[n][1][row - 1] for n in names)})")
    config = use_connection(monkeypatch, server, {"ca": tls_files.ca, "verify": "ca"}, server.host)
    with config.connect(database=DATABASE) as conn, conn.cursor() as cur:
        schema: TableSchema = load_table_schema(conn, TableId(DATABASE, "types"))
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM types ORDER BY id")
        expected = [RowConverter(schema).from_select(r) for r in cur.fetchall()]
    table = ArrowSelect(config, schema).read(Chunk(schema.id, 0, None, None)).sort_by("id")
    assert table.schema == arrow_schema(schema)
    assert canonical_rows(table) == expected and len(expected) == rows + 1


def test_the_example_dag_over_tls(airflow_db, monkeypatch, server, tls_files: TlsFiles, tmp_path) -> None:
    """Split, Spark snapshot (spark-submit), stream and its trigger, all over TLS: the lake equals the table."""
    config = use_connection(monkeypatch, server, {"ca": tls_files.ca})
    base_uri = str(tmp_path / "lake")
    table = f"{DATABASE}.orders"
    conf = {"tables": [table], "base_uri": base_uri, "rows_per_batch": 15_000, "stop_after_idle_seconds": 3,
            "defer_after_idle_seconds": 0}  # every wait goes to the trigger

    def stream_started_a_while_ago() -> bool:
        checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
        return checkpoint is not None and checkpoint.seq >= 2

    writer = OrdersWriter(server, DATABASE, 300, 1, until=stream_started_a_while_ago)  # through the snapshot
    writer.start()
    run = load_dag("mysql_cdc_example").test(run_conf=conf)
    writer.join()
    assert run.state == "success" and writer.count > 0
    snapshots = [ti for ti in run.get_task_instances() if ti.task_id == "snapshot"]
    assert len(snapshots) >= 2 and all(ti.state == "success" for ti in snapshots)
    (stream,) = [ti for ti in run.get_task_instances() if ti.task_id == "stream"]
    summary = stream.xcom_pull(task_ids="stream")
    assert summary["rows"] > 0 and summary["deferrals"] >= 1
    with config.connect(database=DATABASE) as conn:
        expected = table_rows(conn, load_table_schema(conn, TableId.parse(table)))
    assert canonical_rows(read_table(base_uri, table)) == expected
