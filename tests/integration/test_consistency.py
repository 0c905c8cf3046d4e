"""The proof: chunks read while a writer commits, plus the emitted binlog changes, equal the table.

A writer thread runs multi-row transactions of inserts (also below the minimum and above the
maximum key), non-key updates, deletes and delete-then-reinsert of the same key, across all chunks,
the whole time the chunks are read. Afterwards the binlog from the lowest high watermark is passed
through the emit filter and applied over the union of the normalized chunks; the result must equal
the table exactly, every column. The stream's own path (whole rows events, chunk keys looked up per
event, Arrow lake rows) must write exactly those emitted changes to the changelog. One run has the
binlog compressed (MariaDB's ``log_bin_compress``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader, ChunkSnapshot
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import apply_changes, row_key_of
from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.stream.stream_batches import emit_filter_for, stream_batches
from airflow_provider_mysqlcdc.lake.changelog import changes_table, lake_schema
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN, cast_to
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests.arrow_rows import canonical_rows
from tests.compared_rows import table_contents
from tests.compressed_binlog import COMPRESSED_ROWS_EVENTS, compressed_binlog, event_types_since
from tests.writers import TransactionWriter

PREFIXES = ["a", "A", "á", "b", "B", "é", "E", "z", "Z", "ß", "😀"]


def int_key(rnd: random.Random) -> int:
    return rnd.randint(-2_000, 22_000)


def str_key(rnd: random.Random) -> str:
    return f"{rnd.choice(PREFIXES)}{rnd.randint(0, 9_999):04d}"


TABLES: dict[str, tuple[str, Callable[[random.Random], Any]]] = {
    "int_keys": ("id INT PRIMARY KEY", int_key),
    "str_keys": ("id VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY", str_key),
}
COLUMNS = "v INT NOT NULL, s VARCHAR(30), d DECIMAL(10,2), ts TIMESTAMP(6) NULL, b VARBINARY(8)"


class Writer(TransactionWriter):
    """Transactions of one to six random changes of ``table`` (keys made by ``make_key``)."""

    def __init__(self, server: Any, database: str, table: str, make_key: Callable[[random.Random], Any]) -> None:
        super().__init__(server, database, seed=7)
        self.table, self.make_key = table, make_key

    def write(self, cur: Any, rnd: random.Random) -> None:
        cur.execute("BEGIN")
        for _ in range(rnd.randint(1, 6)):
            self.one_change(cur, rnd)
        cur.execute("COMMIT")

    def one_change(self, cur: Any, rnd: random.Random) -> None:
        key, t = self.make_key(rnd), self.table
        values = (rnd.randint(0, 10**6), f"w{rnd.random():.6f}", Decimal(rnd.randint(0, 10**6)) / 100,
                  f"2024-01-01 00:00:{rnd.randint(0, 59):02d}.{rnd.randint(0, 999999):06d}", rnd.randbytes(3))
        kind = rnd.random()
        if kind < 0.35:
            cur.execute(f"INSERT INTO {t} VALUES (%s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                        (key, *values))
        elif kind < 0.7:
            cur.execute(f"UPDATE {t} SET v = %s, s = %s, ts = %s WHERE id >= %s ORDER BY id LIMIT 3",
                        (values[0], values[1], values[3], key))
        elif kind < 0.85:
            cur.execute(f"DELETE FROM {t} WHERE id >= %s ORDER BY id LIMIT 2", (key,))
        else:  # delete then re-insert the same key in one transaction
            cur.execute(f"SELECT id FROM {t} WHERE id >= %s ORDER BY id LIMIT 1", (key,))
            row = cur.fetchone()
            if row:
                cur.execute(f"DELETE FROM {t} WHERE id = %s", (row[0],))
                cur.execute(f"INSERT INTO {t} VALUES (%s, %s, %s, %s, %s, %s)", (row[0], *values))


def load(admin: Any, table: str, key_ddl: str, make_key: Callable[[random.Random], Any]) -> None:
    rnd = random.Random(1)
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} ({key_ddl}, {COLUMNS})")
        rows = [(make_key(rnd), i, f"r{i}", Decimal(i) / 100, "2023-06-01 12:00:00.5", bytes([i % 256]))
                for i in range(12_000)]
        cur.executemany(f"INSERT IGNORE INTO {table} VALUES (%s, %s, %s, %s, %s, %s)", rows)
        cur.execute(f"ANALYZE TABLE {table}")
        cur.fetchall()


@pytest.fixture()
def binlog_compressed(request, mariadb_server) -> Iterator[bool]:
    """The binlog compressed (MariaDB's log_bin_compress) during the test if its parameter says so."""
    with compressed_binlog(mariadb_server, request.param):
        yield request.param


@pytest.mark.parametrize(
    ("table", "use_connectorx", "binlog_compressed"),
    [("int_keys", True, False), ("str_keys", True, False), ("int_keys_pymysql", False, False),
     ("int_keys_compressed", True, True)],
    indirect=["binlog_compressed"],
)
def test_snapshot_plus_emitted_changes_equal_the_table(mariadb_server, admin, cdc_conn, database, table,
                                                       use_connectorx, binlog_compressed, tmp_path,
                                                       monkeypatch) -> None:
    key_ddl, make_key = TABLES[table.removesuffix("_pymysql").removesuffix("_compressed")]
    load(admin, table, key_ddl, make_key)
    schema = load_table_schema(cdc_conn, TableId(database, table))
    chunks = split_table(cdc_conn, schema, chunk_size=500)
    assert len(chunks) > 10
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)

    # each group's high watermark taken 30 ms after its SELECT (any offset read after the SELECT ends is a high
    # watermark): the writer commits inside every group's window, so there are changes to replay however loaded
    # the machine (a whole-suite run once read all of the pymysql run's groups between two of its commits)
    high_watermark = SourceSession.high_watermark

    def later_high_watermark(session: SourceSession) -> Any:
        time.sleep(0.03)
        return high_watermark(session)

    monkeypatch.setattr(SourceSession, "high_watermark", later_high_watermark)
    writer = Writer(mariadb_server, database, table, make_key)
    writer.start()
    time.sleep(0.2)
    # groups of 2 chunks: a dozen high watermarks over the read, so that the writer's changes fall between them
    # (with the default 16, the 24 chunks had 2, and a writer held back during the second group's short read
    # left no change for the filter to drop)
    with ChunkReader(config, schema, server_id=5420, fetch_size=97, use_connectorx=use_connectorx,
                     group_size=2) as reader:
        snapshots: list[ChunkSnapshot] = list(reader.read(chunks))
    time.sleep(0.2)
    writer.stop(30)
    assert writer.error is None and writer.count > 20
    end = read_current_offset(cdc_conn, reader.session.server)

    # the union of the chunks: every key once
    key = row_key_of(schema)
    state: dict[Hashable, tuple[Any, ...]] = {}
    for snap in snapshots:
        for row in canonical_rows(snap.table):
            assert key(row) not in state, f"{key(row)} is in two chunks"
            state[key(row)] = row
    assert sum(s.changed_keys for s in snapshots) > 0, "the writer never touched a chunk while it was read"

    # the stream: from the lowest HW, emitted only after the HW of the chunk holding the key
    # the pipeline's own filter: from a checkpoint holding the chunks as the stream keeps them
    lowest = min(s.high_watermark for s in snapshots)
    checkpoint = Checkpoint(0, lowest, {schema.id: schema}, {schema.id: [
        FinishedChunkInfo.of(s.chunk, s.high_watermark) for s in snapshots]})
    emit, orders = emit_filter_for(checkpoint, cdc_conn)
    order = orders[schema.id]
    finished = []  # the reference below: chunks as sort-key ranges, scanned one by one
    for snap in snapshots:
        start, stop = order.sort_keys([snap.chunk.start, snap.chunk.end])
        finished.append((start, stop, snap.high_watermark))
    stream = BinlogReader(config.replication_settings(), 5421, config.server_id, {schema.id: schema},
                          lowest,  # the lowest HW: no chunk misses an event
                          reload_schema=lambda t: load_table_schema(cdc_conn, t), stop=end)
    records = [r for r in stream if isinstance(r, ChangeRecord)]
    if binlog_compressed:  # else this run would only repeat int_keys
        assert COMPRESSED_ROWS_EVENTS <= set(event_types_since(mariadb_server, lowest.file, lowest.position))
    index = schema.column_names.index(schema.chunk_key)
    sort_keys = order.sort_keys([r.values[index] for r in records])
    emitted = [r for r, k in zip(records, sort_keys, strict=True) if emit.should_emit(r.table, k, r.offset)]
    assert 0 < len(emitted) < len(records)  # some changes were already in the snapshot
    # the filter against a plain scan: emitted exactly when after the HW of the chunk holding the key
    def chunk_high_watermark(sort_key: Any) -> Any:
        for start, end, high_watermark in finished:
            if sort_key is None or ((start is None or not sort_key < start) and (end is None or sort_key < end)):
                return high_watermark
        raise AssertionError(f"no chunk holds {sort_key!r}")

    expected = [r for r, k in zip(records, sort_keys, strict=True) if chunk_high_watermark(k) < r.offset]
    assert emitted == expected
    apply_changes(state, emitted, key)

    assert state == table_contents(cdc_conn, schema)

    # the stream from the same checkpoint: its changelog holds exactly the emitted changes
    store = StreamStore(Lake.at(str(tmp_path / "lake")))
    checkpoint = Checkpoint(0, lowest, {schema.id: schema}, {schema.id: [
        FinishedChunkInfo.of(s.chunk, s.high_watermark) for s in snapshots]})
    store.commit(checkpoint, {})
    assert list(stream_batches(config, 5422, store, checkpoint, cdc_conn, lambda t: load_table_schema(cdc_conn, t)))
    changelog = store.changelog(schema.id)
    assert changelog is not None
    written = changelog.read().drop_columns([STREAM_SEQ_COLUMN])
    written = cast_to(written, lake_schema(schema), "the changelog").sort_by(
        [("_binlog_file", "ascending"), ("_binlog_pos", "ascending"), ("_row_seq", "ascending")])
    assert written.equals(changes_table(emitted, schema))
