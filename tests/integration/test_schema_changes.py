"""The replica follows DDL at its binlog offset, with a writer running: column renames, drops, adds with
a DEFAULT or a generated value, conversions, TRUNCATE, DROP TABLE and the online-schema-change swap
(``engine.stream.schema_changes``). After each stream the current Delta table read with ``deltalake`` alone
equals the source column for column, and the changelog holds the ``!T``/``!S`` records.

The snapshot is made with the engine's own steps without Spark (``tests.replica``), the stream by the
stream runner the operator uses.
"""

from __future__ import annotations

from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.engine.options.stream_options import SchemaChangeBehavior, StreamOptions
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_plan import plan_snapshot
from airflow_provider_mysqlcdc.exceptions import AsOfError, InvalidOptionError, SchemaChangeError
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.read.stream_commits import stream_extra
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.compared_rows import current_rows, table_rows
from tests.replica import run_stopping_stream, snapshot
from tests.writers import KeyValueWriter

SERVER_IDS = "5950-5959"
ROWS = 2000


@pytest.fixture()
def config(mariadb_server: Any) -> ConnectionConfig:
    return ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                            mariadb_server.port, server_id=ServerIdRange.parse(SERVER_IDS))


def stream(config: ConnectionConfig, base_uri: str, tables: list[TableId],
           behavior: SchemaChangeBehavior = SchemaChangeBehavior.EVOLVE) -> None:
    """Stream until caught up, then MERGE, as a stopping stream task does."""
    run_stopping_stream(config, StreamOptions(base_uri, tuple(tables), writer="tests.schema_changes",
                                              stop_after_idle_seconds=0, schema_change_behavior=behavior))


def assert_replica_equal(admin: Any, base_uri: str, table: TableId) -> None:
    """The current Delta table alone (no changelog on top) equals the source, column for column."""
    schema = load_table_schema(admin, table)
    lake = DeltaTable(table_uri(base_uri, table))
    own = [f.name for f in lake.schema().fields if not f.name.startswith("_")]
    assert own == list(schema.column_names)
    assert sorted(current_rows(base_uri, schema)) == sorted(table_rows(admin, schema))


def ddl_records(base_uri: str, table: TableId) -> list[tuple[str, str]]:
    changes = read_changes(base_uri, str(table))
    records = changes.filter(changes.column("_ddl").is_valid())
    return list(zip(records.column("_op").to_pylist(), records.column("_ddl").to_pylist(), strict=True))


def test_column_changes_several_in_a_row_under_a_writer(admin: Any, config: ConnectionConfig, database: str,
                                                        mariadb_server: Any, tmp_path: Any) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE sc (id INT PRIMARY KEY, s VARCHAR(20), x INT, d DECIMAL(10,4), v INT)")
        cur.execute(f"INSERT INTO sc SELECT seq, CONCAT('s', seq), seq * 3, seq / 7, seq FROM seq_1_to_{ROWS}")
    table, base_uri = TableId(database, "sc"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=300, chunks_per_batch=3)
    stream(config, base_uri, [table])
    assert_replica_equal(admin, base_uri, table)

    statements = [
        "ALTER TABLE sc RENAME COLUMN s TO s2",
        "ALTER TABLE sc DROP COLUMN x",
        "ALTER TABLE sc ADD COLUMN c VARCHAR(10) NOT NULL DEFAULT 'x'",
        "ALTER TABLE sc ADD COLUMN g INT AS (v * 2) STORED",
        "ALTER TABLE sc MODIFY d DECIMAL(10,2)",  # scale down: the values the source rounded
        "ALTER TABLE sc MODIFY v BIGINT",  # wider: kept without reading the rows again
    ]
    writer = KeyValueWriter(mariadb_server, database, "sc", ROWS)
    writer.start()
    try:
        with admin.cursor() as cur:
            cur.execute(statements[0])
            stream(config, base_uri, [table])  # one DDL at a time...
            for statement in statements[1:]:  # ... and several in a row before the stream reads them
                cur.execute(statement)
    finally:
        writer.stopping.set()
        writer.join()
    assert writer.count > 20
    stream(config, base_uri, [table])
    assert_replica_equal(admin, base_uri, table)
    assert [ddl for _, ddl in ddl_records(base_uri, table)] == statements
    assert {op for op, _ in ddl_records(base_uri, table)} == {"!S"}
    # every version of the current table a reader could have seen: an added column with a DEFAULT was
    # never empty (the rows read again replaced the table in the same commit that added the column)
    current = DeltaTable(table_uri(base_uri, table))
    for version in range(current.version() + 1):
        current.load_as_version(version)
        rows = current.to_pyarrow_table()
        for column in ("c", "g"):
            if column in rows.column_names:
                assert rows.column(column).null_count == 0, (version, column)


