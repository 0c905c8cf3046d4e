"""gh-ost and pt-online-schema-change altering a captured table with a writer on it, replayed statement for
statement as the tools run them (their binaries are not needed: the binlog is what the stream reads), and
a stream that reads each cut-over late, after the tool dropped its tables.

A capture by patterns (``include_databases``) leaves the tools' tables out and follows the cut-over as the
ghost table renamed to the captured name, as a capture by name does: after each tool the current Delta
table alone equals the source, and no helper table is in the lake. With
``include_online_schema_change_tables`` the helper tables are captured too: the original table renamed away
at the cut-over is its replica copied, and a helper table gone by the time the stream reads the statement
that made it is passed over, never an error.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection, find_tables, load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.compared_rows import current_rows, table_rows
from tests.integration.stream_task import stream_task
from tests.replica import snapshot
from tests.writers import TransactionWriter

SERVER_IDS = "5960-5969"  # this module's binlog reader ids (the ``connections`` fixture)
ROWS = 3000
CHUNK = 250  # rows a copy statement of the tools copies
COPY_PAUSE = 0.05  # seconds between two (the tools' throttling): the writer's changes land in the copy
HELPERS = ("_items_gho", "_items_ghc", "_items_del", "_items_new", "_items_old")
CAPTURES = ("include_databases", "tables")

pytestmark = pytest.mark.usefixtures("connections")


class Writer(TransactionWriter):
    """Updates, deletes and inserts ``items`` rows; while gh-ost migrates (``ghost`` set) the same rows are
    written to its ghost table in the transaction, as gh-ost's binlog applier replays them (with REPLACE
    and DELETE). ``lock`` is held for each transaction: gh-ost's cut-over and the test's comparisons take it
    (the tool's ``LOCK TABLES`` keeps writes out the same way)."""

    pause = 0.003

    def __init__(self, server: Any, database: str) -> None:
        super().__init__(server, database, seed=11)
        self.lock = threading.Lock()
        self.ghost: str | None = None

    def write(self, cur: Any, rnd: random.Random) -> None:
        key = rnd.randint(1, ROWS + 300)
        with self.lock:
            cur.execute("BEGIN")
            cur.execute("UPDATE items SET v = v + 1 WHERE id = %s", (key,))
            cur.execute("DELETE FROM items WHERE id = %s", (key + 3,))
            cur.execute("INSERT IGNORE INTO items (id, v) VALUES (%s, %s)", (key + 5, key))
            if self.ghost is not None:
                for changed in (key, key + 3, key + 5):
                    cur.execute(f"DELETE FROM `{self.ghost}` WHERE id = %s", (changed,))
                    cur.execute(f"REPLACE INTO `{self.ghost}` (id, v) SELECT id, v FROM items WHERE id = %s",
                                (changed,))
            cur.execute("COMMIT")


def copy_rows(cur: Any, statement: str) -> None:
    """The tools' row copy: ``statement`` (with ``{lo}``/``{hi}``) over ``items``' key range, a chunk at a time."""
    cur.execute("SELECT MAX(id) FROM items")
    top = cur.fetchone()[0]
    for lo in range(1, top + 1, CHUNK):
        cur.execute(statement.format(lo=lo, hi=lo + CHUNK - 1))
        time.sleep(COPY_PAUSE)


def gh_ost(server: Any, database: str, writer: Writer, alter: str, ok_to_drop_table: bool) -> None:
    """gh-ost's statements, in its order: the changelog table and its heartbeats, the ghost table created
    like ``items`` and altered, the row copy (``INSERT IGNORE ... SELECT ... LOCK IN SHARE MODE``) while the
    writer's changes are applied to it, the atomic cut-over (the ``_del`` sentry table, ``LOCK TABLES``, the
    ``RENAME`` waiting on it, the sentry dropped, ``UNLOCK TABLES``), then the changelog table dropped and,
    with ``--ok-to-drop-table``, the original table."""
    conn, renamer = server.admin_connect(database), server.admin_connect(database)
    heartbeat = ("INSERT /* gh-ost */ INTO `_items_ghc` (id, hint, value) VALUES (NULLIF(%s, 0), %s, %s) "
                 "ON DUPLICATE KEY UPDATE last_update = NOW(), value = VALUES(value)")
    try:
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS `_items_ghc`")
            cur.execute("CREATE TABLE `_items_ghc` (id BIGINT UNSIGNED AUTO_INCREMENT, last_update TIMESTAMP NOT "
                        "NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint VARCHAR(64) CHARSET ascii "
                        "NOT NULL, value VARCHAR(4096) CHARSET ascii NOT NULL, PRIMARY KEY (id), UNIQUE KEY "
                        "hint_uidx (hint)) AUTO_INCREMENT=256 COMMENT='gh-ost changelog'")
            cur.execute(heartbeat, (2, "state", "GhostTableMigrated"))
            cur.execute("CREATE TABLE `_items_gho` LIKE `items`")
            cur.execute(f"ALTER TABLE `_items_gho` {alter}")
            writer.ghost = "_items_gho"
            copy_rows(cur, "INSERT /* gh-ost */ IGNORE INTO `_items_gho` (id, v) (SELECT id, v FROM `items` "
                           "FORCE INDEX (`PRIMARY`) WHERE id BETWEEN {lo} AND {hi} LOCK IN SHARE MODE)")
            cur.execute(heartbeat, (1, "heartbeat", time.strftime("%Y-%m-%dT%H:%M:%S")))
            cur.execute(heartbeat, (2, "state", "AllEventsUpToLockProcessed"))
            with writer.lock:  # the backlog is applied: no write between here and the swap
                cur.execute("CREATE TABLE `_items_del` (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB "
                            "COMMENT='ghost-cut-over-sentry'")
                cur.execute("LOCK TABLES `items` WRITE, `_items_del` WRITE")
                swap = threading.Thread(target=lambda: renamer.cursor().execute(
                    "RENAME TABLE `items` TO `_items_del`, `_items_gho` TO `items`"))
                swap.start()
                wait_for_statement(cur, "RENAME TABLE `items`")
                cur.execute("DROP TABLE IF EXISTS `_items_del`")
                cur.execute("UNLOCK TABLES")
                swap.join()
                writer.ghost = None
            cur.execute("DROP TABLE IF EXISTS `_items_ghc`")
            if ok_to_drop_table:
                cur.execute("DROP TABLE IF EXISTS `_items_del`")
    finally:
        conn.close()
        renamer.close()


def wait_for_statement(cur: Any, start: str) -> None:
    """Until another session runs a statement beginning with ``start`` (waiting on a lock)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s", (f"{start}%",))
        if cur.fetchone()[0]:
            return
        time.sleep(0.02)
    raise AssertionError(f"no session ran {start!r}")


def pt_osc(server: Any, database: str, alter: str) -> None:
    """pt-online-schema-change's statements, in its order: ``_items_new`` created like ``items`` and altered,
    its three triggers on ``items`` (the writer's changes reach the copy through them), the row copy
    (``INSERT LOW_PRIORITY IGNORE ... SELECT ... LOCK IN SHARE MODE``), ``ANALYZE TABLE``, the swap
    ``RENAME TABLE items TO _items_old, _items_new TO items``, the triggers and ``_items_old`` dropped."""
    conn = server.admin_connect(database)
    columns = "`id`, `v`"
    trigger = f"pt_osc_{database}_items"
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE `_items_new` LIKE `items`")
            cur.execute(f"ALTER TABLE `_items_new` {alter}")
            cur.execute(f"CREATE TRIGGER `{trigger}_del` AFTER DELETE ON `items` FOR EACH ROW DELETE IGNORE FROM "
                        f"`_items_new` WHERE `_items_new`.`id` <=> OLD.`id`")
            cur.execute(f"CREATE TRIGGER `{trigger}_upd` AFTER UPDATE ON `items` FOR EACH ROW BEGIN DELETE IGNORE "
                        f"FROM `_items_new` WHERE !(OLD.`id` <=> NEW.`id`) AND `_items_new`.`id` <=> OLD.`id`; "
                        f"REPLACE INTO `_items_new` ({columns}) VALUES (NEW.`id`, NEW.`v`); END")
            cur.execute(f"CREATE TRIGGER `{trigger}_ins` AFTER INSERT ON `items` FOR EACH ROW REPLACE INTO "
                        f"`_items_new` ({columns}) VALUES (NEW.`id`, NEW.`v`)")
            copy_rows(cur, f"INSERT LOW_PRIORITY IGNORE INTO `_items_new` ({columns}) SELECT {columns} FROM `items` "
                           "FORCE INDEX(`PRIMARY`) WHERE ((`id` >= {lo})) AND ((`id` <= {hi})) LOCK IN SHARE MODE")
            cur.execute("ANALYZE TABLE `_items_new`")
            cur.execute("RENAME TABLE `items` TO `_items_old`, `_items_new` TO `items`")
            for kind in ("del", "upd", "ins"):
                cur.execute(f"DROP TRIGGER IF EXISTS `{trigger}_{kind}`")
            cur.execute("DROP TABLE IF EXISTS `_items_old`")
    finally:
        conn.close()


def assert_replica_equal(admin: Any, base_uri: str, table: TableId) -> None:
    """The current Delta table alone (no changelog on top) equals the source, column for column."""
    schema = load_table_schema(admin, table)
    own = [f.name for f in DeltaTable(table_uri(base_uri, table)).schema().fields if not f.name.startswith("_")]
    assert own == list(schema.column_names)
    assert sorted(current_rows(base_uri, schema)) == table_rows(admin, schema)


def lake_tables(base_uri: str) -> tuple[set[str], set[str]]:
    """The names of the tables the lake's checkpoint captures, and of those it keeps stopped."""
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None
    return {t.table for t in checkpoint.schemas}, {t.table for t in checkpoint.stopped}


def start(admin: Any, connections: ConnectionConfig, database: str, *base_uris: str) -> TableId:
    """``items`` anew in the module's database (alone: the patterns take every table of it), snapshotted into
    each lake of ``base_uris``."""
    with admin.cursor() as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,))
        for (name,) in cur.fetchall():
            cur.execute(f"DROP TABLE `{name}`")
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO items SELECT seq, seq FROM seq_1_to_{ROWS}")
    items = TableId(database, "items")
    for base_uri in base_uris:
        snapshot(connections, base_uri, str(items), chunk_size=700, chunks_per_batch=2)
    return items


