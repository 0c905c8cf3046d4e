"""The stream on a server at its default ``binlog_row_metadata`` (MariaDB: NO_LOG; MySQL 8.0/8.4: MINIMAL): table
maps without column names, read by position against the schema the stream keeps for each table at its offset
(the checkpoint's, followed through each DDL), on the real MariaDB with each setting.

A sequence of DDLs under a writer (ADD COLUMN last, AFTER and FIRST, DROP, RENAME COLUMN, MODIFY INT -> BIGINT, a
same-typed column moved with MODIFY ... AFTER, TRUNCATE, an online schema change tool's RENAME TABLE swap), read
partly one at a time and partly after the server has gone further, ends with the lake's Delta tables equal to the
source; a DDL the parser cannot read stops the stream before it, naming the statement and FULL, and so does a DDL
whose column a later one redefined before the stream read it (the server's definition is no longer the DDL's). The
example DAG (split -> mapped Spark snapshot jobs -> stream) does the same with DDLs between its snapshot jobs and
after the snapshot. The server is shared by the whole test session: the setting goes back to FULL after this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
from airflow_provider_mysqlcdc.cdc.binlog.events import Rows
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.checks import check_source
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import SchemaChangeBehavior, StreamOptions
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.example_dag import example_dag
from tests.integration.watched_jobs import JobsWatched
from tests.replica import run_stopping_stream, snapshot
from tests.writers import KeyValueWriter

SERVER_IDS = "5970-5979"  # the binlog readers' ids (the ``connections`` fixture's too)
ROWS = 1000
DAG_ROWS = 10_000
"""Two chunks of the split's default size (8,096 rows), a batch and a Spark job each with ``rows_per_batch`` 5,000."""


@pytest.fixture(scope="module", params=["MINIMAL", "NO_LOG"])
def metadata(request: pytest.FixtureRequest, mariadb_server: Any) -> Iterator[str]:
    """The server's global binlog_row_metadata for the module's tests, FULL again after them."""
    admin = mariadb_server.admin_connect()
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_metadata = %s", (request.param,))
        yield str(request.param)
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
        admin.close()


@pytest.fixture()
def config(mariadb_server: Any) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port, server_id=ServerIdRange.parse(SERVER_IDS))


def stream(config: ConnectionConfig, base_uri: str, table: TableId,
           behavior: SchemaChangeBehavior = SchemaChangeBehavior.EVOLVE) -> None:
    """Stream until caught up, then MERGE, as a stopping stream task does (its start runs the source check)."""
    run_stopping_stream(config, StreamOptions(base_uri, (table,), writer="tests.row_metadata",
                                              stop_after_idle_seconds=0, schema_change_behavior=behavior))


def maps_name_columns(config: ConnectionConfig, start: BinlogOffset) -> set[bool]:
    """Whether the table maps of the rows events since ``start`` named their columns."""
    dump = BinlogDump(config.replication_settings(), 5979, start.file, start.position)
    try:
        return {event.table_map.columns[0].name is not None for event in dump if isinstance(event, Rows)}
    finally:
        dump.close()


def assert_lake_equal(admin: Any, base_uri: str, table: TableId) -> None:
    """The lake's Delta tables read alone (``read_table``) equal the source, column for column and row for row."""
    schema = load_table_schema(admin, table)
    lake = read_table(base_uri, str(table))
    assert [name for name in lake.column_names if not name.startswith("_")] == list(schema.column_names)
    assert canonical_rows(lake.select(list(schema.column_names))) == table_rows(admin, schema)  # both by id


