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

Keyless tables (rows identified by their whole image, duplicates kept: docs/design/invariants.md, invariant 7) cannot be
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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_snapshot_offset
from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter, arrow_schema, select_expression
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect, connectorx_reaches
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import Row, normalize_chunk
from airflow_provider_mysqlcdc.cdc.snapshot.source_session import SourceSession
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk, check_chunk_key, chunk_where
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError

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
    """Reads chunks of one table: alone (``read``), or with other tables' under shared watermarks
    (``read_tables``).

    The SELECT goes through connectorx straight into Arrow (``arrow_select``), over TLS too; with a TLS
    client certificate, which connectorx's MySQL URL cannot express, through pymysql (unbuffered) instead
    (``use_connectorx`` overrides the choice). Watermarks, the columns and a pymysql SELECT use the
    ``session``'s connections (``cdc.source_session``): given, it is shared with other readers and closed by
    its owner; none given, the reader opens one of its own and closes it. ``server_id`` is the binlog reader
    id for the fix-ups of ``read`` (one per concurrent reader).
    """

    def __init__(
        self,
        config: ConnectionConfig,
        schema: TableSchema,
        server_id: int,
        fetch_size: int = DEFAULT_FETCH_SIZE,
        use_connectorx: bool | None = None,
        group_size: int = DEFAULT_GROUP_SIZE,
        session: SourceSession | None = None,
    ) -> None:
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
        self._owns_session = session is None
        self.session = SourceSession(config) if session is None else session
        try:  # a failure from here on must not leak the reader's own connections
            check_keyless_source(self.session.control, self.session.server, schema)
            self._key_order = KeyOrder.for_column(self.session.control, self._key_column)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._owns_session:
            self.session.close()

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, chunks: Sequence[Chunk]) -> Iterator[ChunkSnapshot]:
        """The chunks, ``group_size`` at a time (``read_tables`` for this table alone)."""
        for _, snapshot in read_tables(self.session, self.server_id, [(self, chunks)]):
            yield snapshot

    def select(self, chunks: Sequence[Chunk]) -> list[pa.Table]:
        """The rows of each of ``chunks`` as the SELECT finds them: on an integer key through connectorx by one
        SELECT (``ArrowSelect.read_many``), otherwise one SELECT each."""
        try:
            if self._together:
                assert self._arrow is not None
                return self._arrow.read_many(chunks)
            return [self._arrow.read(c) if self._arrow is not None else self._select_rows(c) for c in chunks]
        except Exception:  # e.g. a column dropped since: say so rather than the driver's error
            self.session.check_columns([self.schema], {self.schema.id: f"while {_chunks(chunks)} were selected"})
            raise

    def fixed_up(self, chunk: Chunk, low: BinlogOffset, table: pa.Table, high: BinlogOffset,
                 window: list[ChangeRecord]) -> ChunkSnapshot:
        """The chunk as of ``high``: its rows selected after ``low`` and before ``high``, with this table's
        changes in (low, high] (``window``, in offset order) that fall in its key range replayed over them."""
        normalized = normalize_chunk(table, window, self.schema, self._in_chunk(chunk, window))
        return ChunkSnapshot(chunk, low, high, normalized.table, normalized.changed_keys)

    def read_at_snapshot(self, chunk: Chunk) -> ChunkSnapshot:
        """A keyless chunk: its rows exactly as of the binlog position of one consistent snapshot, selected
        inside it (LW = HW, no fix-up; see the module docstring). REPEATABLE READ is set for this
        transaction: under READ COMMITTED the SELECT would not read the snapshot's state."""
        import pymysql.cursors

        control = self.session.control
        with control.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            at = read_snapshot_offset(control, with_gtid=False)
            try:
                table = self._select_rows(chunk, control.cursor(pymysql.cursors.SSCursor))
            except Exception:
                control.rollback()
                self.session.check_columns([self.schema], {self.schema.id: f"while chunk {chunk.index} was selected"})
                raise
        finally:
            with control.cursor() as cur:
                cur.execute("COMMIT")
        return ChunkSnapshot(chunk, at, at, table, 0)

    def _select_rows(self, chunk: Chunk, cursor: Any = None) -> pa.Table:
        """The chunk's rows through pymysql: the session's reader connection's unbuffered cursor, or ``cursor``."""
        if cursor is None:
            cursor = self.session.reader().cursor()
        where, params = chunk_where(chunk, self._key_column)
        convert, names = self._convert.from_select, self.schema.column_names
        rows: list[dict[str, object]] = []
        with cursor as cur:
            cur.execute(self._select + where, params)
            while batch := cur.fetchmany(self.fetch_size):
                rows.extend(dict(zip(names, convert(r), strict=True)) for r in batch)
        return pa.Table.from_pylist(rows, schema=self._arrow_schema)

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


