"""Quoting of identifiers: every name we put into SQL goes through here."""

from __future__ import annotations


def quote_identifier(name: str) -> str:
    """Backtick-quote one identifier; embedded backticks are doubled, so any name is safe."""
    if not name:
        raise ValueError("an SQL identifier cannot be empty")
    if "\x00" in name:
        raise ValueError(f"an SQL identifier cannot contain NUL: {name!r}")
    return "`" + name.replace("`", "``") + "`"


def quote_table(database: str, table: str) -> str:
    return f"{quote_identifier(database)}.{quote_identifier(table)}"


def quote_string_literal(value: str) -> str:
    """Quote a string literal for statements that take no parameters (e.g. ``SHOW ... LIKE``).

    Assumes the server's default ``sql_mode`` (backslash is an escape); callers use parameters
    wherever the statement allows them.
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