def test_truncate_drop_and_the_online_schema_change_swap(admin: Any, config: ConnectionConfig, database: str,
                                                          mariadb_server: Any, tmp_path: Any) -> None:
    with admin.cursor() as cur:
        for name in ("tr", "sw"):
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {name} SELECT seq, seq FROM seq_1_to_{ROWS}")
    tr, sw, base_uri = TableId(database, "tr"), TableId(database, "sw"), str(tmp_path / "lake")
    for table in (tr, sw):
        snapshot(config, base_uri, str(table), chunk_size=500, chunks_per_batch=2)
    stream(config, base_uri, [tr, sw])

    writer = KeyValueWriter(mariadb_server, database, "tr", ROWS)
    writer.start()
    try:
        with admin.cursor() as cur:
            cur.execute("TRUNCATE TABLE tr")  # then the writer inserts keys again
            # gh-ost's swap: a copy with a new column takes the table's name
            cur.execute("CREATE TABLE _sw_gho (id INT PRIMARY KEY, v INT, extra VARCHAR(5) DEFAULT 'e')")
            cur.execute("INSERT INTO _sw_gho (id, v) SELECT id, v * 10 FROM sw WHERE id % 2 = 0")
            cur.execute("RENAME TABLE sw TO _sw_del, _sw_gho TO sw")
            cur.execute("INSERT INTO sw (id, v) VALUES (100000, 1)")
    finally:
        writer.stopping.set()
        writer.join()
    stream(config, base_uri, [tr, sw])
    assert_replica_equal(admin, base_uri, tr)
    assert 0 < len(table_rows(admin, load_table_schema(admin, tr))) < ROWS  # truncated, then written again
    assert ("!T", "TRUNCATE TABLE tr") in ddl_records(base_uri, tr)
    assert_replica_equal(admin, base_uri, sw)
    assert any(ddl.startswith("RENAME TABLE") for _, ddl in ddl_records(base_uri, sw))

    with admin.cursor() as cur:
        cur.execute("DROP TABLE sw")
    stream(config, base_uri, [tr, sw])
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and sw not in checkpoint.schemas
    assert checkpoint.stopped[sw].ddl.startswith("DROP TABLE")
    assert DeltaTable(table_uri(base_uri, sw)).count() > 0  # the replica is kept, marked dropped
    _, extra = stream_extra(Lake.at(base_uri), sw, checkpoint.seq - 1)  # the asset event of the batch that dropped it
    assert extra is not None and extra["stopped_by"].startswith("DROP TABLE")

    with admin.cursor() as cur:  # created again under the captured name: captured from empty
        cur.execute("CREATE TABLE sw (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO sw VALUES (1, 1), (2, 2)")
    stream(config, base_uri, [tr, sw])
    assert_replica_equal(admin, base_uri, sw)


def test_exception_stops_before_the_ddl(admin: Any, config: ConnectionConfig, database: str, tmp_path: Any) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE ex (id INT PRIMARY KEY, s VARCHAR(10))")
        cur.execute("INSERT INTO ex SELECT seq, 'a' FROM seq_1_to_50")
    table, base_uri = TableId(database, "ex"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=100, chunks_per_batch=1)
    stream(config, base_uri, [table])
    with admin.cursor() as cur:
        cur.execute("UPDATE ex SET s = 'b' WHERE id = 1")
        cur.execute("ALTER TABLE ex RENAME COLUMN s TO s2")
        cur.execute("UPDATE ex SET s2 = 'c' WHERE id = 2")
    with pytest.raises(SchemaChangeError, match=r"(?s)RENAME COLUMN s TO s2.*schema_change_behavior"):
        stream(config, base_uri, [table], SchemaChangeBehavior.EXCEPTION)
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None
    changes = read_changes(base_uri, str(table))
    assert changes.column("s").to_pylist() == ["a", "b"]  # the update before the DDL, and nothing past it
    stream(config, base_uri, [table])  # evolve goes on from there
    assert_replica_equal(admin, base_uri, table)


