"""Quoting of identifiers: every name we put into SQL goes through here."""

from __future__ import annotations

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


def quote_identifier(name: str) -> str:
    """Backtick-quote one identifier; embedded backticks are doubled, so any name is safe."""
    if not name:
        raise InvalidOptionError(
            "a database, table or column name is empty: check the names given in tables and chunk_key_columns"
        )
    if "\x00" in name:
        raise InvalidOptionError(f"the name {name!r} contains a NUL character, which MySQL names cannot hold")
    return "`" + name.replace("`", "``") + "`"


def quote_table(database: str, table: str) -> str:
    return f"{quote_identifier(database)}.{quote_identifier(table)}"
