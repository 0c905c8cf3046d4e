"""What a DDL statement of the binlog does to tables, read with a real SQL parser.

The binlog carries DDL as the statement text of a query event, not as a schema. To keep a replica
through ``ALTER``, ``TRUNCATE``, ``RENAME TABLE``, ``DROP TABLE``, the stream must know exactly what
the statement did: which tables, which columns added, dropped, renamed or retyped, and whether
existing rows got values without a row event (an added column's DEFAULT, a generated column, a type
conversion), and the type each column it adds or redefines gets (``ColumnType``: a stream whose table maps
carry no names compares it with the server's, which may be a later one). Regular expressions over the
text get quoting, comments and multi-action ALTERs wrong; sqlglot's MySQL dialect parses them into a
syntax tree (measured on the statements of ``tests/unit/test_ddl.py``). Where sqlglot gives up (it
falls back to an opaque ``Command``):

* ``RENAME TABLE a TO b, c TO d`` is read from sqlglot's tokens (its tokenizer handles quoting);
* ``ALTER ONLINE|IGNORE TABLE`` is parsed again without the MariaDB keyword;
* anything else that names a table is a ``TableChangeKind.UNKNOWN`` change of that table: the
  stream stops on it for a captured table rather than guess.

A statement that is not about tables (``BEGIN``, ``GRANT``, ``SET``, ``CREATE USER``...) parses to
None. Index, constraint and table-option changes are ``ALTER`` changes with no column changes: they
change no value a replica holds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId

_log = logging.getLogger(__name__)

# the first words of the statements that can change a table's rows or shape; others are not parsed
_DDL_WORDS = frozenset({"ALTER", "TRUNCATE", "RENAME", "DROP", "CREATE"})
_MARIADB_ALTER_WORDS = frozenset({"ONLINE", "IGNORE"})
ALL_TABLES = "*"
"""The table name of ``DROP DATABASE``'s change: every table of the database."""


class TableChangeKind(StrEnum):
    ALTER = "alter"
    """Columns, indexes or options changed (``columns`` says which columns)."""
    TRUNCATE = "truncate"
    DROP = "drop"
    RENAME = "rename"
    """Renamed to ``renamed_to`` (``RENAME TABLE``, ``ALTER TABLE ... RENAME TO``)."""
    CREATE = "create"
    UNKNOWN = "unknown"
    """A statement naming the table that the parser could not read."""


class ColumnChangeKind(StrEnum):
    ADD = "add"
    DROP = "drop"
    RENAME = "rename"
    """``RENAME COLUMN a TO b``: the name only."""
    MODIFY = "modify"
    """``MODIFY`` or ``CHANGE old new <definition>``: a new definition, maybe a new name."""
    DEFAULT = "default"
    """``ALTER COLUMN c SET/DROP DEFAULT``: rows written later only; existing values stay."""