class Capture:
    """One lake of ``items`` and its stream task, capturing ``items`` by name (``capture`` 'tables') or its
    database's tables by pattern ('include_databases'). The tests run both captures side by side, each its
    own lake, over one run of the tools: both read the same binlog, and the tools, the writer and their
    pauses run once."""

    def __init__(self, capture: str, database: str, tmp_path: Any) -> None:
        self.capture, self.database, self.base_uri = capture, database, str(tmp_path / capture)

    def stream(self, items: TableId) -> Any:
        if self.capture == "tables":
            return stream_task(self.base_uri, str(items))
        return stream_task(self.base_uri, include_databases=self.database)


def started(admin: Any, connections: ConnectionConfig, database: str, tmp_path: Any) -> tuple[TableId, list[Capture]]:
    """``items`` (``start``) in the lake of each capture, and each capture's stream task run once."""
    captures = [Capture(capture, database, tmp_path) for capture in CAPTURES]
    items = start(admin, connections, database, *(c.base_uri for c in captures))
    for capture in captures:
        capture.stream(items)
    return items, captures


def test_gh_ost_then_pt_osc_under_a_writer_read_late(admin: Any, connections: ConnectionConfig, database: str,
                                                     mariadb_server: Any, tmp_path: Any) -> None:
    items, captures = started(admin, connections, database, tmp_path)

    writer = Writer(mariadb_server, database)
    writer.start()
    try:
        before = writer.count
        gh_ost(mariadb_server, database, writer, "ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'x'",
               ok_to_drop_table=True)
        assert writer.count > before + 10  # the writer wrote while the tool ran
        with writer.lock:  # the streams read the cut-over after the tool dropped its tables
            for capture in captures:
                capture.stream(items)
                assert_replica_equal(admin, capture.base_uri, items)
                assert lake_tables(capture.base_uri)[0] == {"items"}, capture.capture
        before = writer.count
        pt_osc(mariadb_server, database, "MODIFY v BIGINT, ADD INDEX by_v (v)")
        assert writer.count > before + 10
        with writer.lock:
            for capture in captures:
                capture.stream(items)
                assert_replica_equal(admin, capture.base_uri, items)
    finally:
        writer.stop()
    assert writer.error is None
    for capture in captures:
        capture.stream(items)
        assert_replica_equal(admin, capture.base_uri, items)
        captured, stopped = lake_tables(capture.base_uri)
        assert captured == {"items"} and not stopped & set(HELPERS), capture.capture
        assert not any(DeltaTable.is_deltatable(table_uri(capture.base_uri, TableId(database, name)))
                       for name in HELPERS), capture.capture
    with admin.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                    "TABLE_NAME = 'items' ORDER BY ORDINAL_POSITION", (database,))
        assert cur.fetchall() == (("id", "int"), ("v", "bigint"), ("note", "varchar"))  # both changes made


