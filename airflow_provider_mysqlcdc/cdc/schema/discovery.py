"""Finding the captured tables and reading their schemas from information_schema.

Selection works like Flink CDC's ``database-name`` / ``table-name`` options: regular expressions
that must match the whole database name and the whole ``db.table`` name, plus exclusions. System
schemas never match. Names are only ever passed as parameters or quoted, so any name works.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema, no_row_identity, row_identity
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, TableNotSupportedError

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

ONLINE_SCHEMA_CHANGE_TABLE = re.compile(r"_.+_(gho|ghc|del|new|old)", re.DOTALL)
"""The names the online schema change tools give the tables they work with. gh-ost: ``_<t>_gho`` (the ghost
table: ``t``'s copy with the change, renamed to ``t`` at the cut-over), ``_<t>_ghc`` (its changelog of
heartbeats and states) and ``_<t>_del`` (the cut-over's sentry, then the original ``t`` renamed away;
``_<t>_<timestamp>_del`` with ``--timestamp-old-table``). pt-online-schema-change: ``_<t>_new`` (the copy
its triggers keep up, renamed to ``t``) and ``_<t>_old`` (the original renamed away, then dropped). Both
shorten ``<t>`` to keep the name within 64 characters, and pt-osc adds leading underscores while a name is
taken. A pattern capture leaves them out (``TableSelection``): they hold copies of a captured table's rows
for a while, and the tools drop them, often before the stream reads the statement that made them."""


def _pattern(option: str, value: str) -> re.Pattern[str]:
    try:
        return re.compile(value)
    except re.error as exc:
        raise InvalidOptionError(f"{option} {value!r} is not a valid regular expression: {exc}") from exc


@dataclass(frozen=True)
class TableSelection:
    """Which tables are captured: those named in ``tables``, or those whose database fully matches
    ``include_databases`` and whose ``db.table`` fully matches ``include_tables`` (all of the databases'
    when None); never one fully matching an ``exclude_tables`` pattern, nor a system schema's. Patterns
    leave out the helper tables of gh-ost and pt-online-schema-change (``ONLINE_SCHEMA_CHANGE_TABLE``)
    unless ``include_online_schema_change_tables``; a table named in ``tables`` is captured whatever its
    name. One place decides it for the split's discovery and for a table the stream meets created or
    renamed while it runs.
    """

    tables: tuple[TableId, ...] = ()
    include_databases: str | None = None
    include_tables: str | None = None
    exclude_tables: tuple[str, ...] = ()
    include_online_schema_change_tables: bool = False
    _compiled: tuple[re.Pattern[str] | None, re.Pattern[str] | None, tuple[re.Pattern[str], ...]] = field(
        init=False, repr=False, compare=False)
    _named: frozenset[TableId] = field(init=False, repr=False, compare=False)
    """``tables`` as a set: a whole database's thousand names are asked about one by one."""

    def __post_init__(self) -> None:
        if not self.tables and not self.include_databases:
            raise InvalidOptionError("set tables=['db.table', ...] or include_databases (a regular expression)")
        databases = _pattern("include_databases", self.include_databases) if self.include_databases else None
        tables = _pattern("include_tables", self.include_tables) if self.include_tables is not None else None
        excluded = tuple(_pattern("exclude_tables", p) for p in self.exclude_tables)
        object.__setattr__(self, "_compiled", (databases, tables, excluded))
        object.__setattr__(self, "_named", frozenset(self.tables))

    @property
    def by_pattern(self) -> bool:
        """Whether tables are chosen by patterns (a table created later may match), not by name."""
        return not self.tables

    def matches(self, table: TableId) -> bool:
        databases, tables, excluded = self._compiled
        name = str(table)
        if any(p.fullmatch(name) for p in excluded) or table.database.lower() in SYSTEM_SCHEMAS:
            return False
        if self.tables:
            return table in self._named
        assert databases is not None  # __post_init__: tables or include_databases
        return (bool(databases.fullmatch(table.database)) and (tables is None or bool(tables.fullmatch(name)))
                and (self.include_online_schema_change_tables or not is_online_schema_change_table(table)))

    def to_dict(self) -> dict[str, Any]:
        return {"tables": [str(t) for t in self.tables], "include_databases": self.include_databases,
                "include_tables": self.include_tables, "exclude_tables": list(self.exclude_tables),
                "include_online_schema_change_tables": self.include_online_schema_change_tables}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TableSelection:
        return cls(tuple(TableId.parse(t) for t in d.get("tables", ())), d.get("include_databases"),
                   d.get("include_tables"), tuple(d.get("exclude_tables", ())),
                   bool(d.get("include_online_schema_change_tables", False)))

    def describe(self) -> str:
        if self.tables:
            return f"tables={[str(t) for t in self.tables]!r}, exclude_tables={list(self.exclude_tables)!r}"
        return (f"include_databases={self.include_databases!r}, include_tables={self.include_tables!r}, "
                f"exclude_tables={list(self.exclude_tables)!r}, "
                f"include_online_schema_change_tables={self.include_online_schema_change_tables!r}")