def _chunks(chunks: Sequence[Chunk]) -> str:
    return f"chunk {chunks[0].index}" if len(chunks) == 1 else f"chunks {chunks[0].index}-{chunks[-1].index}"


TableChunks = tuple[ChunkReader, Sequence[Chunk]]
"""A table's reader and the chunks of it to read."""


def chunk_groups(group_sizes: Sequence[int], counts: Sequence[int]) -> list[list[tuple[int, int, int]]]:
    """The groups ``read_tables`` selects between one pair of watermarks, as ``(table, first, stop)`` slices of
    the tables' chunks (``counts[i]`` chunks of table ``i``), in order. A chunk of table ``i`` weighs
    ``1 / group_sizes[i]`` (its reader's group: ``engine.jobs.read_group`` sizes it by bytes), and a
    group weighs at most 1: so a group of many tables' chunks holds no more bytes than one read group of
    one table, and one table alone is read ``group_sizes[i]`` chunks at a time."""
    groups: list[list[tuple[int, int, int]]] = []
    group: list[tuple[int, int, int]] = []
    room = Fraction(1)
    for table, (size, count) in enumerate(zip(group_sizes, counts, strict=True)):
        first = 0
        while first < count:
            if room < Fraction(1, size):
                groups.append(group)
                group, room = [], Fraction(1)
            take = min(count - first, int(room * size))
            group.append((table, first, first + take))
            room -= Fraction(take, size)
            first += take
    return [*groups, group] if group else groups


def read_tables(session: SourceSession, server_id: int,
                tables: Sequence[TableChunks]) -> Iterator[tuple[int, ChunkSnapshot]]:
    """The chunks of ``tables``, each as ``(its table's index in tables, snapshot)``, read through one
    ``session`` in the groups ``chunk_groups`` makes: a group's chunks are selected between one pair of
    watermarks, whatever their tables, and fixed up from one binlog pass (``server_id`` its reader id).
    Opening a binlog connection costs ~25 ms here, more than selecting a chunk; for a small table the
    watermarks and the pass are most of its cost.

    Why a group of many tables' chunks is exact: DBLog needs of a chunk only that it was selected after
    LW and before HW. Every chunk of the group is (each table's rows by its own SELECT, one after the other,
    all between the group's LW and HW), so each chunk's rows, with its table's changes in (LW, HW] in its
    key range replayed over them, are the chunk as of HW, as for a group of one table's chunks. Every chunk
    keeps the group's LW and HW in its snapshot (the stream filters by them). A keyless table's chunks are
    read as they always are, each at its own consistent snapshot (no fix-up). Memory holds one group.

    Schema changes stop the attempt (``SchemaChangeError``) before any chunk read after them is handed on:
    the tables' columns are compared once before the first group; a DDL in a group's window stops its binlog
    pass; an ALTER TABLE between two groups' watermarks is in no window, so the columns of a group's tables
    are compared again after its pass (one information_schema query a group)."""
    session.check_columns([reader.schema for reader, _ in tables],
                          {reader.schema.id: "before its first chunk" for reader, _ in tables})
    for group in chunk_groups([reader.group_size for reader, _ in tables], [len(chunks) for _, chunks in tables]):
        yield from _read_group(session, server_id, [(i, tables[i][0], tables[i][1][a:b]) for i, a, b in group])


def _read_group(session: SourceSession, server_id: int,
                group: list[tuple[int, ChunkReader, Sequence[Chunk]]]) -> Iterator[tuple[int, ChunkSnapshot]]:
    keyed = []
    for index, reader, chunks in group:
        if reader.schema.keyless:
            for chunk in chunks:
                yield index, reader.read_at_snapshot(chunk)
        else:
            keyed.append((index, reader, chunks))
    if not keyed:
        return
    low = session.low_watermark()
    selected = [(index, reader, chunks, reader.select(chunks)) for index, reader, chunks in keyed]
    high = session.high_watermark()
    schemas = [reader.schema for _, reader, _ in keyed]
    changes = session.changes_between(server_id, schemas, low, high) if low != high else []
    session.check_columns(schemas, {reader.schema.id: f"while its {_chunks(chunks)} were read"
                                    for _, reader, chunks in keyed})
    windows: dict[TableId, list[ChangeRecord]] = {}
    for change in changes:  # in offset order: each table's window is too
        windows.setdefault(change.table, []).append(change)
    for index, reader, chunks, tables in selected:
        window = windows.get(reader.schema.id, [])
        for chunk, table in zip(chunks, tables, strict=True):
            yield index, reader.fixed_up(chunk, low, table, high, window)