def test_a_ddl_sequence_under_a_writer_by_position(metadata: str, admin: Any, config: ConnectionConfig,
                                                    database: str, mariadb_server: Any, tmp_path: Any) -> None:
    name = f"seq_{metadata.lower()}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, a INT, s VARCHAR(20) CHARACTER SET latin1, "
                    f"u INT UNSIGNED, e ENUM('x', 'y', 'z'), v INT)")
        cur.execute(f"INSERT INTO {name} SELECT seq, seq * 3, CONCAT('s', seq), 4000000000 - seq, "
                    f"ELT(1 + seq % 3, 'x', 'y', 'z'), seq FROM seq_1_to_{ROWS}")
    table, base_uri = TableId(database, name), str(tmp_path / "lake")
    assert check_source(admin).is_mariadb  # the source check asks nothing of binlog_row_metadata
    snapshot(config, base_uri, str(table), chunk_size=300, chunks_per_batch=2)
    start = read_current_offset(admin, ServerInfo.read(admin))
    stream(config, base_uri, table)

    first = [  # read one at a time: the server's schema is the schema after each when the stream reads it
        f"ALTER TABLE {name} ADD COLUMN b INT AFTER id",  # the same type as a: a wrong place swaps values
        f"ALTER TABLE {name} ADD COLUMN f INT FIRST",
        f"ALTER TABLE {name} ADD COLUMN z INT",
    ]
    then = [  # read after the server has gone on: the stream's checkpoint (a restart) is in the middle of them
        f"ALTER TABLE {name} DROP COLUMN a",
        f"ALTER TABLE {name} RENAME COLUMN s TO s2",
        f"ALTER TABLE {name} MODIFY v BIGINT",
        f"ALTER TABLE {name} MODIFY z INT AFTER b",  # z and b: two INT columns swapped by a move
        f"UPDATE {name} SET b = id, z = -id, f = id % 5 WHERE id % 4 = 0",
        f"TRUNCATE TABLE {name}",
        f"INSERT IGNORE INTO {name} (f, id, b, z, s2, u, e, v) SELECT seq % 7, seq, seq, -seq, CONCAT('n', seq), seq, "
        f"'y', seq FROM seq_1_to_{ROWS // 2}",
        # an online schema change tool's cut-over: a copy with a column moved takes the table's name
        f"CREATE TABLE _{name}_gho LIKE {name}",
        f"ALTER TABLE _{name}_gho MODIFY u INT UNSIGNED FIRST",
        f"INSERT INTO _{name}_gho (f, id, b, z, s2, u, e, v) SELECT f, id, b, z, s2, u, e, v FROM {name}",
        f"RENAME TABLE {name} TO _{name}_del, _{name}_gho TO {name}",
        f"UPDATE {name} SET u = u + 1, z = z - 1 WHERE id % 3 = 0",
    ]
    writer = KeyValueWriter(mariadb_server, database, name, ROWS, seed=11)
    writer.start()
    try:
        with admin.cursor() as cur:
            for statement in first:
                cur.execute(statement)
                stream(config, base_uri, table)
            for statement in then:
                cur.execute(statement)
    finally:
        writer.stopping.set()
        writer.join()
    assert writer.count > 20
    stream(config, base_uri, table)
    assert_lake_equal(admin, base_uri, table)
    assert maps_name_columns(config, start) == {False}  # every row of it was read by position
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None
    assert checkpoint.schemas[table].column_names == ("u", "f", "id", "b", "z", "s2", "e", "v")