@dataclass(frozen=True)
class ColumnType:
    """A column's type as a DDL defines it, in information_schema's terms: ``name`` is the ``DATA_TYPE``
    (aliases resolved: ``INTEGER`` is ``int``, ``BOOL`` ``tinyint``, ``REAL`` ``double``, ``SERIAL`` ``bigint
    unsigned``), ``size`` the numbers of ``COLUMN_TYPE`` with MySQL's defaults filled in (``CHAR`` is ``char(1)``,
    ``DECIMAL`` ``decimal(10,0)``). What changes no stored value is left out: display widths (``int(11)``,
    ``tinyint(1)``, ``year(4)``: MariaDB shows them, MySQL 8 mostly not), ZEROFILL (beyond the UNSIGNED it
    implies), defaults and NULL. ``charset`` and ``collation`` are set only when the statement names them: else
    the column takes the table's default, which the statement does not say.

    A stream reading table maps without column names reads a DDL's columns with the server's definitions of
    today; ``matches`` says whether those are still the ones the DDL gave."""

    name: str
    size: tuple[int, ...] = ()
    unsigned: bool = False
    members: tuple[str, ...] = ()
    """ENUM and SET members, in order."""
    charset: str | None = None
    collation: str | None = None

    def __str__(self) -> str:
        """As ``COLUMN_TYPE`` shows it, without display widths: ``tinyint unsigned``, ``decimal(10,2)``,
        ``enum('a','b')``, ``varchar(20) character set latin1``."""
        inside = [str(n) for n in self.size] + ["'" + m.replace("'", "''") + "'" for m in self.members]
        return "".join([self.name, f"({','.join(inside)})" if inside else "", " unsigned" if self.unsigned else "",
                        f" character set {self.charset}" if self.charset else "",
                        f" collate {self.collation}" if self.collation else ""])

    @classmethod
    def of(cls, column: Column) -> ColumnType:
        """``column`` (information_schema's) in these terms, with its character set and collation."""
        name, sizes = column.data_type, re.match(r"\w+\s*\(([\d,\s]+)\)", column.column_type)
        size = () if name in _WIDTH_ONLY or sizes is None else tuple(int(n) for n in sizes.group(1).split(","))
        return cls(name, size, column.unsigned, column.members, _charset_name(column.charset),
                   _charset_name(column.collation))

    def matches(self, column: Column) -> bool:
        """Whether ``column`` has this type (its character set and collation: where this names them). MariaDB's
        JSON is a LONGTEXT; a collation may be named without its character set (MariaDB's ``uca1400_ai_ci``)."""
        server = ColumnType.of(column)
        short = server.collation.removeprefix(f"{server.charset}_") if server.collation else None
        return (self.name == server.name or (self.name, server.name) == ("json", "longtext")) \
            and (self.size, self.unsigned, self.members) == (server.size, server.unsigned, server.members) \
            and self.charset in (None, server.charset) and self.collation in (None, server.collation, short)


@dataclass(frozen=True)
class ColumnChange:
    kind: ColumnChangeKind
    name: str
    """The column as named before the statement (ADD: the added column)."""
    new_name: str | None = None
    """RENAME and CHANGE: the name after the statement."""
    fills_rows: bool = False
    """ADD: existing rows get a value other than NULL with no row event (a non-NULL DEFAULT, a NOT NULL
    column's implicit default, a generated column)."""
    first: bool = False
    """ADD, MODIFY, CHANGE: ``FIRST``, the column goes first."""
    after: str | None = None
    """ADD, MODIFY, CHANGE: ``AFTER`` this column. Neither this nor ``first``: ADD puts the column last, MODIFY and
    CHANGE leave it in its place (MySQL's rules): a row image's columns are in this order."""
    definition: ColumnType | None = None
    """ADD, MODIFY, CHANGE: the column's type as the statement defines it; None if its form cannot be read."""

    @property
    def name_after(self) -> str:
        return self.new_name or self.name


@dataclass(frozen=True)
class TableChange:
    table: TableId
    kind: TableChangeKind
    columns: tuple[ColumnChange, ...] = ()
    renamed_to: TableId | None = None

    @property
    def changes_columns(self) -> bool:
        """Whether the table's columns or rows change (not only its indexes or options)."""
        return self.kind is not TableChangeKind.ALTER or any(
            c.kind is not ColumnChangeKind.DEFAULT for c in self.columns)


@dataclass(frozen=True)
class DdlStatement:
    statement: str
    changes: tuple[TableChange, ...]

    def of(self, tables: set[TableId] | frozenset[TableId],
           new_names: Callable[[TableId], bool] | None = None) -> tuple[TableChange, ...]:
        """The changes of the statement that name one of ``tables``, as the table or as its new name, or
        that create a table or rename one to a name ``new_names`` accepts; a dropped database is a drop
        of each of its tables."""
        found: list[TableChange] = []
        for change in self.changes:
            if change.table.table == ALL_TABLES:
                found.extend(replace(change, table=t) for t in sorted(tables) if t.database == change.table.database)
            elif change.table in tables or change.renamed_to in tables or new_names is not None and (
                    change.kind is TableChangeKind.CREATE and new_names(change.table)
                    or change.renamed_to is not None and new_names(change.renamed_to)):
                found.append(change)
        return tuple(found)


def parse_ddl(statement: str, default_database: str) -> DdlStatement | None:
    """The table changes of ``statement`` run in ``default_database`` (the query event's schema), or None
    for a statement that changes no table."""
    words = statement.lstrip().split(None, 2)
    if not words or words[0].upper() not in _DDL_WORDS:
        return None
    changes = _changes(statement, default_database)
    return DdlStatement(statement, tuple(changes)) if changes else None