def test_helper_tables_included_on_request(admin: Any, connections: ConnectionConfig, database: str,
                                           mariadb_server: Any, tmp_path: Any) -> None:
    """``include_online_schema_change_tables``: gh-ost's original table kept as ``_items_del`` (its default)
    is captured as a copy of ``items``' replica at the cut-over and equals the source's; pt-osc's
    ``_items_old``, dropped before the stream reads the swap, is captured the same way and stopped by its
    DROP; the tables gone by the time the stream reads their CREATE are passed over."""
    base_uri = str(tmp_path / "lake")
    items = start(admin, connections, database, base_uri)
    options: dict[str, Any] = {"include_databases": database, "include_online_schema_change_tables": True}
    stream_task(base_uri, **options)

    writer = Writer(mariadb_server, database)
    writer.start()
    try:
        gh_ost(mariadb_server, database, writer, "ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'x'",
               ok_to_drop_table=False)
        with writer.lock:
            stream_task(base_uri, **options)
            assert_replica_equal(admin, base_uri, items)
            assert_replica_equal(admin, base_uri, TableId(database, "_items_del"))
            assert lake_tables(base_uri)[0] == {"items", "_items_del"}  # _gho and _ghc were gone: passed over
        with admin.cursor() as cur:
            cur.execute("DROP TABLE `_items_del`")
        pt_osc(mariadb_server, database, "MODIFY v BIGINT")
    finally:
        writer.stop()
    assert writer.error is None and writer.count > 20
    stream_task(base_uri, **options)
    assert_replica_equal(admin, base_uri, items)
    captured, stopped = lake_tables(base_uri)
    assert captured == {"items"} and {"_items_del", "_items_old"} <= stopped
    assert DeltaTable(table_uri(base_uri, TableId(database, "_items_old"))).count() > ROWS / 2  # items' rows

    with admin.cursor() as cur:  # a helper table left behind (a tool stopped half way): the split's choice
        cur.execute("CREATE TABLE `_items_gho` LIKE `items`")
    control = connections.connect()
    try:
        assert find_tables(control, TableSelection(include_databases=database)) == [items]
        assert find_tables(control, TableSelection(include_databases=database,
                                                   include_online_schema_change_tables=True)) == [
            TableId(database, "_items_gho"), items]
        assert find_tables(control, TableSelection((TableId(database, "_items_gho"),))) == [
            TableId(database, "_items_gho")]  # named: whatever its name
    finally:
        control.close()


