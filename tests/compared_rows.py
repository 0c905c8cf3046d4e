"""The two sides a test compares, as canonical rows: a source table's (through the provider's own SELECT
conversion) and its replica's current-state Delta table's (read with deltalake, the types Delta lacks cast
back)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter, select_expression
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import row_key_of
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.handle import table_uri
from tests.arrow_rows import canonical_rows


def table_rows(conn: Any, schema: TableSchema) -> list[tuple[Any, ...]]:
    """The source table's rows in ``id`` order."""
    convert = RowConverter(schema)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {schema.id.quoted} "
                    f"ORDER BY id")
        return [convert.from_select(r) for r in cur.fetchall()]


def current_rows(base_uri: str, schema: TableSchema) -> list[tuple[Any, ...]]:
    """The table's current-state Delta table read with deltalake, as the source's columns (no ``_batch``,
    no metadata columns) in canonical values."""
    columns = list(schema.column_names)
    rows = DeltaTable(table_uri(base_uri, schema.id)).to_pyarrow_table(columns=columns)
    # the types Delta lacks (unsigned, TIME, wide DECIMAL) are stored in wider forms: cast them back
    return canonical_rows(rows.cast(pa.schema([lake_schema(schema).field(c) for c in columns])))


def table_contents(conn: Any, schema: TableSchema) -> dict[Hashable, tuple[Any, ...]]:
    """The source table's rows by their row key (any key, any order)."""
    convert, key = RowConverter(schema), row_key_of(schema)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {schema.id.quoted}")
        return {key(r): r for r in map(convert.from_select, cur.fetchall())}


def assert_replica(connections: ConnectionConfig, base_uri: str, table: str) -> None:
    """The lake's current table of ``table`` (``db.table``), read with Delta alone, equals the source table now."""
    control = connections.connect()
    try:
        schema = load_table_schema(control, TableId.parse(table))
        assert sorted(current_rows(base_uri, schema)) == table_rows(control, schema)
    finally:
        control.close()