def _changes(statement: str, database: str) -> list[TableChange]:
    import sqlglot
    from sqlglot import exp

    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(statement, read="mysql")
    except sqlglot.errors.ParseError:
        tree = None
    if isinstance(tree, exp.Alter):
        return _alter(tree, statement, database)
    if isinstance(tree, exp.TruncateTable):
        return [TableChange(_table_id(t, database), TableChangeKind.TRUNCATE) for t in tree.expressions]
    if isinstance(tree, exp.Drop):
        kind, dropped = (tree.args.get("kind") or "").upper(), tree.args.get("tables") or []
        if kind == "TABLE":
            return [TableChange(_table_id(t, database), TableChangeKind.DROP) for t in dropped]
        if kind in ("DATABASE", "SCHEMA"):  # every table of it: the caller knows which it captures
            return [TableChange(TableId(t.name, ALL_TABLES), TableChangeKind.DROP) for t in dropped]
        return []
    if isinstance(tree, exp.Create):
        if (tree.args.get("kind") or "").upper() != "TABLE":
            return []
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        return [TableChange(_table_id(target, database), TableChangeKind.CREATE)] if isinstance(target, exp.Table) \
            else []
    return _from_tokens(statement, database)


class quiet_sqlglot:
    """sqlglot warns at WARNING for every statement it falls back on; that is our case to handle."""

    def __enter__(self) -> None:
        self._logger = logging.getLogger("sqlglot")
        self._level = self._logger.level
        self._logger.setLevel(logging.ERROR)

    def __exit__(self, *_: Any) -> None:
        self._logger.setLevel(self._level)


def _table_id(table: Any, database: str) -> TableId:
    return TableId(table.db or database, table.name)


def _alter(tree: Any, statement: str, database: str) -> list[TableChange]:
    from sqlglot import exp

    table = _table_id(tree.this, database)
    columns: list[ColumnChange] = []
    renamed_to: TableId | None = None
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            columns.append(ColumnChange(ColumnChangeKind.ADD, action.name, fills_rows=_fills_rows(action),
                                        definition=_column_type(action, statement), **_place(action)))
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            columns.extend(ColumnChange(ColumnChangeKind.DROP, c.name) for c in action.args.get("tables") or [])
        elif isinstance(action, exp.RenameColumn):
            columns.append(ColumnChange(ColumnChangeKind.RENAME, action.this.name, action.args["to"].name))
        elif isinstance(action, exp.ModifyColumn):
            definition = action.this
            old = action.args.get("rename_from")
            name = old.name if old is not None else definition.name
            columns.append(ColumnChange(ColumnChangeKind.MODIFY, name,
                                        definition.name if definition.name != name else None,
                                        definition=_column_type(definition, statement), **_place(definition)))
        elif isinstance(action, exp.AlterColumn):
            if action.args.get("dtype") is not None:  # ALTER COLUMN c TYPE t is not MySQL, but mean MODIFY
                columns.append(ColumnChange(ColumnChangeKind.MODIFY, action.name))
            else:
                columns.append(ColumnChange(ColumnChangeKind.DEFAULT, action.name))
        elif isinstance(action, exp.AlterRename):
            renamed_to = _table_id(action.this, database)
        elif isinstance(action, exp.DropPrimaryKey) or (
                isinstance(action, exp.AddConstraint) and action.find(exp.PrimaryKey, exp.PrimaryKeyColumnConstraint)):
            # the row identity of the replica changes: not a change to follow by columns
            return [TableChange(table, TableChangeKind.UNKNOWN)]
    if renamed_to is not None and columns:
        # ALTER TABLE t ADD c, RENAME TO u: one statement, two kinds; too rare to split exactly
        return [TableChange(table, TableChangeKind.UNKNOWN)]
    if renamed_to is not None:
        return [TableChange(table, TableChangeKind.RENAME, renamed_to=renamed_to)]
    return [TableChange(table, TableChangeKind.ALTER, tuple(columns))]