def is_online_schema_change_table(table: TableId) -> bool:
    """Whether ``table`` is named as gh-ost's or pt-online-schema-change's helper tables are
    (``ONLINE_SCHEMA_CHANGE_TABLE``)."""
    return bool(ONLINE_SCHEMA_CHANGE_TABLE.fullmatch(table.table))


def find_tables(conn: Any, selection: TableSelection) -> list[TableId]:
    """The base tables ``selection`` matches, sorted; an error when there is none."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'")
        found = sorted(t for db, name in cur.fetchall() if selection.matches(t := TableId(db, name)))
    missing = sorted(map(str, set(selection.tables) - set(found)))
    if missing:
        raise InvalidOptionError(f"tables names {missing}, which the server has no base table of (or the CDC user "
                                 f"cannot see): check the names, as database.table")
    if not found:
        raise InvalidOptionError(
            f"no table matches {selection.describe()} (patterns must match the whole name; does the CDC user "
            f"have SELECT on those databases?)"
        )
    return found


def discover_tables(
    conn: Any,
    selection: TableSelection,
    chunk_key_columns: Mapping[str, str] | None = None,
) -> list[TableSchema]:
    """The schemas of the tables ``selection`` matches (``find_tables``), sorted; one error naming every
    table that cannot be captured. A few queries whatever the number of tables (``load_table_schemas``)."""
    found = find_tables(conn, selection)
    overrides = dict(chunk_key_columns or {})
    unknown = sorted(set(overrides) - {str(t) for t in found})
    if unknown:
        raise InvalidOptionError(f"chunk_key_columns names tables that are not captured: {unknown}")
    loaded = load_table_schemas(conn, found, overrides)
    schemas, refused = [], []
    for table in found:  # one error naming every table that cannot be captured, not only the first
        schema = loaded.get(table)
        if schema is None:  # dropped since it was listed
            refused.append(str(_missing(table)))
        elif schema.keyless and not schema.chunk_key:  # nothing to split it on
            refused.append(str(no_row_identity(table)))
        else:
            schemas.append(schema)
    if refused:
        raise TableNotSupportedError("\n".join(refused))
    return schemas


# what a Column is read from (``_column``), in this order
_COLUMN_FIELDS = (
    "COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
    "DATETIME_PRECISION, CHARACTER_MAXIMUM_LENGTH, CHARACTER_SET_NAME, COLLATION_NAME"
)


def _missing(table: TableId) -> TableNotSupportedError:
    return TableNotSupportedError(f"table {table} does not exist or the CDC user cannot see it (GRANT SELECT)")


def load_table_schema(conn: Any, table: TableId, chunk_key_column: str | None = None) -> TableSchema:
    schema = load_table_schemas(conn, [table], {str(table): chunk_key_column} if chunk_key_column else None).get(table)
    if schema is None:
        raise _missing(table)
    return schema


def load_table_schemas(
    conn: Any, tables: Iterable[TableId], chunk_key_columns: Mapping[str, str] | None = None
) -> dict[TableId, TableSchema]:
    """The schema of each of ``tables`` (its columns, and the key its rows are identified by), in two queries
    whatever the number of tables; a table the server lacks (or the CDC user cannot see) is left out.
    ``chunk_key_columns`` (``{"db.table": "column"}``) are the configured chunk keys. The keys are read
    before the columns: a table dropped in between (an online schema change tool drops its tables right
    after its cut-over) is then left out as missing, never taken for a table without a key."""
    tables = list(tables)
    unique_indexes: dict[TableId, dict[str, list[tuple[int, str | None]]]] = {}
    for table, (index, position, column) in _per_table(
        conn, "INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME", "STATISTICS", "NON_UNIQUE = 0", tables
    ):
        unique_indexes.setdefault(table, {}).setdefault(index, []).append((int(position), column))
    columns = load_table_columns(conn, tables)
    schemas = {}
    for table, table_columns in columns.items():
        indexes = {name: [c for _, c in sorted(parts, key=lambda part: part[0])]
                   for name, parts in unique_indexes.get(table, {}).items()}
        key_index, key = row_identity(table_columns, indexes)  # without either, a keyless table (a multiset)
        schemas[table] = TableSchema(table, table_columns, key, (chunk_key_columns or {}).get(str(table)) or "",
                                     key_index)
    return schemas


def load_table_columns(conn: Any, tables: Iterable[TableId]) -> dict[TableId, tuple[Column, ...]]:
    """The columns of each of ``tables`` as ``load_table_schema`` reads them, in one query whatever the
    number of tables; a table the server lacks (or the CDC user cannot see) is left out."""
    found: dict[TableId, list[tuple[int, Column]]] = {}
    for table, (position, *fields) in _per_table(conn, f"ORDINAL_POSITION, {_COLUMN_FIELDS}", "COLUMNS", "", tables):
        found.setdefault(table, []).append((int(position), _column(fields)))
    return {table: tuple(c for _, c in sorted(columns, key=lambda item: item[0])) for table, columns in found.items()}


def approximate_rows(conn: Any, tables: Iterable[TableId]) -> dict[TableId, int]:
    """InnoDB's row estimates (``TABLE_ROWS``) of ``tables``, in one query: 0 where it has none (e.g. right
    after a bulk load) or the table is missing."""
    tables = list(tables)
    found = {table: int(rows or 0) for table, (rows,) in _per_table(conn, "TABLE_ROWS", "TABLES", "", tables)}
    return {t: found.get(t, 0) for t in tables}


ROW_BYTES_SAMPLE = 16
"""Rows of a table with wide columns whose lengths are measured (``average_row_bytes``): few, since the server
reads each of their values whole (a 6 MB LONGBLOB is 6 MB read), but enough to see the table's kind of rows."""
# the column types InnoDB may store off-page, whose bytes the statistics can lag far behind
_WIDE_TYPES = frozenset({"tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext",
                         "json", "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                         "multipolygon", "geometrycollection"})
_WIDE_VARCHAR = 255


def wide_columns(schema: TableSchema) -> list[Column]:
    """The columns of ``schema`` whose values may be large and stored off-page (BLOB, TEXT, JSON, spatial,
    VARCHAR/VARBINARY longer than 255)."""
    return [c for c in schema.columns if c.data_type in _WIDE_TYPES
            or (c.data_type in ("varchar", "varbinary") and (c.char_max_length or 0) > _WIDE_VARCHAR)]


def average_row_bytes(conn: Any, schemas: Sequence[TableSchema]) -> dict[TableId, int]:
    """About how many bytes a row of each of ``schemas``'s tables holds (0: unknown), in two queries whatever
    the number of tables: InnoDB's ``AVG_ROW_LENGTH`` (``DATA_LENGTH / TABLE_ROWS``), and for a table with
    wide columns (``wide_columns``) the larger of it and the mean length of those columns' values in its
    first ``ROW_BYTES_SAMPLE`` rows. Why the sample: the statistics are only refreshed after about a tenth
    of a table changed, asynchronously; measured on MariaDB 10.11 right after inserting 20 rows of 6 MB
    LONGBLOB, ``AVG_ROW_LENGTH`` said 656,179 bytes (a tenth of the truth) until ``ANALYZE TABLE``. It does
    count off-page BLOB pages once refreshed (6,370,918 then), so tables of narrow columns need no sample."""
    stats = {table: int(length or 0) for table, (length,) in
             _per_table(conn, "AVG_ROW_LENGTH", "TABLES", "", [s.id for s in schemas])}
    found = {s.id: stats.get(s.id, 0) for s in schemas}
    parts, params = [], []
    for schema in schemas:
        wide = wide_columns(schema)
        if wide:
            lengths = " + ".join(f"COALESCE(LENGTH({c.quoted}), 0)" for c in wide)
            parts.append(f"SELECT %s, %s, AVG(w) FROM (SELECT {lengths} AS w FROM {schema.id.quoted} "  # noqa: S608
                         f"LIMIT {ROW_BYTES_SAMPLE}) AS sample")  # (quoted names, a constant limit)
            params += [schema.id.database, schema.id.table]
    if parts:
        with conn.cursor() as cur:
            cur.execute(" UNION ALL ".join(parts), params)
            for database, name, sampled in cur.fetchall():
                table = TableId(database, name)
                found[table] = max(found[table], math.ceil(sampled or 0))
    return found


def _per_table(
    conn: Any, fields: str, view: str, condition: str, tables: Iterable[TableId]
) -> Iterator[tuple[TableId, Sequence[Any]]]:
    """The rows of ``information_schema.<view>`` (``fields``, where ``condition``) of ``tables``, in one
    query, each with its table. The query has one part per database that names it by
    ``TABLE_SCHEMA = %s``, which lets the server open only that database's tables (a condition on both
    names that it cannot use that way, such as a row-value ``IN``, would make it open every table on the
    server)."""
    requested = {(t.database, t.table): t for t in tables}
    # with lower_case_table_names the server matches names in any case and answers in its own
    folded = {(db.casefold(), name.casefold()): t for (db, name), t in requested.items()}
    wanted: dict[str, list[str]] = {}
    for table in sorted(requested.values()):
        wanted.setdefault(table.database, []).append(table.table)
    if not wanted:
        return
    parts, params = [], []
    for database, names in wanted.items():
        parts.append(f"SELECT TABLE_SCHEMA, TABLE_NAME, {fields} "  # noqa: S608 (constant; values bound)
                     f"FROM information_schema.{view} WHERE TABLE_SCHEMA = %s "
                     f"AND TABLE_NAME IN ({', '.join(['%s'] * len(names))}){f' AND {condition}' if condition else ''}")
        params += [database, *names]
    with conn.cursor() as cur:
        cur.execute(" UNION ALL ".join(parts), params)
        rows = cur.fetchall()
    for db, name, *values in rows:
        yield requested.get((db, name)) or folded.get((db.casefold(), name.casefold())) or TableId(db, name), values


def _column(row: Sequence[Any]) -> Column:
    name, data_type, column_type, nullable, precision, scale, dt_precision, max_length, charset, collation = row
    data_type = data_type.lower()
    return Column(
        name=name,
        data_type=data_type,
        column_type=column_type,
        nullable=nullable == "YES",
        unsigned="unsigned" in column_type.lower(),
        precision=None if precision is None else int(precision),
        scale=None if scale is None else int(scale),
        datetime_precision=None if dt_precision is None else int(dt_precision),
        char_max_length=None if max_length is None else int(max_length),
        charset=charset,
        collation=collation,
        members=parse_members(column_type) if data_type in ("enum", "set") else (),
    )


def parse_members(column_type: str) -> tuple[str, ...]:
    """Members of ``enum('a','it''s','x,y')``: quoted, with quotes doubled; commas may be inside."""
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    members: list[str] = []
    i = 0
    while i < len(body):
        if body[i] != "'":
            i += 1
            continue
        i += 1
        text: list[str] = []
        while i < len(body):
            if body[i] == "'" and i + 1 < len(body) and body[i + 1] == "'":
                text.append("'")
                i += 2
            elif body[i] == "'":
                i += 1
                break
            elif body[i] == "\\" and i + 1 < len(body):
                text.append(body[i + 1])
                i += 2
            else:
                text.append(body[i])
                i += 1
        members.append("".join(text))
    return tuple(members)