def test_tables_renamed_away_and_back_and_columns_converted(admin: Any, config: ConnectionConfig, database: str,
                                                            tmp_path: Any) -> None:
    with admin.cursor() as cur:
        for name in ("ra", "rb"):
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT, n VARCHAR(10), "
                        f"name VARCHAR(10) CHARACTER SET latin1)")
            cur.execute(f"INSERT INTO {name} SELECT seq, seq, CAST(seq AS CHAR), CONCAT('n\\xe9', seq) "
                        f"FROM seq_1_to_{ROWS}")
    ra, rb, base_uri = TableId(database, "ra"), TableId(database, "rb"), str(tmp_path / "lake")
    for table in (ra, rb):
        snapshot(config, base_uri, str(table), chunk_size=400, chunks_per_batch=2)
    stream(config, base_uri, [ra, rb])

    with admin.cursor() as cur:
        cur.execute("RENAME TABLE ra TO ra_moved, rb TO rb_moved")  # two pairs, both captured
        cur.execute("UPDATE ra_moved SET v = -v WHERE id <= 45")  # written under the other name
        cur.execute("DELETE FROM rb_moved WHERE id <= 13")
    stream(config, base_uri, [ra, rb])
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and {ra, rb} <= set(checkpoint.stopped) and not checkpoint.schemas
    with admin.cursor() as cur:
        cur.execute("RENAME TABLE ra_moved TO ra, rb_moved TO rb")  # back: captured again, rows read again
        cur.execute("UPDATE ra SET v = v + 1000 WHERE id BETWEEN 40 AND 60")
    # (the stream reads the rename before the table changes again: a table captured again takes the
    # server's columns of the moment it is read, docs/schema-changes.md, "Several DDLs in a row")
    stream(config, base_uri, [ra, rb])
    for table in (ra, rb):
        assert_replica_equal(admin, base_uri, table)
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE ra CHANGE COLUMN n n2 VARCHAR(20)")
        cur.execute("ALTER TABLE ra MODIFY name VARCHAR(10) CHARACTER SET utf8mb4")  # another character set
        cur.execute("ALTER TABLE ra MODIFY n2 INT")  # VARCHAR to INT: the numbers the source made
        cur.execute("ALTER TABLE ra ADD COLUMN at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)")
        cur.execute("UPDATE ra SET n2 = n2 * 2 WHERE id <= 5")
    stream(config, base_uri, [ra, rb])
    for table in (ra, rb):
        assert_replica_equal(admin, base_uri, table)
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and set(checkpoint.schemas) == {ra, rb} and not checkpoint.stopped


def test_as_of_reads_stop_where_a_ddl_replaced_rows(admin: Any, config: ConnectionConfig, database: str,
                                                    tmp_path: Any) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE ao (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO ao SELECT seq, seq FROM seq_1_to_100")
    table, base_uri = TableId(database, "ao"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=50, chunks_per_batch=1)
    with admin.cursor() as cur:
        cur.execute("UPDATE ao SET v = 0 WHERE id = 1")
        before = read_current_offset(admin, ServerInfo.read(admin), with_gtid=False)
        cur.execute("TRUNCATE TABLE ao")
        cur.execute("INSERT INTO ao VALUES (7, 7)")
        after = read_current_offset(admin, ServerInfo.read(admin), with_gtid=False)
    stream(config, base_uri, [table])
    assert read_table(base_uri, str(table), as_of=after).column("id").to_pylist() == [7]
    with pytest.raises(AsOfError, match="a TRUNCATE, a re-read after a DDL"):
        read_table(base_uri, str(table), as_of=before)


@pytest.mark.parametrize("behavior", [SchemaChangeBehavior.EVOLVE, SchemaChangeBehavior.TRY_EVOLVE,
                                      SchemaChangeBehavior.LENIENT])
def test_what_each_behavior_does_with_what_it_cannot_keep(admin: Any, config: ConnectionConfig, database: str,
                                                         tmp_path: Any, behavior: SchemaChangeBehavior) -> None:
    name = f"cv_{behavior.value}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET latin1)")
        cur.execute(f"INSERT INTO {name} SELECT seq, 'a' FROM seq_1_to_20")
    table, base_uri = TableId(database, name), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=50, chunks_per_batch=1)
    stream(config, base_uri, [table])
    with admin.cursor() as cur:
        cur.execute(f"ALTER TABLE {name} RENAME COLUMN s TO s2")
        cur.execute(f"ALTER TABLE {name} CONVERT TO CHARACTER SET utf8mb4")  # sqlglot cannot read it
        cur.execute(f"UPDATE {name} SET s2 = 'b' WHERE id = 1")
    if behavior is SchemaChangeBehavior.EVOLVE:
        with pytest.raises(SchemaChangeError, match=r"(?s)CONVERT TO CHARACTER SET.*schema_change_behavior"):
            stream(config, base_uri, [table], behavior)
        checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
        assert checkpoint is not None and "s2" in checkpoint.schemas[table].column_names  # the rename before it
        return
    stream(config, base_uri, [table], behavior)
    current = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table()
    if behavior is SchemaChangeBehavior.TRY_EVOLVE:  # the rename kept exactly, the conversion let through
        assert "s" not in current.column_names and current.column("s2").null_count == 0
    else:  # lenient: the new name starts empty, the old one stays
        assert {"s", "s2"} <= set(current.column_names) and current.column("s2").null_count == 19


