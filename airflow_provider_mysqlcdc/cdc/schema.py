"""The shape of a captured table as the server describes it.

Schemas travel in XCom, in Spark task arguments and in the stream checkpoint, so every class here
round-trips through plain JSON (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from airflow_provider_mysqlcdc.cdc.sql import quote_identifier, quote_table
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
        d = asdict(self)
        d["members"] = list(self.members)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        """Keys of fields since removed (``is_json``), found in plans written by older versions, are dropped."""
        known = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known}, "members": tuple(d.get("members", ()))})


@dataclass(frozen=True)
class TableSchema:
    """A captured table: columns in ordinal order, primary key, and the column chunks split on.

    ``chunk_key`` is the configured ``chunk_key_column`` or else the first primary-key column; a
    table with neither cannot be split and is refused when the schema is built.
    """

    id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    chunk_key: str = field(default="")

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if not self.chunk_key:
            if not self.primary_key:
                raise TableNotSupportedError(
                    f"table {self.id} has no primary key, so it cannot be split into chunks: set "
                    f"chunk_key_column for it (e.g. chunk_key_columns={{'{self.id}': '<column>'}}) "
                    f"to a column that is unique and not null, or add a primary key"
                )
            object.__setattr__(self, "chunk_key", self.primary_key[0])
        if self.chunk_key not in names:
            raise TableNotSupportedError(
                f"chunk key column {self.chunk_key!r} is not a column of {self.id}; "
                f"its columns are {names}"
            )
        for key in self.primary_key:
            if key not in names:
                raise TableNotSupportedError(f"primary key column {key!r} is not a column of {self.id}")

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
        return self.column(self.chunk_key)

    @property
    def row_key(self) -> tuple[str, ...]:
        """Columns that identify a row for upserts: the primary key, else the chunk key."""
        return self.primary_key or (self.chunk_key,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.id.database,
            "table": self.id.table,
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "chunk_key": self.chunk_key,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSchema:
        return cls(
            id=TableId(d["database"], d["table"]),
            columns=tuple(Column.from_dict(c) for c in d["columns"]),
            primary_key=tuple(d["primary_key"]),
            chunk_key=d.get("chunk_key", ""),
        )
