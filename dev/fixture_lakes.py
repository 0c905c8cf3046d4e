"""The fixture lakes under ``tests/fixtures/lakes/``: lakes written by a version of this package, which
``tests/integration/test_fixture_lakes.py`` reads and streams on from with the current code.

Every lake there is the replica of one source history, :data:`HISTORY`, run on a fresh MariaDB of
``dev/mariadb.py`` (``server_id`` 1, binlog ``mysql-bin``): two tables created and filled, snapshotted
without Spark by ``tests.replica`` (the engine functions the Spark job runs on its executors and
driver), then three stream batches, the first two merged into the current tables, the last in the
changelog only and without ``shop.tags``, which stops (a stopped table in the checkpoint). The
snapshot and the stream write nothing to the binlog, so replaying the history's statements alone
(:func:`replay`) on another fresh server of the same MariaDB version gives the same binlog: the same
files, positions and GTIDs as the lake's plans, manifests and checkpoint name. That is how the test
recreates the source and streams on from the lake. The lakes there were made with MariaDB 10.11.19
(Debian 12); another version may write other binlog positions, and the test says so.

Made by (a few seconds each; each run makes new attempt ids and timestamps, nothing else changes)::

    python dev/fixture_lakes.py tests/fixtures/lakes/current

and a lake of an earlier format by the same file run against the code of that commit (it uses only
``dev.mariadb``, ``tests.replica`` and ``ConnectionConfig.from_parts``, which both have), e.g.
``ae74a61``, the last commit before the stream followed DDL (checkpoint format 2 without ``ddl``,
``visible_seq``, ``history_from`` and ``kept``, schemas without ``key_index``, changelogs without
``_ddl``)::

    git worktree add ../old ae74a61
    (cd ../old && PYTHONPATH=. python <this checkout>/dev/fixture_lakes.py <this checkout>/tests/fixtures/lakes/ae74a61)
    git worktree remove ../old

``4ed330d`` is the ``current`` lake of that commit, kept when the checkpoint went to format 4: checkpoint format
3, every schema inside it (format 4 names each by its document under ``_stream/schemas/``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from dev import mariadb
from dev.ports import free_port
from tests import replica

TABLES = ("shop.orders", "shop.tags")
SERVER_IDS = "5900-5910"


@dataclass(frozen=True)
class Sql:
    """Statements run on one root connection, in order."""

    statements: tuple[str, ...]


@dataclass(frozen=True)
class Snapshot:
    table: str


@dataclass(frozen=True)
class Stream:
    """The stream catching up with the server for ``tables`` (a captured table left out stops)."""

    tables: tuple[str, ...]
    merge: bool


HISTORY: tuple[Sql | Snapshot | Stream, ...] = (
    Sql((
        "CREATE DATABASE shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(12,2), "
        "note TEXT, placed DATETIME(3))",
        "INSERT INTO shop.orders SELECT seq, seq % 7, seq * 1.25, IF(seq % 5 = 0, NULL, CONCAT('n', seq)), "
        "TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq MINUTE FROM shop.seq_1_to_120",
        "CREATE TABLE shop.tags (code VARCHAR(20) PRIMARY KEY, label VARCHAR(50), weight DOUBLE)",
        "INSERT INTO shop.tags SELECT CONCAT('T', LPAD(seq, 3, '0')), CONCAT('label ', seq), seq / 8 "
        "FROM shop.seq_1_to_45",
    )),
    Snapshot("shop.orders"),
    Snapshot("shop.tags"),
    Sql((
        "BEGIN",
        "UPDATE shop.orders SET amount = amount + 1, note = 'first' WHERE id IN (3, 33, 63, 93)",
        "DELETE FROM shop.orders WHERE id IN (10, 70)",
        "INSERT INTO shop.orders VALUES (121, 1, 9.99, 'new', '2026-02-01 10:00:00.123'), "
        "(122, 2, NULL, NULL, NULL)",
        "UPDATE shop.tags SET weight = -1 WHERE code IN ('T001', 't002')",
        "COMMIT",
    )),
    Stream(TABLES, merge=True),
    Sql((
        "UPDATE shop.orders SET id = 200 WHERE id = 121",
        "DELETE FROM shop.tags WHERE code = 'T045'",
        "INSERT INTO shop.tags VALUES ('t046', 'lower case', 0.5)",
    )),
    Stream(TABLES, merge=True),
    Sql((
        "BEGIN",
        "UPDATE shop.orders SET customer = customer + 10 WHERE id BETWEEN 40 AND 49",
        "DELETE FROM shop.orders WHERE id = 122",
        "UPDATE shop.tags SET label = 'while stopped' WHERE code = 'T010'",
        "COMMIT",
    )),
    Stream(("shop.orders",), merge=False),  # tags stops: its changes from here on are not in the lake
)
"""Two tables created and snapshotted; three stream batches, two merged; ``shop.tags`` stopped in the last."""


def config_of(server: mariadb.MariaDbServer) -> ConnectionConfig:
    return ConnectionConfig.from_parts(host=server.host, port=server.port, user=server.cdc_user,
                                       password=server.cdc_password, database=None,
                                       extra={"server_id": SERVER_IDS})


def run_sql(server: mariadb.MariaDbServer, statements: Sequence[str]) -> None:
    """The statements on one root connection, as the history ran them (the same session settings, so the
    same binlog events)."""
    conn = server.admin_connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def replay(server: mariadb.MariaDbServer, streamed: Callable[[Stream], None]) -> None:
    """The history's statements on ``server`` (a fresh one), without snapshot or stream; ``streamed`` is
    called where the history streamed (the source as the lake holds the step's tables)."""
    for step in HISTORY:
        if isinstance(step, Sql):
            run_sql(server, step.statements)
        elif isinstance(step, Stream):
            streamed(step)



def make(out: Path) -> None:
    """Run the history on a fresh server and keep its lake at ``out`` (replaced)."""
    with tempfile.TemporaryDirectory(prefix="fixture-lake-") as work:
        base, lake = Path(work) / "mariadb", Path(work) / "lake"
        server = mariadb.start(base, free_port())
        try:
            config = config_of(server)
            for step in HISTORY:
                if isinstance(step, Sql):
                    run_sql(server, step.statements)
                elif isinstance(step, Snapshot):
                    replica.snapshot(config, str(lake), step.table, chunk_size=30, chunks_per_batch=2, parts=1)
                else:
                    replica.stream(config, str(lake), list(step.tables), merge=step.merge)
        finally:
            mariadb.stop(base)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(lake, out)
    _forget_folder(out, lake)


def _forget_folder(out: Path, made_at: Path) -> None:
    """A Delta table's first commit records the folder it was created in (``commitInfo``'s
    ``operationParameters.location``, informational: no reader uses it); name a neutral one instead, so
    the fixture names no folder of the machine that made it."""
    for log in out.glob("**/_delta_log/*.json"):
        text = log.read_text()
        if made_at.as_uri() in text:
            log.write_text(text.replace(made_at.as_uri(), "file:///fixture-lake"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python dev/fixture_lakes.py <folder of the lake to write>")
    make(Path(sys.argv[1]).resolve())