def _place(definition: Any) -> dict[str, Any]:
    """Where a column definition's ``FIRST`` or ``AFTER c`` puts it (``ColumnChange.first``, ``after``)."""
    position = definition.args.get("position")
    if position is None:
        return {}
    if str(position.args.get("position") or "").upper() == "FIRST":
        return {"first": True}
    return {"after": position.this.name}


_INTEGER_TYPES = ("tinyint", "smallint", "mediumint", "int", "bigint")
_WIDTH_ONLY = frozenset({*_INTEGER_TYPES, "year"})
"""Types whose ``(n)`` is a display width, not a size."""
_TYPE_NAMES = {
    **{name: name for name in (*_INTEGER_TYPES, "decimal", "float", "double", "bit", "date", "time", "datetime",
                               "timestamp", "year", "char", "varchar", "binary", "varbinary", "tinytext", "text",
                               "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob", "enum", "set",
                               "json", "geometry", "uuid")},
    "int1": "tinyint", "bool": "tinyint", "boolean": "tinyint", "int2": "smallint", "integer": "int", "int4": "int",
    "int8": "bigint", "serial": "bigint", "dec": "decimal", "numeric": "decimal", "fixed": "decimal",
    "float4": "float", "float8": "double", "real": "double", "character": "char", "nchar": "char",
    "nvarchar": "varchar",
}
"""MySQL's ``DATA_TYPE`` of each type name a definition may start with. Read from the statement's words, not from
sqlglot's type: its MySQL reading takes ``REAL`` for FLOAT and ``INT8`` for TINYINT, where MySQL has DOUBLE and
BIGINT. A name not here (``LONG``, spatial subtypes, MariaDB's INET6...) is a definition that cannot be read."""
_UNSIGNED_TYPES = frozenset({"UTINYINT", "USMALLINT", "UMEDIUMINT", "UINT", "UBIGINT", "UDECIMAL", "UDOUBLE"})
"""sqlglot's types of a definition with UNSIGNED."""
_DEFAULT_SIZES = {"bit": (1,), "char": (1,), "binary": (1,)}
_SIZED_BY_LENGTH = frozenset({"tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob",
                              "longblob"})
"""``TEXT(n)``, ``BLOB(n)``: MySQL chooses the smallest of the kind that holds n (characters by the character set)."""


def _column_type(definition: Any, statement: str) -> ColumnType | None:
    """The type column ``definition`` (a ColumnDef of ``statement``) defines, or None if its form cannot be read."""
    from sqlglot import exp

    kind, end = definition.args.get("kind"), definition.this.meta.get("end")
    written = re.match(r"(?:\s|/\*.*?\*/)*(\w+)", statement[end + 1:], re.DOTALL) if end is not None else None
    word = written.group(1).lower() if written is not None else ""
    name = _TYPE_NAMES.get(word)
    if kind is None or name is None:
        return None
    if name == "char" and kind.this in (exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR):
        name = "varchar"  # CHARACTER VARYING, CHAR VARYING
    constraints = [c.kind for c in definition.args.get("constraints") or []]
    charset = next((c.this.name for c in constraints if isinstance(c, exp.CharacterSetColumnConstraint)),
                   "utf8mb3" if kind.this in (exp.DataType.Type.NCHAR, exp.DataType.Type.NVARCHAR) else None)
    collation = next((c.this.name for c in constraints if isinstance(c, exp.CollateColumnConstraint)), None)
    unsigned = kind.this.name in _UNSIGNED_TYPES or word == "serial" or any(
        isinstance(c, exp.ZeroFillColumnConstraint) for c in constraints)
    if name in ("enum", "set"):
        if not all(isinstance(p, exp.Literal) and p.is_string for p in kind.expressions):
            return None
        members = tuple(p.this.rstrip(" ") for p in kind.expressions)  # MySQL drops members' trailing spaces
        return ColumnType(name, (), False, members, _charset_name(charset), _charset_name(collation))
    if not all(isinstance(p, exp.DataTypeParam) and p.name.isdigit() for p in kind.expressions):
        return None
    size = tuple(int(p.name) for p in kind.expressions)
    if name in _SIZED_BY_LENGTH and size:
        return None
    if name in _WIDTH_ONLY:
        size = ()
    elif name == "decimal":
        size = (size[0] if size else 10, size[1] if len(size) > 1 else 0)
    elif name == "float" and len(size) == 1:  # FLOAT(p): a FLOAT up to 24 bits of precision, else a DOUBLE
        name, size = "float" if size[0] <= 24 else "double", ()
    elif name in ("time", "datetime", "timestamp") and size == (0,):
        size = ()
    return ColumnType(name, size or _DEFAULT_SIZES.get(name, ()), unsigned, (), _charset_name(charset),
                      _charset_name(collation))