def stops_before(config: ConnectionConfig, admin: Any, table: TableId, base_uri: str, statements: list[str],
                 error: str) -> pa.Table:
    """``table`` (id, v), 50 rows, taken and streamed; then, the stream down, ``UPDATE v = 0 WHERE id = 1`` and
    ``statements``, the first a DDL: each behavior that follows DDL stops on it with a ``SchemaChangeError``
    matching ``error``, and nothing past it is committed (the update before it is). Returns the lake's table."""
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {table.table} (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {table.table} SELECT seq, seq FROM seq_1_to_50")
    snapshot(config, base_uri, str(table), chunk_size=100, chunks_per_batch=1)
    stream(config, base_uri, table)
    with admin.cursor() as cur:
        for statement in [f"UPDATE {table.table} SET v = 0 WHERE id = 1", *statements]:
            cur.execute(statement)
    before = StreamStore(Lake.at(base_uri)).read_checkpoint()
    for behavior in (SchemaChangeBehavior.EVOLVE, SchemaChangeBehavior.TRY_EVOLVE, SchemaChangeBehavior.LENIENT):
        with pytest.raises(SchemaChangeError, match=error):
            stream(config, base_uri, table, behavior)
    after = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert before is not None and after is not None
    assert after.schemas[table] == before.schemas[table]
    lake = read_table(base_uri, str(table))
    assert dict(zip(lake.column("id").to_pylist(), lake.column("v").to_pylist(), strict=True))[1] == 0
    return lake


def test_a_ddl_the_parser_cannot_read_stops_the_stream(metadata: str, admin: Any, config: ConnectionConfig,
                                                       database: str, tmp_path: Any) -> None:
    name = f"unread_{metadata.lower()}"
    lake = stops_before(config, admin, TableId(database, name), str(tmp_path / "lake"), [
        f"ALTER TABLE {name} ADD COLUMN (p INT, q INT)",  # sqlglot cannot read it
        f"UPDATE {name} SET v = 1, p = 2 WHERE id = 2",
    ], r"(?s)ADD COLUMN \(p INT, q INT\).*cannot read.*binlog_row_metadata = 'FULL'")
    assert lake.column("v").to_pylist()[:2] == [0, 2]


def test_a_column_redefined_since_its_ddl_stops_the_stream(metadata: str, admin: Any, config: ConnectionConfig,
                                                           database: str, tmp_path: Any) -> None:
    """The stream reads ADD COLUMN s TINYINT after a later MODIFY s TINYINT UNSIGNED: the server's definition of s
    is not the one of the rows in between (a NO_LOG map carries no signedness: -56 would read as 200), so the stream
    stops at the ADD, naming both definitions and FULL, rather than decode a value wrong."""
    name = f"redefined_{metadata.lower()}"
    lake = stops_before(config, admin, TableId(database, name), str(tmp_path / "lake"), [
        f"ALTER TABLE {name} ADD COLUMN s TINYINT",
        f"INSERT INTO {name} VALUES (51, 51, -56), (53, 53, 100)",  # -56: the byte of 200
        f"UPDATE {name} SET s = 56 WHERE id = 51",  # the rows convert to UNSIGNED
        f"ALTER TABLE {name} MODIFY s TINYINT UNSIGNED",
        f"INSERT INTO {name} VALUES (52, 52, 200)",
    ], r"(?s)ADD COLUMN s TINYINT'.*s: tinyint in the statement, tinyint\(3\) unsigned on the server now.*"
       r"binlog_row_metadata = 'FULL'")
    assert "s" not in lake.column_names and sorted(lake.column("id").to_pylist()) == list(range(1, 51))


def test_the_example_dag_under_ddls_and_a_writer_by_position(
    metadata: str, airflow_db: Any, connections: Any, admin: Any, config: ConnectionConfig, database: str,
    mariadb_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split, two mapped Spark snapshot jobs with ADD COLUMN ... AFTER, RENAME COLUMN and INT -> BIGINT run
    between them, the stream to the end; then ADD COLUMN FIRST, DROP COLUMN and another INT -> BIGINT, and a
    second run that only streams: both runs succeed and the lake equals the source, all read by position."""
    name = f"dag_{metadata.lower()}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, a INT, s VARCHAR(20), v INT)")
        cur.execute(f"INSERT INTO {name} SELECT seq, seq * 3, CONCAT('s', seq), seq FROM seq_1_to_{DAG_ROWS}")
    table, base_uri = TableId(database, name), str(tmp_path / "lake")
    start = read_current_offset(admin, ServerInfo.read(admin))
    conf = {"tables": [str(table)], "base_uri": base_uri, "rows_per_batch": 5_000,
            "stop_after_idle_seconds": 0}  # the stream task stops as soon as it has caught up

    def alter(*ddls: str) -> None:
        with admin.cursor() as cur:
            for ddl in ddls:
                cur.execute(f"ALTER TABLE {name} {ddl}")
            cur.execute(f"UPDATE {name} SET a = -id WHERE id % 500 = 0")

    jobs = JobsWatched(monkeypatch, lambda: alter("ADD COLUMN b INT AFTER id", "RENAME COLUMN s TO s2",
                                                  "MODIFY a BIGINT"))
    writer = KeyValueWriter(mariadb_server, database, name, DAG_ROWS, seed=13)
    writer.start()
    try:
        snapshotted = example_dag().test(run_conf=conf)
        alter("ADD COLUMN f INT FIRST", "DROP COLUMN b", "MODIFY v BIGINT")
        after = writer.count
        while writer.is_alive() and writer.count < after + 50:  # writes after the DDLs too
            time.sleep(0.05)
    finally:
        writer.stopping.set()
        writer.join()
    assert writer.error is None and not jobs.errors and len(jobs.outcomes) == 2
    assert snapshotted.state == "success"
    streamed = example_dag().test(run_conf=conf)
    assert streamed.state == "success"
    (summary,) = [ti for ti in streamed.get_task_instances() if ti.task_id == "summarize"]
    assert summary.xcom_pull(task_ids="summarize")["batches"] == 0  # the second run only streamed
    assert list(load_table_schema(admin, table).column_names) == ["f", "id", "a", "s2", "v"]
    assert_lake_equal(admin, base_uri, table)
    assert maps_name_columns(config, start) == {False}  # every row of the run was read by position
