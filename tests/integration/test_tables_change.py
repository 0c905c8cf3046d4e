"""``tables`` changes between runs of the example DAG, with writers committing to every table throughout.

Run 1 captures ``a``. Run 2 adds ``b``: it is snapshotted on Spark and then streamed with ``a``
(before the fix its changes were silently never captured). Run 3 removes ``a``: the log says so, the
stream goes on with ``b``, ``a``'s replica stays as of the stop. Run 4 adds ``a`` back: the stream
goes back to where ``a`` stopped and catches up on what ``a`` missed, without writing ``b``'s changes
twice. After each run the lake equals the source for every captured table.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.example_dag import example_dag
from tests.writers import TransactionWriter

SERVER_IDS = "5600-5615"  # this module's binlog reader ids (the ``connections`` fixture)


@pytest.fixture()
def runner_log() -> Iterator[list[str]]:
    """The stream runner's log messages (Airflow's logging setup decides where they are printed)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("airflow_provider_mysqlcdc.engine.stream.stream_runner")
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


class BothTables(TransactionWriter):
    """Each transaction upserts and deletes rows of ``a`` and of ``b``."""

    def write(self, cur: Any, rnd: random.Random) -> None:
        cur.execute("BEGIN")
        for table in ("a", "b"):
            key = rnd.randint(1, 30_000)
            cur.execute(f"INSERT INTO {table} VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1", (key, key))
            cur.execute(f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1, 30_000),))
        cur.execute("COMMIT")
        time.sleep(0.005)


def checkpoint_seq(base_uri: str) -> int:
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    return checkpoint.seq if checkpoint is not None else -1


def run_with_writer(mariadb_server: Any, database: str, conf: dict[str, Any], seed: int,
                    until: Callable[[], bool]) -> Any:
    done = threading.Event()
    writer = BothTables(mariadb_server, database, 180, seed, until=lambda: done.is_set() or until())
    writer.start()
    try:
        run = example_dag().test(run_conf=conf)
    finally:
        done.set()
        writer.join()
    assert run.state == "success" and writer.count > 20
    return run


def test_tables_added_removed_and_added_back(airflow_db, connections, mariadb_server, admin, cdc_conn, database,
                                             tmp_path, runner_log: list[str]) -> None:
    with admin.cursor() as cur:
        for table in ("a", "b"):
            cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {table} SELECT seq, seq FROM seq_1_to_20000")
    a, b = f"{database}.a", f"{database}.b"
    schemas = {t: load_table_schema(cdc_conn, TableId.parse(t)) for t in (a, b)}
    base_uri = str(tmp_path / "lake")

    def conf(tables: list[str]) -> dict[str, Any]:
        return {"tables": tables, "base_uri": base_uri, "rows_per_batch": 10_000, "stop_after_idle_seconds": 3}

    def equal(table: str) -> bool:
        return canonical_rows(read_table(base_uri, table)) == table_rows(cdc_conn, schemas[table])

    # run 1: a only; the writer stops once the stream has committed a few batches
    run_with_writer(mariadb_server, database, conf([a]), 1, lambda: checkpoint_seq(base_uri) >= 3)
    assert equal(a)

    # run 2: b added: the split plans it, Spark snapshots it, and the stream takes it up at its HWs,
    # while the writer writes to both through the snapshot and into the stream
    seq = checkpoint_seq(base_uri)
    run_with_writer(mariadb_server, database, conf([a, b]), 2, lambda: checkpoint_seq(base_uri) >= seq + 3)
    assert equal(a) and equal(b)
    assert any("added to tables: streamed from its snapshot's high watermarks" in m for m in runner_log)
    b_changes = read_changes(base_uri, b).num_rows
    # the snapshot's rows are in b's current table, merged with the streamed changes when the stream stopped
    columns = list(schemas[b].column_names)
    current = DeltaTable(table_uri(base_uri, b)).to_pyarrow_table(columns=columns).sort_by("id")
    assert canonical_rows(current) == table_rows(cdc_conn, schemas[b]) and b_changes > 0

    # run 3: a removed: the log says so; a's replica stays as it was, b goes on
    a_before = canonical_rows(read_table(base_uri, a))
    seq = checkpoint_seq(base_uri)
    run_with_writer(mariadb_server, database, conf([b]), 3, lambda: checkpoint_seq(base_uri) >= seq + 3)
    assert any(f"{a} is no longer in tables: its capture stops at" in m for m in runner_log)
    assert equal(b) and not equal(a)
    assert canonical_rows(read_table(base_uri, a)) == a_before

    # run 4: a back, no writes: the stream re-reads from where a stopped; b's changes are not doubled
    b_changes = read_changes(base_uri, b).num_rows
    rerun = example_dag().test(run_conf=conf([a, b]))
    assert rerun.state == "success"
    assert any(f"{a} is back in tables: its capture resumes from" in m for m in runner_log)
    assert any("the stream goes back to" in m for m in runner_log)
    assert equal(a) and equal(b)
    assert read_changes(base_uri, b).num_rows == b_changes
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None and set(checkpoint.schemas) == {TableId.parse(a), TableId.parse(b)}
    assert not checkpoint.stopped
