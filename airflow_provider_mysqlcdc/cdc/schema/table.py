"""The shape of a captured table as the server describes it.

Schemas travel in XCom, in Spark task arguments and in the stream checkpoint, so every class here
round-trips through plain JSON (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from airflow_provider_mysqlcdc.cdc.source.sql import quote_identifier, quote_table
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, TableNotSupportedError


@dataclass(frozen=True, order=True)
class TableId:
    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        return quote_table(self.database, self.table)

    @classmethod
    def parse(cls, name: str) -> TableId:
        """Parse ``db.table``; the first dot separates, so table names may contain dots."""
        database, sep, table = name.partition(".")
        if not sep or not database or not table:
            raise InvalidOptionError(f"table name {name!r} must be written as 'database.table', e.g. 'shop.orders'")
        return cls(database, table)


@dataclass(frozen=True)
class Column:
    """One column, with everything the type mapping and the key comparison need.

    ``data_type`` is information_schema's ``DATA_TYPE`` in lower case (``int``, ``varchar``,
    ``decimal``...); ``column_type`` is the full ``COLUMN_TYPE`` (``int(10) unsigned``).
    ``members`` holds ENUM/SET members in definition order (the binlog carries indexes/bitmasks).
    """

    name: str
    data_type: str
    column_type: str
    nullable: bool = True
    unsigned: bool = False
    precision: int | None = None
    scale: int | None = None
    datetime_precision: int | None = None
    char_max_length: int | None = None
    charset: str | None = None
    collation: str | None = None
    members: tuple[str, ...] = ()

    @property
    def quoted(self) -> str:
        return quote_identifier(self.name)

    def to_dict(self) -> dict[str, Any]:
        """Field by field (``dataclasses.asdict`` deep-copies: a fifth of a 1,000-table split's planning, measured)."""
        return {**{name: getattr(self, name) for name in _COLUMN_FIELDS}, "members": list(self.members)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        """Keys of fields since removed (``is_json``), found in plans written by older versions, are dropped (looked
        for only when there are such keys: a stream's start over a thousand tables reads each column twice)."""
        known = d if d.keys() <= _COLUMN_FIELD_SET else {k: v for k, v in d.items() if k in _COLUMN_FIELD_SET}
        return cls(**{**known, "members": tuple(d.get("members", ()))})


_COLUMN_FIELDS = tuple(f.name for f in fields(Column))
_COLUMN_FIELD_SET = frozenset(_COLUMN_FIELDS)


PRIMARY = "PRIMARY"
"""The name information_schema gives every primary key (``STATISTICS.INDEX_NAME``)."""


def row_identity(
    columns: Sequence[Column], unique_indexes: Mapping[str, Sequence[str | None]]
) -> tuple[str, tuple[str, ...]]:
    """The index whose columns identify a table's rows, as ``(index name, its columns)``, or ``("", ())``.

    ``unique_indexes`` maps each unique index's name to its columns in index order (``None`` for a
    key part that is an expression, MySQL 8's functional indexes). The primary key wins. Else a
    UNIQUE index qualifies when every part is a column and every column is NOT NULL (a UNIQUE index
    admits any number of NULLs); a column prefix (``UNIQUE (name(10))``) qualifies, as prefixes that
    are unique make whole values unique. Of those, the one with the fewest columns: the narrowest key
    is the cheapest to compare in the fix-up, the MERGE and reads. Ties go to the smallest name, so
    the choice does not depend on the order information_schema lists indexes in: the split, the Spark
    job, the stream and verification each read the schema anew and must pick the same index.
    """
    if PRIMARY in unique_indexes:
        return PRIMARY, tuple(str(c) for c in unique_indexes[PRIMARY])
    not_null = {c.name for c in columns if not c.nullable}
    usable = sorted(
        (len(parts), name, tuple(str(c) for c in parts))
        for name, parts in unique_indexes.items()
        if parts and all(c is not None and c in not_null for c in parts)
    )
    return (usable[0][1], usable[0][2]) if usable else ("", ())


WHOLE_ROW = ""
"""``key_index`` of a table whose rows nothing but their whole image identifies: no primary key, no UNIQUE
NOT NULL index, and a configured chunk key (docs/design/invariants.md, invariant 7). Its rows are a multiset
(``lake.multiset``)."""


def no_row_identity(table: TableId) -> TableNotSupportedError:
    """The refusal of a table whose rows nothing identifies and that has no column to split on.

    Such a table is captured as a multiset of whole row images (duplicates kept), but its chunks must be
    cut on some column, and there is no key column to default to: ``chunk_key_columns`` names one."""
    return TableNotSupportedError(
        f"table {table} has no primary key and no UNIQUE index whose columns are all NOT NULL, so it is "
        f"captured as a multiset of whole rows (duplicates kept), which must be split on a column you "
        f"choose: set chunk_key_columns={{'{table}': '<column>'}} (an indexed column with many distinct "
        f"values splits best; it needs not be unique), or add a primary key to {table}, or leave it out of "
        f"the capture (exclude_tables). Only MariaDB sources can snapshot such a table"
    )


@dataclass(frozen=True)
class TableSchema:
    """A captured table: columns in ordinal order, the key that identifies its rows, and the column
    chunks are split on.

    ``primary_key`` holds the columns that identify a row: the PRIMARY KEY's, or for a table without
    one those of a UNIQUE index whose columns are all NOT NULL, which says the same (at most one row
    per value, never NULL); ``key_index`` names the index (``PRIMARY`` for a primary key), so that a
    plan or checkpoint says which one it was. Discovery chooses the index (``cdc.discovery``). A table
    without either is *keyless* (``key_index`` ``WHOLE_ROW``, ``primary_key`` empty): its rows are
    identified by their whole image, duplicates kept as a multiset (``lake.multiset``). It has no chunk
    key by default: the split refuses it without a configured one (``no_row_identity``), while a schema
    read anew only to decode rows (the stream's reloads) needs none.

    ``chunk_key`` is the configured ``chunk_key_column`` or else the first key column. It only decides
    how the table is split: rows are matched by ``primary_key`` (fix-up, reads, verification; the MERGE
    adds the chunk key, see ``state_key``), so a chunk key outside the key, even one with duplicates,
    is sound.
    """

    id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    chunk_key: str = field(default="")
    key_index: str = PRIMARY

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if not self.primary_key:
            object.__setattr__(self, "key_index", WHOLE_ROW)
        elif not self.chunk_key:
            object.__setattr__(self, "chunk_key", self.primary_key[0])
        if self.chunk_key and self.chunk_key not in names:
            raise TableNotSupportedError(
                f"chunk key column {self.chunk_key!r} is not a column of {self.id}; "
                f"its columns are {names}"
            )
        for key in self.primary_key:
            if key not in names:
                raise TableNotSupportedError(f"key column {key!r} ({self.key_index}) is not a column of {self.id}")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.id} has no column {name!r}")

    @property
    def chunk_key_column(self) -> Column:
        """The column chunks are cut on. A keyless table read from the server without its configured chunk
        key (the stream's schema reloads, which only decode rows) has none, and cannot be split."""
        if not self.chunk_key:
            raise no_row_identity(self.id)
        return self.column(self.chunk_key)

    @property
    def keyless(self) -> bool:
        """Whether rows are identified by their whole image, duplicates counted (no key of any kind)."""
        return not self.primary_key

    @property
    def row_key(self) -> tuple[str, ...]:
        """Columns that identify a row for upserts: the primary key, or the UNIQUE NOT NULL index that
        stands in for it (never the chunk key alone, which may have duplicates). A keyless table has
        none: every upsert path must take its multiset path instead, so this refuses to answer."""
        if not self.primary_key:
            raise TableNotSupportedError(
                f"{self.id} has no key: its rows are a multiset of whole images, which this operation does not "
                f"handle (an internal error: it should have taken the multiset path)")
        return self.primary_key

    @property
    def state_key(self) -> tuple[str, ...]:
        """Columns a row of the current-state table is matched on by the MERGE: the row key, plus the chunk
        key when it is not part of it.

        Each chunk's snapshot is its rows as of its own high watermark. A row whose chunk key moves it
        from a chunk read earlier to one read later is in both snapshots, once with each chunk key, and
        the stream emits the retraction of the earlier image only (the later chunk's snapshot already
        holds the new one). Matched on the row key alone, that retraction and a later change of the row
        would be collapsed into one change applied to both rows; matched with the chunk key, the
        retraction removes exactly the image it names. Outside the snapshot the row key is unique, so
        the two keys are unique alike."""
        return self.row_key if self.chunk_key in self.row_key else (*self.row_key, self.chunk_key)

    @property
    def key_description(self) -> str:
        """Which index identifies the rows, for logs and errors: ``primary key (id)``, ``UNIQUE index
        u_code (code)``."""
        if self.keyless:
            return "whole row (no key; duplicates kept)"
        where = "primary key" if self.key_index == PRIMARY else f"UNIQUE index {self.key_index}"
        return f"{where} ({', '.join(self.primary_key)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.id.database,
            "table": self.id.table,
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "chunk_key": self.chunk_key,
            "key_index": self.key_index,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSchema:
        """Documents written before ``key_index`` existed hold a primary key (``PRIMARY``), or, for a
        table without one, only its chunk key: such a table was keyed by a column that need not be
        unique, so rows with equal chunk keys may have been merged into one in its lake; it is refused
        with what to do about the lake. A keyless table's document has ``key_index`` ``WHOLE_ROW``."""
        table = TableId(d["database"], d["table"])
        if not d["primary_key"] and "key_index" not in d:
            raise TableNotSupportedError(
                f"table {table} has no primary key, and a snapshot plan or stream checkpoint in the lake was "
                f"written for it by an earlier version, which keyed its rows by the chunk key "
                f"{d.get('chunk_key', '')!r} alone, so rows with equal values of it may have been merged into one: "
                f"delete the table's folder in the lake (its plan and Delta tables) and run the DAG again to "
                f"snapshot it anew (as a multiset of whole rows, or by the key you add)"
            )
        return cls(
            id=table,
            columns=tuple(Column.from_dict(c) for c in d["columns"]),
            primary_key=tuple(d["primary_key"]),
            chunk_key=d.get("chunk_key", ""),
            key_index=d.get("key_index", PRIMARY),
        )