def _charset_name(name: str | None) -> str | None:
    """A character set's or collation's name in lower case, ``utf8`` as ``utf8mb3`` (what ``utf8`` means on both
    servers, and how information_schema names it since MySQL 8.0.30 and MariaDB 10.6)."""
    if name is None:
        return None
    name = name.lower()
    return "utf8mb3" + name[len("utf8"):] if name == "utf8" or name.startswith("utf8_") else name


def _fills_rows(definition: Any) -> bool:
    """Whether ADD COLUMN ``definition`` gives existing rows a value other than NULL."""
    from sqlglot import exp

    not_null = False
    for constraint in definition.args.get("constraints") or []:
        kind = constraint.kind
        if isinstance(kind, exp.DefaultColumnConstraint):
            return not isinstance(kind.this, exp.Null)
        if isinstance(kind, exp.ComputedColumnConstraint | exp.GeneratedAsIdentityColumnConstraint
                      | exp.AutoIncrementColumnConstraint):
            return True
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            not_null = True
    # NOT NULL without DEFAULT: the type's implicit default (0, '', the zero date); a TIMESTAMP column
    # without NULL may get CURRENT_TIMESTAMP by explicit_defaults_for_timestamp=OFF
    kind = definition.args.get("kind")
    timestamp = kind is not None and kind.this in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ)
    return not_null or (timestamp and not _allows_null(definition))


def _allows_null(definition: Any) -> bool:
    from sqlglot import exp

    return any(isinstance(c.kind, exp.NotNullColumnConstraint) and c.kind.args.get("allow_null")
               for c in definition.args.get("constraints") or [])


def _from_tokens(statement: str, database: str) -> list[TableChange]:
    """The statements sqlglot leaves as a ``Command``, from its tokens."""
    from sqlglot.tokenizer_core import TokenType

    tokens = statement_tokens(statement)
    if not tokens:  # a statement the tokenizer rejects names no table we can tell
        return []
    words = [t.text.upper() if t.token_type is not TokenType.IDENTIFIER else "" for t in tokens]
    if len(words) > 2 and words[0] == "ALTER" and words[1] in _MARIADB_ALTER_WORDS:
        rest = statement.lstrip()[len(tokens[0].text):].lstrip()[len(tokens[1].text):]
        return _changes("ALTER " + rest, database)
    if len(words) > 2 and words[0] == "RENAME" and words[1] == "TABLE":
        renamed = _renames(tokens[2:], database)
        if renamed is not None:
            return renamed
    for index, word in enumerate(words[:-1]):
        if word == "TABLE":  # ALTER TABLE t CONVERT TO ..., ADD (a, b), ...: a change we cannot read
            name = table_name_at(tokens, index + 1, database)
            return [TableChange(name[0], TableChangeKind.UNKNOWN)] if name else []
    return []


def statement_tokens(statement: str) -> list[Any]:
    """sqlglot's MySQL tokens of ``statement`` (quoting and comments handled), or none if it rejects it."""
    from sqlglot.dialects.mysql import MySQL
    from sqlglot.tokenizer_core import TokenType

    try:
        tokens = MySQL().tokenize(statement)
        if len(tokens) == 2 and tokens[1].token_type is TokenType.STRING:
            # a command word (RENAME, REPLACE) swallows the rest as one string token: tokenize that too
            tokens = [tokens[0], *MySQL().tokenize(tokens[1].text)]
    except Exception:  # noqa: BLE001 - the tokenizer's errors are of no one class
        return []
    return list(tokens)


