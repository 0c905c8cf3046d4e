"""Exactly-once under kill -9: a stream worker killed at random moments, again and again, while a
writer commits (small transactions, and large ones that the stream commits in parts); resumed each
time from the lake's checkpoint; the lake equals the table at the end. Also a torn batch (a changelog
commit, no checkpoint) is ignored and replaced."""

from __future__ import annotations

import random

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits
from airflow_provider_mysqlcdc.engine.stream.stream_batches import StreamCommit, stream_batches
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests import stream_worker
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_rows
from tests.integration.orders import OrdersWriter


def test_killed_stream_resumes_without_loss_or_duplicates(mariadb_server, admin, cdc_conn, database, tmp_path) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
    table = TableId(database, "orders")
    schema = load_table_schema(cdc_conn, table)
    base_uri = str(tmp_path / "lake")
    store = StreamStore(Lake.at(base_uri))
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False)
    store.commit(Checkpoint(0, start, {table: schema}), {})  # like startup_mode latest-offset
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)

    with admin.cursor() as cur:  # one transaction of 3,000 rows: more than a batch (400 events) holds
        cur.execute("INSERT INTO orders SELECT seq, seq % 7, seq / 100, CONCAT('n', seq) FROM seq_1_to_3000")
    writer = OrdersWriter(mariadb_server, database, 8, seed=5)
    writer.bulk_every = 15
    writer.start()
    kills = stream_worker.kill_repeatedly(base_uri, config, random.Random(3),
                                          lambda kills: writer.is_alive() or kills < 4)
    writer.join()
    assert kills >= 4 and writer.count > 200

    checkpoint = store.read_checkpoint()
    assert checkpoint is not None and checkpoint.seq > 3
    changes = stream_worker.tear_and_catch_up(base_uri, config, table, schema)
    assert canonical_rows(read_table(base_uri, str(table))) == table_rows(cdc_conn, schema)
    updates = sum(op == ChangeKind.UPDATE_BEFORE for op in changes.column("_op").to_pylist())
    assert updates > 2000  # the bulk updates were captured
    # the transactions larger than a batch were committed in parts: one transaction, several batches
    batches_of_transaction: dict[tuple[int, int], set[int]] = {}
    columns = ("_binlog_file", "_binlog_pos", STREAM_SEQ_COLUMN)
    for file, pos, seq in zip(*(changes.column(c).to_pylist() for c in columns), strict=True):
        batches_of_transaction.setdefault((file, pos), set()).add(seq)
    assert max(len(seqs) for seqs in batches_of_transaction.values()) > 1


def test_transactions_larger_than_a_batch_leave_the_ones_before_visible(mariadb_server, admin, cdc_conn, database,
                                                                        tmp_path) -> None:
    """A writer whose large transactions (cut into parts) come within ``max_events`` of small ones: each
    cut commits the complete transactions before it at their boundary first, so readers see them. (Cut
    together with the open part, no batch of such a writer ever ended at a boundary, and nothing became
    visible while it wrote: seen as a kill -9 test whose stream never became readable.)"""
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE bulk (id BIGINT PRIMARY KEY, amount INT)")
        cur.execute("INSERT INTO bulk SELECT seq, 0 FROM seq_1_to_1000")
    table = TableId(database, "bulk")
    schema = load_table_schema(cdc_conn, table)
    store = StreamStore(Lake.at(str(tmp_path / "lake")))
    checkpoint = Checkpoint(0, read_current_offset(cdc_conn, ServerInfo.read(cdc_conn), with_gtid=False),
                            {table: schema})
    store.commit(checkpoint, {})
    cycles = 4
    with admin.cursor() as cur:
        for cycle in range(cycles):
            for small in range(5):  # 5 transactions of 10 rows: 50 changes, fewer than a batch
                cur.execute("UPDATE bulk SET amount = amount + 1 WHERE id BETWEEN %s AND %s",
                            (small * 10 + 1, small * 10 + 10))
            cur.execute("UPDATE bulk SET amount = amount + %s", (cycle + 1,))  # 1,000 rows: cut into parts
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    visible_batches = []
    for report in stream_batches(config, 5431, store, checkpoint, cdc_conn,
                                 lambda t: load_table_schema(cdc_conn, t), limits=CommitLimits(max_events=400)):
        assert isinstance(report, StreamCommit)
        if report.offset == report.offset.at_transaction_start():
            visible_batches.append(report.seq)
    # before each large transaction's first part, its small ones (the last: at the end of the binlog)
    assert len(visible_batches) >= cycles + 1
    assert store.read_checkpoint().visible[0] == checkpoint.seq  # type: ignore[union-attr]
    assert canonical_rows(read_table(store.lake.base_uri, str(table))) == table_rows(cdc_conn, schema)
