"""What the reader says when a table map does not describe the table's columns (``binlog.reader``):
what differs and what to set, never a guess at a schema change."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.binlog.events import BinlogColumn
from airflow_provider_mysqlcdc.cdc.binlog.reader import completed, describes, difference, explain_mismatch
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema

ID = Column("id", "int", "int", nullable=False)
DOC = Column("doc", "json", "json")
SCHEMA = TableSchema(TableId("db", "t"), (ID, DOC), ("id",))


def test_a_table_map_without_names_is_checked_by_position() -> None:
    """MINIMAL/NO_LOG maps: what they carry must agree with the schema; what the schema says is taken for the rest."""
    unnamed = [BinlogColumn(type=3, unsigned=None), BinlogColumn(type=245, length_size=4)]
    assert describes(unnamed, SCHEMA)
    id_, doc = completed(unnamed, SCHEMA)
    assert (id_.name, id_.unsigned, doc.name, doc.length_size) == ("id", False, "doc", 4)
    unsigned = [BinlogColumn(type=3, unsigned=True), BinlogColumn(type=245, length_size=4)]  # MINIMAL's SIGNEDNESS
    assert difference(unsigned, SCHEMA) == "its column 1 has unsigned values where the table's id is int"
    message = explain_mismatch(unsigned, SCHEMA)
    assert "the table map has (#1 LONG unsigned, #2 JSON), the table (id int, doc json)" in message
    assert "by position" in message and "binlog_row_metadata = 'FULL'" in message and "changed again" not in message


def test_what_a_map_carries_beyond_the_type_is_checked() -> None:
    latin = Column("name", "varchar", "varchar(20)", char_max_length=20, charset="latin1")
    utf8 = Column("name", "varchar", "varchar(20)", char_max_length=20, charset="utf8mb4")
    at = Column("at", "datetime", "datetime(3)", datetime_precision=3)
    kind = Column("kind", "enum", "enum('a','b')", members=("a", "b"), charset="utf8mb4")
    schema = TableSchema(TableId("db", "u"), (ID, latin, at, kind), ("id",))
    columns = [BinlogColumn(type=3), BinlogColumn(type=15, max_length=20, character_set_name="cp1252"),
               BinlogColumn(type=18, fsp=3), BinlogColumn(type=247, size=1)]
    assert describes(columns, schema)
    _, name, _, enum = completed(columns, schema)
    assert (name.name, name.character_set_name, enum.enum_values) == ("name", "cp1252", ["", "a", "b"])
    wider = [columns[0], BinlogColumn(type=15, max_length=80, character_set_name="utf8"), *columns[2:]]
    assert difference(wider, schema) == "its column 2 has values of up to 80 bytes where the table's name is " \
                                        "varchar(20) latin1"
    assert describes(wider, TableSchema(schema.id, (ID, utf8, at, kind), ("id",)))
    assert "3 fractional digits" not in (difference(columns, schema) or "")
    assert difference([*columns[:2], BinlogColumn(type=18, fsp=6), columns[3]], schema) == (
        "its column 3 has 6 fractional digits where the table's at is datetime(3)")
    assert difference([*columns[:3], BinlogColumn(type=247, size=2)], schema) == (
        "its column 4 has 2-byte values where the table's kind is enum('a','b') utf8mb4")


def test_a_type_the_reader_does_not_decode_is_named() -> None:
    old_datetime = [BinlogColumn(type=3, name="id"), BinlogColumn(type=12, name="doc")]
    message = explain_mismatch(old_datetime, SCHEMA)
    assert "DATETIME (before 5.6)" in message and "does not decode" in message and "db.t" in message


def test_a_column_count_or_type_that_differs_is_named() -> None:
    fewer = [BinlogColumn(type=3, name="id")]
    assert explain_mismatch(fewer, SCHEMA).startswith(
        "its rows have 1 columns where the table has 2: the table map has (id LONG), the table (id int, doc json)")
    retyped = [BinlogColumn(type=3, name="id"), BinlogColumn(type=15, name="doc", max_length=40)]
    message = explain_mismatch(retyped, SCHEMA)
    assert "its column doc is of binlog type VARCHAR where the table's is json" in message