def test_a_swapped_in_table_gone_by_the_time_the_stream_reads_the_swap(
        admin: Any, connections: ConnectionConfig, database: str, mariadb_server: Any, tmp_path: Any) -> None:
    """gh-ost's cut-over, then ``items`` renamed away before the stream reads either: the table swapped in
    is gone (its rows were the ghost table's, which no capture takes), so the stream passes over it; under
    the patterns the rename then captures ``items_archive``, its rows read whole. Nothing fails.

    (Under the patterns the stream's start already stops ``items``, which the server no longer has, at the
    checkpoint: ``engine.stream.stream_runner`` wants the tables the patterns find on the server.)"""
    items, captures = started(admin, connections, database, tmp_path)
    writer = Writer(mariadb_server, database)
    writer.start()
    try:
        gh_ost(mariadb_server, database, writer, "ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'x'",
               ok_to_drop_table=True)
    finally:
        writer.stop()
    assert writer.error is None
    with admin.cursor() as cur:
        cur.execute("RENAME TABLE items TO items_archive")
        cur.execute("INSERT INTO items_archive (id, v) VALUES (100000, 1)")
    for capture in captures:
        capture.stream(items)
        captured, stopped = lake_tables(capture.base_uri)
        assert stopped == {"items"}, capture.capture
        if capture.capture == "include_databases":
            assert captured == {"items_archive"}
            assert_replica_equal(admin, capture.base_uri, TableId(database, "items_archive"))
        else:
            assert captured == set()
            checkpoint = StreamStore(Lake.at(capture.base_uri)).read_checkpoint()
            assert checkpoint is not None and checkpoint.stopped[items].ddl.startswith("RENAME TABLE `items` TO")
