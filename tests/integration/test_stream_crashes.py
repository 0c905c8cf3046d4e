"""Exactly-once under kill -9: a stream worker killed at random moments, again and again, while a
writer commits (small transactions, and large ones that the stream commits in parts); resumed each
time from the lake's checkpoint; the lake equals the table at the end. Also a torn batch (a changelog
commit, no checkpoint) is ignored and replaced."""

from __future__ import annotations

import random

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.delta import STREAM_APP_ID, STREAM_SEQ_COLUMN, for_delta
from airflow_provider_mysqlcdc.lake.read import read_changes, read_table
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore
from tests import stream_worker
from tests.arrow_rows import canonical_rows
from tests.integration.test_stream_dag import Writer, table_rows


def test_killed_stream_resumes_without_loss_or_duplicates(mariadb_server, admin, cdc_conn, database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
    table = TableId(database, "orders")
    schema = load_table_schema(cdc_conn, table)
    base_uri = str(tmp_path / "lake")
    store = StreamStore(base_uri)
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False)
    store.commit(Checkpoint(0, start, {table: schema}), {})  # like startup_mode latest-offset
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)

    with admin.cursor() as cur:  # one transaction of 3,000 rows: more than a batch (400 events) holds
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_3000")
    writer = Writer(mariadb_server, database, 8, seed=5)
    writer.bulk_every = 15
    writer.start()
    kills = stream_worker.kill_repeatedly(base_uri, config, random.Random(3),
                                          lambda kills: writer.is_alive() or kills < 4)
    writer.join()
    assert kills >= 4 and writer.count > 200

    # a torn batch: a changelog commit for the next sequence number, but no checkpoint naming it
    checkpoint = store.read_checkpoint()
    assert checkpoint is not None and checkpoint.seq > 3
    torn = pa.Table.from_pylist([{"id": 0, "_op": "+I", "_binlog_file": 1}], schema=lake_schema(schema))
    torn = for_delta(torn).append_column(STREAM_SEQ_COLUMN, pa.array([checkpoint.seq + 1], pa.int64()))
    torn_commit = CommitProperties(app_transactions=[Transaction(STREAM_APP_ID, checkpoint.seq + 1)])
    write_deltalake(store.changelog_uri(table), torn, mode="append", schema_mode="merge", commit_properties=torn_commit)
    assert 0 not in read_changes(base_uri, str(table)).column("id").to_pylist()

    stream_worker.run(base_uri, config, once=True)  # catch up in this process
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    changes = read_changes(base_uri, str(table))
    order = list(zip(*(changes.column(c).to_pylist() for c in ("_binlog_file", "_binlog_pos", "_row_seq")),
                     strict=True))
    assert len(order) == len(set(order)), "a change was written twice"
    updates = sum(op == ChangeKind.UPDATE_BEFORE for op in changes.column("_op").to_pylist())
    assert updates > 2000  # the bulk updates were captured
    assert 0 not in changes.column("id").to_pylist()  # the torn batch was removed, not read
    # the transactions larger than a batch were committed in parts: one transaction, several batches
    batches_of_transaction: dict[tuple[int, int], set[int]] = {}
    columns = ("_binlog_file", "_binlog_pos", STREAM_SEQ_COLUMN)
    for file, pos, seq in zip(*(changes.column(c).to_pylist() for c in columns), strict=True):
        batches_of_transaction.setdefault((file, pos), set()).add(seq)
    assert max(len(seqs) for seqs in batches_of_transaction.values()) > 1
