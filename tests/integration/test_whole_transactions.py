"""A source transaction larger than a stream batch is committed in parts (memory stays bounded), but the
MERGE and the readers advance only at transaction boundaries (``Checkpoint.visible``): a reader polling
the current Delta table (with ``deltalake`` alone) and ``read_table`` while the stream commits a
200,000-row transaction in ten parts never sees part of it."""

from __future__ import annotations

import threading
from typing import Any

from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits, StreamOptions
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.replica import run_stopping_stream, snapshot

BEFORE, TRANSACTION = 1_000, 200_000


def test_readers_never_see_part_of_a_transaction(admin: Any, mariadb_server: Any, database: str,
                                                 tmp_path: Any) -> None:
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port, server_id=ServerIdRange.parse("5970-5979"))
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO big SELECT seq, seq FROM seq_1_to_{BEFORE}")
    table, base_uri = TableId(database, "big"), str(tmp_path / "lake")
    snapshot(config, base_uri, str(table), chunk_size=500, chunks_per_batch=2)
    options = StreamOptions(base_uri, (table,), writer="tests.whole_transactions", stop_after_idle_seconds=0,
                            limits=CommitLimits(max_events=TRANSACTION // 10), merge_interval_seconds=0.001)

    def stream() -> None:
        run_stopping_stream(config, options)

    stream()
    with admin.cursor() as cur:  # one transaction, committed before the stream reads it
        cur.execute("BEGIN")
        cur.execute(f"INSERT INTO big SELECT seq, seq FROM seq_{BEFORE + 1}_to_{BEFORE + TRANSACTION}")
        cur.execute("UPDATE big SET v = -v WHERE id <= 10")
        cur.execute("COMMIT")

    seen: set[int] = set()
    read: set[int] = set()
    parts: set[bool] = set()  # whether a checkpoint was past its visible batch (a part committed)
    done = threading.Event()

    def poll() -> None:
        store, uri = StreamStore(Lake.at(base_uri)), table_uri(base_uri, table)
        while not done.is_set():
            seen.add(DeltaTable(uri).count())
            checkpoint = store.read_checkpoint()
            if checkpoint is not None:
                parts.add(checkpoint.seq != checkpoint.visible[0])
            if len(seen) % 3 == 0:
                read.add(read_table(base_uri, str(table)).num_rows)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        stream()
    finally:
        done.set()
        poller.join()
    seen.add(DeltaTable(table_uri(base_uri, table)).count())
    read.add(read_table(base_uri, str(table)).num_rows)
    assert True in parts  # the transaction was committed in parts while the poller looked
    assert seen <= {BEFORE, BEFORE + TRANSACTION} and BEFORE + TRANSACTION in seen
    assert read <= {BEFORE, BEFORE + TRANSACTION}
    rows = read_table(base_uri, str(table))
    assert sorted(rows.column("v").to_pylist())[:10] == list(range(-10, 0))
