"""What the reader says when a table map does not describe the table's columns (``binlog.reader``):
what differs and what to set, never a guess at a schema change."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.binlog.events import BinlogColumn
from airflow_provider_mysqlcdc.cdc.binlog.reader import describes, explain_mismatch
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema

ID = Column("id", "int", "int", nullable=False)
DOC = Column("doc", "json", "json")
SCHEMA = TableSchema(TableId("db", "t"), (ID, DOC), ("id",))


def test_a_table_map_without_names_asks_for_full_metadata() -> None:
    unnamed = [BinlogColumn(type=3), BinlogColumn(type=252, length_size=4)]
    assert not describes(unnamed, SCHEMA)
    message = explain_mismatch(unnamed, SCHEMA)
    assert "binlog_row_metadata" in message and "'FULL'" in message and "changed again" not in message


def test_a_type_the_reader_does_not_decode_is_named() -> None:
    old_datetime = [BinlogColumn(type=3, name="id"), BinlogColumn(type=12, name="doc")]
    message = explain_mismatch(old_datetime, SCHEMA)
    assert "DATETIME (before 5.6)" in message and "does not decode" in message and "db.t" in message


def test_a_column_count_or_type_that_differs_is_named() -> None:
    fewer = [BinlogColumn(type=3, name="id")]
    assert "1 columns (id)" in explain_mismatch(fewer, SCHEMA) and "2 (id, doc)" in explain_mismatch(fewer, SCHEMA)
    retyped = [BinlogColumn(type=3, name="id"), BinlogColumn(type=15, name="doc", max_length=40)]
    message = explain_mismatch(retyped, SCHEMA)
    assert "doc is of binlog type VARCHAR" in message and "doc json" in message
