"""Reading one chunk without locks: low watermark, SELECT, high watermark, binlog fix-up (DBLog).

The commit-visibility race. A transaction's binlog events are written before the storage engine
makes it visible. Flink CDC takes the low watermark (LW) from ``SHOW MASTER STATUS``: a transaction
already in the binlog before LW but not yet visible is then missing from the SELECT and, being
before LW, is not replayed either. It is lost from the chunk.

- MariaDB: LW is read inside ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` from
  ``binlog_snapshot_file/position``. That offset is consistent with the snapshot: every transaction
  before it is committed in the engine, so every SELECT started afterwards, on any connection, sees
  it. The race is closed.
- MySQL: there is no such status. LW comes from ``SHOW MASTER STATUS`` /
  ``SHOW BINARY LOG STATUS``, as in Flink CDC: best-effort, the race stays open for transactions
  committing at the very moment LW is read. (With GTIDs, reading (LW, HW] by GTID auto-position from
  LW's executed set would close it; not built yet.)

HW is read after the SELECT ends: every row the SELECT saw was committed, so its binlog events lie
at or before HW, and replaying (LW, HW] over the SELECT gives the chunk as of HW.

Keyless tables (rows identified by their whole image, duplicates kept: DESIGN invariant 7) cannot be
fixed up that way. Replaying a change of a keyed row that the SELECT already saw is harmless, the last
image per key wins; replaying an insert of a duplicated image that the SELECT already saw would count
it twice, and a delete already seen would remove a second copy. Which changes of (LW, HW] the SELECT
saw is unknowable, so a keyless chunk is read with an empty window instead: on MariaDB its SELECT runs
inside the ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` whose ``binlog_snapshot_file/position`` is
LW, so the rows are exactly the table as of LW, and HW = LW (nothing to replay). The SELECT then goes
through the control connection (pymysql, unbuffered): connectorx's own connection could not share the
transaction. MySQL has no binlog position of a consistent snapshot, so keyless tables are refused
there (``check_keyless_source``), and so are storage engines without consistent snapshots (MyISAM).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.arrow_select import ArrowSelect, connectorx_reaches
from airflow_provider_mysqlcdc.cdc.binlog_reader import BinlogReader, SchemaChanged, SchemaStatement
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.chunks import Chunk, check_chunk_key, chunk_where
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.key_order import KeyOrder
from airflow_provider_mysqlcdc.cdc.normalize import Row, normalize_chunk
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, read_current_offset, read_snapshot_offset
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.types import RowConverter, arrow_schema, select_expression
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError, TableNotSupportedError

DEFAULT_FETCH_SIZE = 4096
DEFAULT_GROUP_SIZE = 16
SNAPSHOT_ENGINES = frozenset({"innodb", "xtradb", "rocksdb"})
"""Storage engines whose ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` sees one consistent state of a table."""


def check_keyless_source(conn: Any, server: ServerInfo, schema: TableSchema) -> None:
    """Refuse a keyless table where its chunks cannot be read at an exact binlog position (see the module
    docstring): a MySQL server, or a table in a storage engine without consistent snapshots."""
    if not schema.keyless:
        return
    if not server.is_mariadb:
        raise TableNotSupportedError(
            f"table {schema.id} has no primary key and no UNIQUE NOT NULL index, so its rows are a multiset of "
            f"whole images, and a snapshot chunk of such a table must be read at an exact binlog position (a "
            f"change replayed over rows that already hold it would count a duplicate twice); MySQL has no binlog "
            f"position of a consistent snapshot (MariaDB's binlog_snapshot_position), so such tables can only be "
            f"captured from MariaDB: add a primary key (or a UNIQUE index on NOT NULL columns) to {schema.id}, or "
            f"leave it out (exclude_tables)"
        )
    with conn.cursor() as cur:
        cur.execute("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (schema.id.database, schema.id.table))
        row = cur.fetchone()
    engine = str(row[0]) if row and row[0] else "unknown"
    if engine.lower() not in SNAPSHOT_ENGINES:
        raise TableNotSupportedError(
            f"table {schema.id} has no key, so its chunks are read inside a consistent snapshot at an exact binlog "
            f"position, but its storage engine {engine} has no consistent snapshots: convert it to InnoDB, or add "
            f"a primary key, or leave it out (exclude_tables)"
        )


@dataclass(frozen=True)
class ChunkSnapshot:
    """A chunk's rows as of its high watermark, in the table's canonical Arrow schema."""

    chunk: Chunk
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    table: pa.Table
    changed_keys: int


class ChunkReader:
    """Reads chunks of one table, one after the other.

    The SELECT goes through connectorx straight into Arrow (``arrow_select``), over TLS too; with a TLS
    client certificate, which connectorx's MySQL URL cannot express, through pymysql (unbuffered) instead
    (``use_connectorx`` overrides the choice). Watermarks
    and the schema use a pymysql control connection. ``server_id`` is the binlog reader id for the
    fix-ups (one per concurrent ChunkReader).
    """

    def __init__(
        self,
        config: ConnectionConfig,
        schema: TableSchema,
        server_id: int,
        fetch_size: int = DEFAULT_FETCH_SIZE,
        use_connectorx: bool | None = None,
        group_size: int = DEFAULT_GROUP_SIZE,
    ) -> None:
        import pymysql.cursors

        self.config = config
        self.schema = schema
        self.server_id = server_id
        self.fetch_size = fetch_size
        self.group_size = group_size
        self._key_column = check_chunk_key(schema)
        native = connectorx_reaches(config) if use_connectorx is None else use_connectorx
        native = native and not schema.keyless  # a keyless chunk is selected in the control connection's snapshot
        self._arrow = ArrowSelect(config, schema) if native else None
        self._together = self._arrow is not None and self._arrow.reads_together
        self._convert = RowConverter(schema, config.server_time_zone)
        self._arrow_schema = arrow_schema(schema)
        self._key_index = schema.column_names.index(schema.chunk_key)
        columns = ", ".join(select_expression(c) for c in schema.columns)
        self._select = f"SELECT {columns} FROM {schema.id.quoted} WHERE "  # noqa: S608 (quoted names)
        self._reader = None
        self._control = config.connect()
        try:  # a failure from here on must not leak the connections
            keyless = schema.keyless
            self._reader = None if native or keyless else config.connect(cursorclass=pymysql.cursors.SSCursor)
            self.server = ServerInfo.read(self._control)
            check_keyless_source(self._control, self.server, schema)
            self._check_schema("before its first chunk")
            self._key_order = KeyOrder.for_column(self._control, self._key_column)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self._control.close()
        finally:
            if self._reader is not None:
                self._reader.close()

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, chunks: Sequence[Chunk]) -> Iterator[ChunkSnapshot]:
        """Chunks are selected ``group_size`` at a time, then fixed up from one binlog pass over the
        group's windows: opening a binlog connection costs ~25 ms here, more than selecting a chunk.
        On an integer key read through connectorx, a group is one SELECT between one pair of watermarks
        (``_select_together``); otherwise each chunk is selected between watermarks of its own.
        Memory holds one group of chunks."""
        for first in range(0, len(chunks), self.group_size):
            yield from self._read_group(chunks[first : first + self.group_size])

    def _read_group(self, chunks: Sequence[Chunk]) -> Iterator[ChunkSnapshot]:
        if self.schema.keyless:
            for chunk in chunks:
                yield self._read_at_snapshot(chunk)
            return
        selected = self._select_together(chunks) if self._together else self._select_each(chunks)
        windows = [(low, high) for _, low, _, high in selected if low != high]
        changes = self._changes_between(min(w[0] for w in windows), max(w[1] for w in windows)) if windows else []
        # an ALTER TABLE between two groups' watermarks is in no window: the columns say it, before any chunk
        # read after it is handed on (one information_schema query a group)
        self._check_schema(f"while chunks {chunks[0].index}-{chunks[-1].index} were read")
        offsets = [c.offset for c in changes]
        for chunk, low, table, high in selected:
            # changes are in offset order: the chunk's window (low, high] is one slice of them
            window = changes[bisect_right(offsets, low) : bisect_right(offsets, high)]
            normalized = normalize_chunk(table, window, self.schema, self._in_chunk(chunk, window))
            yield ChunkSnapshot(chunk, low, high, normalized.table, normalized.changed_keys)

    def _select_each(self, chunks: Sequence[Chunk]) -> list[tuple[Chunk, BinlogOffset, pa.Table, BinlogOffset]]:
        """Each chunk between watermarks of its own."""
        selected = []
        for chunk in chunks:
            low = self._low_watermark()
            try:
                table = self._arrow.read(chunk) if self._arrow is not None else self._select_rows(chunk)
            except Exception:  # e.g. a column dropped since: say so rather than the driver's error
                self._check_schema(f"while chunk {chunk.index} was selected")
                raise
            selected.append((chunk, low, table, read_current_offset(self._control, self.server, with_gtid=False)))
        return selected

    def _select_together(self, chunks: Sequence[Chunk]) -> list[tuple[Chunk, BinlogOffset, pa.Table, BinlogOffset]]:
        """The chunks by one SELECT between one pair of watermarks (``ArrowSelect.read_many``): the
        algorithm's steps hold for every chunk of it, as for one larger chunk. The SELECT started after LW
        and ended before HW, so each chunk's rows and its changes in (LW, HW] give it as of HW."""
        assert self._arrow is not None
        low = self._low_watermark()
        try:
            tables = self._arrow.read_many(chunks)
        except Exception:  # e.g. a column dropped since: say so rather than the driver's error
            self._check_schema(f"while chunks {chunks[0].index}-{chunks[-1].index} were selected")
            raise
        high = read_current_offset(self._control, self.server, with_gtid=False)
        return [(chunk, low, table, high) for chunk, table in zip(chunks, tables, strict=True)]

    def _low_watermark(self) -> BinlogOffset:
        """Watermarks carry file and position only: they order chunks and changes on this server,
        and the stream can look its GTID up once where it starts (offset._mariadb_gtid_at has the cost)."""
        if not self.server.is_mariadb:
            return read_current_offset(self._control, self.server, with_gtid=False)
        with self._control.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            try:
                return read_snapshot_offset(self._control, with_gtid=False)
            finally:
                cur.execute("COMMIT")

    def _read_at_snapshot(self, chunk: Chunk) -> ChunkSnapshot:
        """A keyless chunk: its rows exactly as of the binlog position of one consistent snapshot, selected
        inside it (LW = HW, no fix-up; see the module docstring). REPEATABLE READ is set for this
        transaction: under READ COMMITTED the SELECT would not read the snapshot's state."""
        import pymysql.cursors

        with self._control.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            at = read_snapshot_offset(self._control, with_gtid=False)
            try:
                table = self._select_rows(chunk, self._control.cursor(pymysql.cursors.SSCursor))
            except Exception:
                self._control.rollback()
                self._check_schema(f"while chunk {chunk.index} was selected")
                raise
        finally:
            with self._control.cursor() as cur:
                cur.execute("COMMIT")
        return ChunkSnapshot(chunk, at, at, table, 0)

    def _select_rows(self, chunk: Chunk, cursor: Any = None) -> pa.Table:
        """The chunk's rows through pymysql: the reader connection's unbuffered cursor, or ``cursor``."""
        if cursor is None:
            assert self._reader is not None
            cursor = self._reader.cursor()
        where, params = chunk_where(chunk, self._key_column)
        convert, names = self._convert.from_select, self.schema.column_names
        rows: list[dict[str, object]] = []
        with cursor as cur:
            cur.execute(self._select + where, params)
            while batch := cur.fetchmany(self.fetch_size):
                rows.extend(dict(zip(names, convert(r), strict=True)) for r in batch)
        return pa.Table.from_pylist(rows, schema=self._arrow_schema)

    def _changes_between(self, low: BinlogOffset, high: BinlogOffset) -> list[ChangeRecord]:
        """This table's changes in (low, high], read from the binlog."""
        reader = BinlogReader(
            self.config.replication_settings(),
            self.server_id,
            self.config.server_id,
            {self.schema.id: self.schema},
            low,
            reload_schema=lambda table: load_table_schema(self._control, table),
            stop=high,
        )
        changes = []
        for item in reader:
            if isinstance(item, SchemaChanged):
                raise self._changed(item.schema, f"at {item.offset}, between the watermarks of its chunks")
            if isinstance(item, SchemaStatement) and any(c.changes_columns for c in item.ddl.changes):
                # TRUNCATE or a DDL that changes rows without row events: the fix-up cannot replay it
                raise self._changed(load_table_schema(self._control, self.schema.id),
                                    f"by {item.ddl.statement!r} at {item.offset}, between the watermarks of its "
                                    f"chunks")
            if isinstance(item, ChangeRecord) and low < item.offset <= high:
                changes.append(item)
        return changes

    def _check_schema(self, when: str) -> None:
        current = load_table_schema(self._control, self.schema.id)
        if current.columns != self.schema.columns:  # the chunk key may be a configured one: columns decide
            raise self._changed(current, when)

    def _changed(self, current: TableSchema, when: str) -> SchemaChangeError:
        """The table changed while its batch is read (an ALTER TABLE): a batch has one schema, so this
        attempt stops and commits nothing; the task's retry reads with the table's current schema."""
        return SchemaChangeError(
            f"{self.schema.id} changed {when}: the batch reads columns "
            f"{', '.join(f'{c.name} {c.column_type}' for c in self.schema.columns)}, the table now has "
            f"{', '.join(f'{c.name} {c.column_type}' for c in current.columns)}. Nothing of this attempt is "
            f"committed; retry the task (or clear it): it reads with the current schema"
        )

    def _in_chunk(self, chunk: Chunk, changes: list[ChangeRecord]) -> Callable[[Row], bool]:
        """Whether a row image's key lies in the chunk, compared as the server compares (one
        round trip for all the window's string keys)."""
        if not changes:
            return lambda row: False
        index = self._key_index
        values = [c.values[index] for c in changes]
        keys = dict(zip(values, self._key_order.sort_keys(values), strict=True))
        key_range = chunk.key_range.in_order(self._key_order.sort_keys)
        return lambda row: key_range.holds(keys[row[index]])

