"""Statements that change rows, read from a query event: the tables a change logged as a statement writes.

A server writes a change as row images only where the session that made it logs rows
(``binlog_format=ROW``). A session that ran ``SET SESSION binlog_format='STATEMENT'`` (or ``MIXED``, for
a statement it deems safe), and ``LOAD DATA`` under either, log the statement text instead: an
``INSERT``, ``UPDATE``, ``DELETE``, ``REPLACE``, ``LOAD DATA`` or ``CREATE TABLE ... SELECT`` in a query
event (``EXECUTE_LOAD_QUERY`` for ``LOAD DATA``). The rows it changed are in no event, so a reader of
rows cannot replay it: the stream stops on such a statement of a captured table rather than pass over
it, and lets one of another table pass. This module tells which tables a statement writes.

The written tables are read from the statement's tokens (sqlglot's MySQL tokenizer handles quoting and
comments) for ``INSERT``/``REPLACE`` and ``LOAD DATA`` (whose target follows a fixed prefix, where
sqlglot's parser falls back or fails), and from sqlglot's syntax tree for ``UPDATE``, ``DELETE`` (their
multi-table forms write any table of their table list, tables of subqueries aside) and ``CREATE TABLE ...
SELECT``. Where neither can tell, every name in the statement counts as written: the stream then stops on a
captured table's name in it rather than guess.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.ddl import quiet_sqlglot, statement_tokens, table_name_at
from airflow_provider_mysqlcdc.cdc.schema.table import TableId

_ROW_WORDS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "CREATE"})
_INSERT_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"})


@dataclass(frozen=True)
class RowStatement:
    """A statement that changes rows: ``tables`` are those it writes, or (``exact`` False) every name it
    holds, when which of them it writes could not be told."""

    statement: str
    tables: frozenset[TableId]
    exact: bool = True

    def writes(self, captured: Collection[TableId],
               new_names: Callable[[TableId], bool] | None = None) -> list[TableId]:
        """The tables of ``captured`` (or names ``new_names`` accepts) that the statement may write."""
        if self.exact:
            return sorted(t for t in self.tables if t in captured or (new_names is not None and new_names(t)))
        names = {t.table for t in self.tables}
        return sorted(t for t in captured if t.table in names)


def parse_row_statement(statement: str, default_database: str) -> RowStatement | None:
    """The row change of ``statement`` run in ``default_database`` (the query event's schema), or None for a
    statement that changes no rows (``BEGIN``, ``COMMIT``, DDL without ``SELECT``, ``GRANT``...)."""
    head = statement.lstrip()[:8].upper()
    if not any(head.startswith(word) for word in _ROW_WORDS) and not head.startswith("/*"):
        return None  # the common case (BEGIN, COMMIT, DDL): no tokenizing
    tokens = statement_tokens(statement)  # none if rejected: judged by its words below
    words = [t.text.upper() for t in tokens]
    verb = words[0] if words else ""
    if verb in ("INSERT", "REPLACE"):
        index = 1
        while index < len(words) and words[index] in _INSERT_MODIFIERS:
            index += 1
        return _target(statement, tokens, index, default_database)
    if verb == "LOAD":
        into = next((i for i in range(len(words) - 1) if words[i] == "INTO" and words[i + 1] == "TABLE"), None)
        return _target(statement, tokens, into + 2, default_database) if into is not None else \
            _every_name(statement, tokens, default_database)
    if verb in ("UPDATE", "DELETE", "WITH") or (verb == "CREATE" and "SELECT" in words):
        return _from_tree(statement, tokens, default_database)
    return None


def _target(statement: str, tokens: list[Any], index: int, database: str) -> RowStatement:
    name = table_name_at(tokens, index, database)
    return RowStatement(statement, frozenset({name[0]})) if name else _every_name(statement, tokens, database)


def _from_tree(statement: str, tokens: list[Any], database: str) -> RowStatement | None:
    import sqlglot
    from sqlglot import exp

    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(statement, read="mysql")
    except sqlglot.errors.ParseError:
        return _every_name(statement, tokens, database)
    if isinstance(tree, exp.Create):
        written = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if (tree.args.get("kind") or "").upper() != "TABLE" or not isinstance(tree.args.get("expression"), exp.Query):
            return None  # a view's SELECT, a routine's body, a generated column's expression
        return RowStatement(statement, frozenset({TableId(written.db or database, written.name)})) \
            if isinstance(written, exp.Table) else _every_name(statement, tokens, database)
    if isinstance(tree, exp.Query):
        return None  # WITH ... SELECT: reads only
    if not isinstance(tree, exp.Update | exp.Delete):
        return _every_name(statement, tokens, database)
    tables = {TableId(t.db or database, t.name) for t in tree.find_all(exp.Table)
              if t.name and t.find_ancestor(exp.Query) is None}
    return RowStatement(statement, frozenset(tables)) if tables else _every_name(statement, tokens, database)


def _every_name(statement: str, tokens: list[Any], database: str) -> RowStatement:
    """Every word of the statement as a table name: which it writes could not be told."""
    names = {TableId(database, t.text) for t in tokens} if tokens else \
        {TableId(database, w.strip("`;,()")) for w in statement.split()}
    return RowStatement(statement, frozenset(names), exact=False)
