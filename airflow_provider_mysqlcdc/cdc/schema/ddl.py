"""What a DDL statement of the binlog does to tables, read with a real SQL parser.

The binlog carries DDL as the statement text of a query event, not as a schema. To keep a replica
through ``ALTER``, ``TRUNCATE``, ``RENAME TABLE``, ``DROP TABLE``, the stream must know exactly what
the statement did: which tables, which columns added, dropped, renamed or retyped, and whether
existing rows got values without a row event (an added column's DEFAULT, a generated column, a type
conversion). Regular expressions over the text get quoting, comments and multi-action ALTERs wrong;
sqlglot's MySQL dialect parses them into a syntax tree (measured on the statements of
``tests/unit/test_ddl.py``). Where sqlglot gives up (it falls back to an opaque ``Command``):

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
        return _alter(tree, database)
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


def _alter(tree: Any, database: str) -> list[TableChange]:
    from sqlglot import exp

    table = _table_id(tree.this, database)
    columns: list[ColumnChange] = []
    renamed_to: TableId | None = None
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            columns.append(ColumnChange(ColumnChangeKind.ADD, action.name, fills_rows=_fills_rows(action),
                                        **_place(action)))
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            columns.extend(ColumnChange(ColumnChangeKind.DROP, c.name) for c in action.args.get("tables") or [])
        elif isinstance(action, exp.RenameColumn):
            columns.append(ColumnChange(ColumnChangeKind.RENAME, action.this.name, action.args["to"].name))
        elif isinstance(action, exp.ModifyColumn):
            definition = action.this
            old = action.args.get("rename_from")
            name = old.name if old is not None else definition.name
            columns.append(ColumnChange(ColumnChangeKind.MODIFY, name,
                                        definition.name if definition.name != name else None, **_place(definition)))
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
