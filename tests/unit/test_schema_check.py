"""The idle stream's self-check compares each captured table's columns, as the checkpoint holds them,
with information_schema's: every property of a column that decoding depends on counts, and a table
the server lacks is a difference too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_mysqlcdc.cdc.schema.schema_check import SchemaDifference, describe, schema_differences
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "items")
ID = Column("id", "int", "int(11)", nullable=False)
NOTE = Column("note", "varchar", "varchar(10)", char_max_length=10, charset="utf8mb4",
              collation="utf8mb4_general_ci")
AMOUNT = Column("amount", "decimal", "decimal(12,2)", precision=12, scale=2)


def schema(table: TableId, *columns: Column) -> TableSchema:
    return TableSchema(table, columns, ("id",))


def test_the_same_columns_are_no_difference() -> None:
    known = {ORDERS: schema(ORDERS, ID, NOTE, AMOUNT), ITEMS: schema(ITEMS, ID)}
    assert schema_differences(known, {ORDERS: (ID, NOTE, AMOUNT), ITEMS: (ID,)}) == []


def test_only_the_captured_tables_are_compared() -> None:
    """information_schema may answer for more tables (another table of the database); they are not ours."""
    assert schema_differences({ITEMS: schema(ITEMS, ID)}, {ITEMS: (ID,), ORDERS: (ID, NOTE)}) == []


@pytest.mark.parametrize("found", [
    pytest.param((ID, NOTE, AMOUNT, Column("extra", "int", "int(11)")), id="column added"),
    pytest.param((ID, AMOUNT), id="column dropped"),
    pytest.param((ID, replace(NOTE, name="remark"), AMOUNT), id="column renamed"),
    pytest.param((ID, AMOUNT, NOTE), id="columns reordered"),
    pytest.param((ID, NOTE, replace(AMOUNT, column_type="decimal(14,4)", precision=14, scale=4)), id="type changed"),
    pytest.param((replace(ID, column_type="int(10) unsigned", unsigned=True), NOTE, AMOUNT), id="made unsigned"),
    pytest.param((ID, replace(NOTE, nullable=False), AMOUNT), id="made NOT NULL"),
    pytest.param((ID, replace(NOTE, charset="latin1", collation="latin1_swedish_ci"), AMOUNT), id="other charset"),
])
def test_each_kind_of_column_change_is_a_difference(found: tuple[Column, ...]) -> None:
    known = {ORDERS: schema(ORDERS, ID, NOTE, AMOUNT), ITEMS: schema(ITEMS, ID)}
    assert schema_differences(known, {ORDERS: found, ITEMS: (ID,)}) == [
        SchemaDifference(ORDERS, describe((ID, NOTE, AMOUNT)), describe(found))
    ]


def test_a_table_the_server_lacks_is_a_difference_that_says_so() -> None:
    known = {ORDERS: schema(ORDERS, ID, NOTE), ITEMS: schema(ITEMS, ID)}
    differences = schema_differences(known, {ITEMS: (ID,)})
    assert differences == [SchemaDifference(ORDERS, describe((ID, NOTE)), None)]
    assert "no such table" in str(differences[0])


def test_differences_name_the_table_and_both_column_lists() -> None:
    known = {ORDERS: schema(ORDERS, ID, NOTE), ITEMS: schema(ITEMS, ID)}
    differences = schema_differences(known, {ITEMS: (ID, NOTE), ORDERS: (ID,)})
    assert [d.table for d in differences] == [ITEMS, ORDERS]  # sorted, whatever the order found
    assert str(differences[1]) == (
        "shop.orders: the stream has [id int(11) NOT NULL, note varchar(10) NULL COLLATE utf8mb4_general_ci], "
        "information_schema has [id int(11) NOT NULL]"
    )