def test_ignore_keeps_the_lakes_columns_and_writes_changes_as_them(admin: Any, config: ConnectionConfig,
                                                                    database: str, tmp_path: Any) -> None:
    """Under 'ignore' the lake keeps the columns it had: a column added is left out, a renamed or dropped
    one is NULL in rows written after, a widened one keeps its type, TRUNCATE is only recorded. A DDL that
    takes away the rows' key stops the stream, and another behavior refuses the lake."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE ig (id INT PRIMARY KEY, v INT, s VARCHAR(10), x INT)")
        cur.execute("INSERT INTO ig SELECT seq, seq, CONCAT('s', seq), seq * 10 FROM seq_1_to_50")
    table, base_uri = TableId(database, "ig"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=20, chunks_per_batch=1)
    stream(config, base_uri, [table], SchemaChangeBehavior.IGNORE)
    statements = ["ALTER TABLE ig ADD COLUMN c VARCHAR(5) NOT NULL DEFAULT 'x'", "ALTER TABLE ig RENAME COLUMN s TO s2",
                  "ALTER TABLE ig DROP COLUMN x", "ALTER TABLE ig MODIFY v BIGINT", "TRUNCATE TABLE ig"]
    with admin.cursor() as cur:
        cur.execute("UPDATE ig SET v = v + 100 WHERE id <= 5")
        for ddl in statements[:4]:
            cur.execute(ddl)
        cur.execute("UPDATE ig SET v = v + 1000 WHERE id BETWEEN 3 AND 7")
        cur.execute("DELETE FROM ig WHERE id = 10")
        cur.execute("INSERT INTO ig (id, v, s2, c) VALUES (100, 5, 'new', 'y')")
        cur.execute(statements[4])
        cur.execute("INSERT INTO ig (id, v, s2, c) VALUES (1, 1, 'again', 'z')")  # the TRUNCATE left rows, so
        cur.execute("INSERT INTO ig (id, v, s2, c) VALUES (2, 2, 'again', 'z')")  # these are updates here
    stream(config, base_uri, [table], SchemaChangeBehavior.IGNORE)

    expected = {i: (i, f"s{i}", i * 10) for i in range(1, 51) if i != 10}
    for i in range(1, 6):
        expected[i] = (i + 100, f"s{i}", i * 10)
    for i in range(3, 8):
        expected[i] = (expected[i][0] + 1000, None, None)
    expected.update({100: (5, None, None), 1: (1, None, None), 2: (2, None, None)})
    lake = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table()
    assert [n for n in lake.column_names if not n.startswith("_")] == ["id", "v", "s", "x"]
    assert str(lake.schema.field("v").type) == "int32"
    rows = read_table(base_uri, str(table)).to_pylist()
    assert {r["id"]: (r["v"], r["s"], r["x"]) for r in rows} == expected
    assert [d for _, d in ddl_records(base_uri, table)] == statements
    assert [k for k, _ in ddl_records(base_uri, table)] == ["!S"] * 4 + ["!T"]
    assert "c" not in read_changes(base_uri, str(table)).column_names
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and checkpoint.kept[table].column_names == ("id", "v", "s", "x")
    assert checkpoint.schemas[table].column_names == ("id", "v", "s2", "c")
    assert {r[0]: r[1:] for r in current_rows(base_uri, checkpoint.kept[table])} == expected  # deltalake alone

    with pytest.raises(InvalidOptionError, match=r"(?s)schema_change_behavior is 'evolve'.*'ignore'"):
        stream(config, base_uri, [table])
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE ig RENAME COLUMN id TO id2")
        cur.execute("UPDATE ig SET v = 0 WHERE id2 = 1")
    with pytest.raises(SchemaChangeError, match=r"(?s)RENAME COLUMN id TO id2.*told apart.*'evolve'"):
        stream(config, base_uri, [table], SchemaChangeBehavior.IGNORE)
    assert read_table(base_uri, str(table)).to_pylist() == rows  # nothing past the DDL committed


def test_truncate_met_while_the_table_is_in_its_snapshot_phase(admin: Any, config: ConnectionConfig, database: str,
                                                               tmp_path: Any) -> None:
    """The first batch is read before the TRUNCATE, the second after it: the stream, starting at the first
    batch's high watermarks, meets the TRUNCATE and must empty only the rows read before it."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE tp (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO tp SELECT seq, seq FROM seq_1_to_{ROWS}")
    table, base_uri = TableId(database, "tp"), str(tmp_path / "lake")

    def truncate_after_first(number: int) -> None:
        if number == 0:
            with admin.cursor() as cur:
                cur.execute("UPDATE tp SET v = -v WHERE id <= 10")
                cur.execute("TRUNCATE TABLE tp")
                cur.execute(f"INSERT INTO tp SELECT seq, seq * 2 FROM seq_1_to_{ROWS} WHERE seq % 3 = 0")

    plan = snapshot(config, base_uri, str(table), chunk_size=250, chunks_per_batch=4,
                    after_batch=truncate_after_first)
    assert len(plan.batches) >= 2
    stream(config, base_uri, [table])
    assert_replica_equal(admin, base_uri, table)


