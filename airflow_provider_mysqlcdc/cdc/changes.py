"""A change captured from the binlog, in the changelog vocabulary of Flink CDC.

An UPDATE becomes two records, the before image (``-U``) and the after image (``+U``), so that a
consumer that only keeps the last record per key gets deletes and key changes right.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId


class ChangeKind(StrEnum):
    """The kind of a changelog row, Flink's ``RowKind``; the value is its short string, which the lake
    stores in ``_op``.

    A member is a ``str`` equal to its value (``ChangeKind.INSERT == "+I"``, ``str()`` and f-strings
    give the value), so Arrow and Parquet store the same bytes as for the plain string, and ``_op``
    values read back from the lake compare equal to the members.
    """

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"
    TRUNCATE = "!T"
    """Not a row: the table was emptied at this offset (``TRUNCATE TABLE``); every row before it is gone.
    The record's table columns are NULL and ``_ddl`` holds the statement."""
    SCHEMA_CHANGE = "!S"
    """Not a row: a DDL changed the table at this offset (columns added, dropped, renamed or retyped; the
    table dropped, renamed, or captured again). The record's table columns are NULL and ``_ddl`` holds
    the statement."""
    GAP = "!G"
    """Not a row: the binlog from the lake's last position to this offset was purged before the stream read
    it, and the table's rows were read again from the server (the stream's ``on_position_lost='resnapshot'``):
    the changes in that range are not in the changelog, the current table holds the rows read again. The
    record's table columns are NULL and ``_ddl`` names the range."""

    is_retraction: bool
    """Whether the record removes the row it carries (``-U``, ``-D``) rather than being the row as it
    is afterwards (``+I``, ``+U``): a key whose last record is a retraction is not in the table."""
    is_row: bool
    """Whether the record is a row image (not a ``!`` record of a table event)."""

    def __init__(self, value: str) -> None:
        # plain attributes of each member, as cheap to read in a loop as module constants
        self.is_retraction = value.startswith("-")
        self.is_row = not value.startswith("!")

    @classmethod
    def accumulations(cls) -> tuple[ChangeKind, ...]:
        """The kinds that are the row as it is afterwards (``+I``, ``+U``), in declaration order: a key
        whose last record has one of these is present, with that record's values."""
        return tuple(kind for kind in cls if kind.is_row and not kind.is_retraction)

    @classmethod
    def table_events(cls) -> tuple[ChangeKind, ...]:
        """The kinds of records that are no row (``!T``, ``!S``, ``!G``)."""
        return tuple(kind for kind in cls if not kind.is_row)


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One row image. ``offset`` is where to resume *after* this record, which is also its position
    in the changelog's total order; ``values`` are canonical (``types``) in the table's column order."""

    op: ChangeKind
    table: TableId
    values: tuple[Any, ...]
    offset: BinlogOffset
    ts_ms: int
