"""The stream's self-check: do the captured tables on the server still have the columns the stream
thinks they have (docs/design/invariants.md, invariant 6)?

The stream learns of schema changes from the binlog. A change that never reaches the binlog (an
``ALTER`` run with ``sql_log_bin=0``, a table replaced or dropped that way, a restore behind the
server's back) would otherwise go unnoticed until rows are decoded with the wrong columns, or never,
when only a nullability or a collation changed. So when the stream is idle, it compares what
information_schema says now with the schemas in its checkpoint (``engine.schema_self_check`` decides
when). What is compared is each table's column list as :func:`describe` writes it: name, ``COLUMN_TYPE``
(type, length, precision, signedness, ENUM/SET members), nullability and collation, in ordinal
order: what ``discovery.load_table_schema`` reads of the columns, and what decoding rows needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_columns
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo


def describe(columns: tuple[Column, ...]) -> tuple[str, ...]:
    """A table's columns as compared and shown: ``id int(11) NOT NULL``, ``note varchar(10) NULL
    COLLATE utf8mb4_general_ci``, ..."""
    return tuple(
        f"{c.name} {c.column_type} {'NULL' if c.nullable else 'NOT NULL'}"
        + (f" COLLATE {c.collation}" if c.collation else "")
        for c in columns
    )


@dataclass(frozen=True)
class SchemaDifference:
    """A captured table whose description in the stream's checkpoint (``known``) differs from the
    server's (``found``; None when information_schema has no such table)."""

    table: TableId
    known: tuple[str, ...]
    found: tuple[str, ...] | None

    def __str__(self) -> str:
        found = "no such table (dropped or renamed?)" if self.found is None else f"[{', '.join(self.found)}]"
        return f"{self.table}: the stream has [{', '.join(self.known)}], information_schema has {found}"


def schema_differences(
    known: Mapping[TableId, TableSchema], found: Mapping[TableId, tuple[Column, ...]]
) -> list[SchemaDifference]:
    """The tables of ``known`` whose columns' description differs from that of their columns in
    ``found``, or that ``found`` lacks; sorted by table."""
    differences = []
    for table in sorted(known):
        columns = found.get(table)
        mine = describe(known[table].columns)
        theirs = None if columns is None else describe(columns)
        if mine != theirs:
            differences.append(SchemaDifference(table, mine, theirs))
    return differences


def check_source_schemas(
    conn: Any, server: ServerInfo, offset: BinlogOffset, known: Mapping[TableId, TableSchema]
) -> list[SchemaDifference] | None:
    """The differences between ``known`` (the schemas of a stream that has read the binlog up to
    ``offset``) and the server's tables now, or None when the binlog has moved past ``offset``, so
    that the comparison could not be trusted (the caller tries again at its next idle moment).

    A difference only means divergence if the stream has read everything the binlog holds about the
    moment of the query: an ``ALTER`` committed just after the stream's last heartbeat is a legitimate
    change that the stream reads next, and until then information_schema is ahead of the checkpoint.
    So the binlog's end is read before the query (a moved binlog skips the query) and again after
    it: only if the end after the query is still not past ``offset`` was every change the query saw
    already in the binlog the stream has read. Reading the end only before the query would leave a
    window: a DDL between that read and the query would fail a healthy stream. (A DDL is written to
    the binlog as it completes, so the instant between its taking effect and its binlog write is left;
    the caller confirms a difference once more after a pause for that.)
    """
    if _binlog_moved(conn, server, offset):
        return None
    found = load_table_columns(conn, known)
    if _binlog_moved(conn, server, offset):
        return None
    return schema_differences(known, found)


def _binlog_moved(conn: Any, server: ServerInfo, offset: BinlogOffset) -> bool:
    """Whether the server's binlog ends past ``offset``. An idle stream's checkpoint is the end of the
    last transaction it read, so the same file and position mean nothing since, without the cost of
    a GTID lookup (MariaDB's ``BINLOG_GTID_POS`` reads the binlog file up to the position). Another
    position is either new transactions or only a new binlog file (``FLUSH LOGS``, a restart): where
    the offset has GTIDs, they tell the two apart; without GTIDs a rotation counts as moved until the
    stream's checkpoint passes the next transaction."""
    end = read_current_offset(conn, server, with_gtid=False)
    if (end.file, end.position) == (offset.file, offset.position):
        return False
    if offset.gtid is None:
        return True
    return offset < read_current_offset(conn, server)
