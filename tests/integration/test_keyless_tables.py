"""A table without any key, replicated as a multiset of whole rows (docs/design/invariants.md, invariant 7), on MariaDB.

The table has whole-row duplicates and is split on a column that is not unique. A writer inserts copies
of rows, deletes one copy (``DELETE ... LIMIT 1``), updates one copy (``UPDATE ... LIMIT 1``, also of the
chunk key, which moves the copy to another chunk) while the snapshot (the engine's own steps without
Spark, ``tests.replica``) and the stream run. Then ``read_table``, the current Delta table read with
``deltalake`` alone (after the MERGE) and verification all hold exactly the source's rows, duplicates
counted; a damaged copy is named by verification; a committed batch is not re-run once the stream has
captured the table.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import commit_batch, write_chunks
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.multiset import DUP_COLUMN
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests import replica
from tests.airflow_connections import config_of, set_airflow_connections
from tests.integration.example_dag import example_dag
from tests.replica import verify
from tests.writers import Ticker, TransactionWriter

COLUMNS = ["g", "name", "amount", "note"]
GROUPS = 150


def create_bag(admin: Any, rows: int = 1200) -> None:
    """No key at all; every image is there ``rows / GROUPS`` times; ``g`` is indexed, not unique."""
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bag")
        cur.execute("CREATE TABLE bag (g INT NOT NULL, name VARCHAR(12) NOT NULL, amount DECIMAL(8,2) NULL, "
                    "note VARCHAR(8) NULL, KEY (g)) ENGINE=InnoDB")
        cur.executemany("INSERT INTO bag VALUES (%s, %s, %s, %s)",
                        [(i % GROUPS, f"n{i % 3}", i % 2, None if i % 5 else "x") for i in range(rows)])


class BagWriter(TransactionWriter):
    """Copies, one-copy deletes and one-copy updates (of the chunk key too), some in one transaction."""

    pause = 0.002

    def write(self, cur: Any, rnd: random.Random) -> None:
        g = rnd.randrange(GROUPS + 40)
        kind = rnd.randrange(5)
        if kind == 0:
            cur.execute("INSERT INTO bag SELECT * FROM bag WHERE g = %s LIMIT 1", (g,))
        elif kind == 1:
            cur.execute("DELETE FROM bag WHERE g = %s LIMIT 1", (g,))
        elif kind == 2:
            cur.execute("UPDATE bag SET amount = amount + 1 WHERE g = %s LIMIT 1", (g,))
        elif kind == 3:
            cur.execute("UPDATE bag SET g = %s WHERE g = %s LIMIT 1", ((g * 7) % (GROUPS + 40), g))
        else:  # a copy and a removal of the same image in one transaction
            cur.execute("BEGIN")
            cur.execute("INSERT INTO bag SELECT * FROM bag WHERE g = %s LIMIT 2", (g,))
            cur.execute("DELETE FROM bag WHERE g = %s LIMIT 1", (g,))
            cur.execute("COMMIT")


def source_rows(admin: Any) -> list[tuple[Any, ...]]:
    with admin.cursor() as cur:
        cur.execute("SELECT g, name, amount, note FROM bag")
        return sorted((tuple(r) for r in cur.fetchall()), key=repr)


def lake_rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in COLUMNS) for r in table.to_pylist()), key=repr)


def test_a_keyless_table_under_a_writer_is_replicated_as_a_multiset(mariadb_server, admin, database,
                                                                    tmp_path) -> None:
    config, base_uri = config_of(mariadb_server, "5970-5980"), str(tmp_path / "lake")
    create_bag(admin)
    table = f"{database}.bag"
    writer = BagWriter(mariadb_server, database, seed=25)
    writer.start()
    try:
        plan = replica.snapshot(config, base_uri, table, chunk_size=100, chunks_per_batch=3, chunk_key="g",
                                after_batch=lambda _: time.sleep(0.05))
        during = writer.count
        replica.stream(config, base_uri, [table], merge=True)
        time.sleep(0.5)
    finally:
        writer.stop(30)
    assert plan.schema.keyless and len(plan.batches) >= 3 and writer.count > during > 20
    # the snapshot's chunks were read at one binlog position each: nothing to fix up
    manifests = [m for m in SnapshotStore(Lake.at(base_uri)).manifests(plan) if m is not None]
    assert all(r.low_watermark == r.high_watermark for m in manifests for r in m.chunks)

    expected = source_rows(admin)
    assert max(Counter(expected).values()) > 1  # duplicates are there to keep
    replica.stream(config, base_uri, [table], merge=False)
    assert lake_rows(read_table(base_uri, table)) == expected  # current table plus unmerged changes

    replica.stream(config, base_uri, [table], merge=True)
    current = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table()
    assert lake_rows(current) == expected  # deltalake alone: one row per copy
    copies: dict[tuple[Any, ...], list[int]] = {}
    for row in current.to_pylist():
        copies.setdefault(tuple(row[c] for c in COLUMNS), []).append(row[DUP_COLUMN])
    assert all(sorted(ordinals) == list(range(len(ordinals))) for ordinals in copies.values())
    assert lake_rows(read_table(base_uri, table)) == expected

    ticker = Ticker(mariadb_server, database)
    ticker.start()
    try:
        with replica.stream_running(config, base_uri):
            report = verify(config, base_uri, plan, "keyless-equal")
            assert report.equal, report.summary()
            # one copy of every duplicated image with g = 5 gone from the lake: verify names each as missing
            delta = DeltaTable(table_uri(base_uri, table))
            removed = int(delta.delete(f"g = 5 AND {DUP_COLUMN} = 1")["num_deleted_rows"])
            damaged = verify(config, base_uri, plan, "keyless-damaged")
    finally:
        ticker.stopping.set()
        ticker.join(10)
    assert removed >= 1
    missing = [key for v in damaged.verdicts for key in v.missing.keys]
    assert len(missing) == removed and all(key[0] == 5 for key in missing)
    assert not any(v.extra.count or v.different.count for v in damaged.verdicts)


def test_a_committed_keyless_batch_is_not_rerun_once_streamed(mariadb_server, admin, database, tmp_path) -> None:
    """Its new rows would be as of a later position than the changes the stream captured after the old ones."""
    config, base_uri = config_of(mariadb_server, "5981-5990"), str(tmp_path / "lake")
    create_bag(admin, rows=300)
    table = f"{database}.bag"
    plan = replica.snapshot(config, base_uri, table, chunk_size=100, chunks_per_batch=2, chunk_key="g")
    store, batch = SnapshotStore(Lake.at(base_uri)), plan.batches[0]
    attempt = uuid.uuid4().hex[:12]
    results = list(write_chunks(store, batch, attempt, 0, config, plan.schema, plan.chunks_of(batch),
                                config.server_id.allocate(0)))
    commit_batch(store, batch, attempt, plan.schema, results, 1.0)  # not streamed yet: a re-run is fine
    replica.stream(config, base_uri, [table], merge=True)
    with pytest.raises(SnapshotStateError, match=r"without any key .* re-snapshot all of it"):
        commit_batch(store, batch, attempt, plan.schema, results, 1.0)
    assert lake_rows(read_table(base_uri, str(TableId.parse(table)))) == source_rows(admin)


def test_a_keyless_table_through_the_spark_snapshot_job_and_the_stream(airflow_db, monkeypatch, mariadb_server,
                                                                       admin, database, tmp_path) -> None:
    """The example DAG (split, real ``spark-submit`` on ``local[2]``, the stream) with the writer running into
    the stream: the Spark job keeps the plan's chunk key of a keyless table and reads it at snapshot positions."""
    set_airflow_connections(monkeypatch, mariadb_server, "5991-5999")
    create_bag(admin, rows=3000)
    base_uri, table = str(tmp_path / "lake"), f"{database}.bag"

    def stream_started_a_while_ago() -> bool:
        checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
        return checkpoint is not None and checkpoint.seq >= 3

    writer = BagWriter(mariadb_server, database, seed=25, until=stream_started_a_while_ago)
    writer.start()
    try:
        run = example_dag().test(run_conf={"tables": [table], "base_uri": base_uri, "chunk_key_columns": {table: "g"},
                                           "stop_after_idle_seconds": 3})
    finally:
        writer.stop(30)
    assert run.state == "success" and writer.count > 20
    plan = SnapshotStore(Lake.at(base_uri)).read_plan(TableId.parse(table))
    assert plan is not None and plan.schema.keyless and plan.schema.chunk_key == "g"
    manifests = SnapshotStore(Lake.at(base_uri)).manifests(plan)
    assert all(m is not None and all(r.low_watermark == r.high_watermark for r in m.chunks) for m in manifests)
    expected = source_rows(admin)  # the stream stopped once caught up and idle, and merged
    assert max(Counter(expected).values()) > 1
    assert lake_rows(read_table(base_uri, table)) == expected
    assert lake_rows(DeltaTable(table_uri(base_uri, table)).to_pyarrow_table()) == expected