def test_tables_chosen_by_patterns_capture_those_created_and_renamed_in(
        admin: Any, config: ConnectionConfig, database: str, tmp_path: Any, mariadb_server: Any) -> None:
    """With ``include_tables`` the stream captures a table created under a matching name (empty, then its
    rows; ``CREATE ... SELECT`` too) and one renamed to a matching name (read whole, with a writer on it),
    but not one that does not match; a matching table made before the stream's start without a snapshot is
    left to the split, which then plans it and not the tables the stream captured itself."""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE pt_a (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO pt_a SELECT seq, seq FROM seq_1_to_500")
        cur.execute("CREATE TABLE pt_late (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO pt_late VALUES (1, 1)")
    pt_a, base_uri = TableId(database, "pt_a"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(pt_a), chunk_size=100, chunks_per_batch=2)
    options = StreamOptions(base_uri, (), writer="tests.patterns", stop_after_idle_seconds=0,
                            include_databases=database, include_tables=rf"{database}\.pt_.*")

    run_stopping_stream(config, options)
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE pt_new (id INT PRIMARY KEY, s VARCHAR(10))")
        cur.execute("INSERT INTO pt_new VALUES (1, 'a'), (2, 'b')")
        cur.execute("UPDATE pt_new SET s = 'c' WHERE id = 2")
        cur.execute("CREATE TABLE other_x (id INT PRIMARY KEY)")  # does not match: not captured
        cur.execute("INSERT INTO other_x VALUES (1)")
        cur.execute("CREATE TABLE staging (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO staging SELECT seq, seq FROM seq_1_to_1500")
        cur.execute("RENAME TABLE staging TO pt_moved")
        cur.execute("CREATE TABLE pt_ctas (PRIMARY KEY (id)) AS SELECT id, v FROM pt_a WHERE id <= 10")
        cur.execute("UPDATE pt_a SET v = -v WHERE id <= 3")
    writer = KeyValueWriter(mariadb_server, database, "pt_moved", ROWS)
    writer.start()
    try:
        run_stopping_stream(config, options)  # reads pt_moved whole while the writer changes it
    finally:
        writer.stopping.set()
        writer.join()
    assert writer.count > 0
    run_stopping_stream(config, options)

    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None
    names = {t.table for t in checkpoint.schemas}
    assert names == {"pt_a", "pt_new", "pt_moved", "pt_ctas"}
    for name in sorted(names):
        assert_replica_equal(admin, base_uri, TableId(database, name))

    split = SplitOptions(base_uri, include_databases=database, include_tables=rf"{database}\.pt_.*")
    packs = plan_snapshot(config, split, "mysql_cdc_default")
    assert {t.table for p in packs for t in p.tables} == {"pt_late"}  # pt_a is done, the others are the stream's