def _renames(tokens: list[Any], database: str) -> list[TableChange] | None:
    """``a TO b, c TO d`` (the rest of ``RENAME TABLE``), or None if the tokens are not that."""
    from sqlglot.tokenizer_core import TokenType

    changes, index = [], 0
    while index < len(tokens):
        old = table_name_at(tokens, index, database)
        if old is None or old[1] >= len(tokens) or tokens[old[1]].text.upper() != "TO":
            return None
        new = table_name_at(tokens, old[1] + 1, database)
        if new is None:
            return None
        changes.append(TableChange(old[0], TableChangeKind.RENAME, renamed_to=new[0]))
        index = new[1]
        if index < len(tokens):
            if tokens[index].token_type is not TokenType.COMMA:
                return None
            index += 1
    return changes


def table_name_at(tokens: list[Any], index: int, database: str) -> tuple[TableId, int] | None:
    """The table name ``[db.]table`` starting at token ``index``, and the index after it."""
    from sqlglot.tokenizer_core import TokenType

    def is_name(i: int) -> bool:
        return i < len(tokens) and tokens[i].token_type in (TokenType.IDENTIFIER, TokenType.VAR) or (
            i < len(tokens) and tokens[i].token_type not in (TokenType.COMMA, TokenType.DOT, TokenType.L_PAREN,
                                                             TokenType.R_PAREN, TokenType.SEMICOLON)
            and tokens[i].text.upper() != "TO")

    if not is_name(index):
        return None
    if index + 2 < len(tokens) and tokens[index + 1].token_type is TokenType.DOT and is_name(index + 2):
        return TableId(tokens[index].text, tokens[index + 2].text), index + 3
    return TableId(database, tokens[index].text), index + 1


# integer types by storage width: a wider one (same signedness, or unsigned into a wider signed) holds
# every value of a narrower one
_INTEGER_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8}
_TEXT_TYPES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_TEXT_BYTES = {"tinytext": 255, "text": 65_535, "mediumtext": 16_777_215, "longtext": 4_294_967_295}


def keeps_values(old: Column, new: Column) -> bool:
    """Whether a column redefined from ``old`` to ``new`` (MODIFY, CHANGE) holds every row's value
    unchanged, so the replica's values stay right without reading the rows again: the same type, or a
    wider one of the same kind (INT to BIGINT, VARCHAR(20) to VARCHAR(200) in the same character set,
    DECIMAL(10,2) to DECIMAL(12,4), DATETIME to DATETIME(3)). Anything else may convert values (a
    narrower type, VARCHAR to INT, a lower DECIMAL scale, another character set), and is answered
    False: the rows are read again."""
    if (old.column_type, old.charset, old.collation) == (new.column_type, new.charset, new.collation):
        return True
    if old.data_type in _INTEGER_BYTES and new.data_type in _INTEGER_BYTES:
        old_bytes, new_bytes = _INTEGER_BYTES[old.data_type], _INTEGER_BYTES[new.data_type]
        if old.unsigned == new.unsigned:
            return new_bytes >= old_bytes
        return old.unsigned and not new.unsigned and new_bytes > old_bytes
    if old.data_type in _TEXT_TYPES and new.data_type in _TEXT_TYPES:
        same_set = (old.charset, old.collation) == (new.charset, new.collation)
        old_length = old.char_max_length or _TEXT_BYTES.get(old.data_type, 0)
        new_length = new.char_max_length or _TEXT_BYTES.get(new.data_type, 0)
        # CHAR pads and VARCHAR keeps trailing spaces: only a change within one of the two kinds
        padded = (old.data_type == "char") == (new.data_type == "char")
        return same_set and padded and new_length >= old_length
    if old.data_type == new.data_type == "decimal" and old.unsigned == new.unsigned:
        old_scale, new_scale = old.scale or 0, new.scale or 0
        return new_scale >= old_scale and (new.precision or 0) - new_scale >= (old.precision or 0) - old_scale
    if old.data_type == new.data_type and old.data_type in ("datetime", "time", "timestamp"):
        return (new.datetime_precision or 0) >= (old.datetime_precision or 0)
    if old.data_type == new.data_type and old.data_type in ("enum", "set"):
        return new.members[:len(old.members)] == old.members  # members appended at the end keep indexes
    return False
