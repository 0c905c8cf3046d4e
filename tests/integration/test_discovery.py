"""Discovery against the real server: regex selection, exclusions, odd names, and full column facts."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.discovery import (
    TableSelection,
    discover_tables,
    load_table_schema,
    parse_members,
)
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, TableNotSupportedError

ODD_DB = "dïsc `odd` db"
ODD_TABLE = "tä.ble `x` ☃"  # identifiers are BMP-only (utf8mb3) on the server


def matching(databases: str, **patterns: Any) -> TableSelection:
    """The tables of the databases ``databases`` matches, with ``include_tables``/``exclude_tables``."""
    return TableSelection(include_databases=databases, **patterns)

@pytest.fixture(scope="module", autouse=True)
def tables(mariadb_server, database):
    conn = mariadb_server.admin_connect(database)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS `dïsc ``odd`` db`")
        cur.execute(
            "CREATE TABLE `dïsc ``odd`` db`.`tä.ble ``x`` ☃` ("
            " `k ey` BIGINT UNSIGNED NOT NULL, `sub` VARCHAR(20) COLLATE utf8mb4_unicode_ci NOT NULL,"
            " `price` DECIMAL(65,30), `at` DATETIME(6), `e` ENUM('it''s','a,b','ü','') NOT NULL DEFAULT 'ü',"
            " `s` SET('x','y') , `doc` JSON, `l1` VARCHAR(5) CHARACTER SET latin1,"
            " PRIMARY KEY (`sub`, `k ey`))"
        )
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE orders_archive (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE logs (line TEXT)")
        cur.execute("CREATE TABLE more_logs (line VARCHAR(10), UNIQUE KEY (line))")
        cur.execute("CREATE VIEW order_view AS SELECT id FROM orders")
    yield
    with conn.cursor() as cur:
        cur.execute("DROP DATABASE `dïsc ``odd`` db`")
    conn.close()


def test_regex_selection_and_exclusions(cdc_conn, database) -> None:
    found = discover_tables(cdc_conn, matching(database, exclude_tables=(f"{database}.logs", ".*more_logs")))
    assert [t.id.table for t in found] == ["orders", "orders_archive"]  # the view is not a base table
    found = discover_tables(cdc_conn, matching(database, include_tables=rf"{database}\.orders"))
    assert [t.id.table for t in found] == ["orders"]  # must match the whole name
    both = discover_tables(cdc_conn, matching(f"{database}|dïsc.*", include_tables=r".*\.(orders|tä.*)"))
    assert [str(t.id) for t in both] == [f"{ODD_DB}.{ODD_TABLE}", f"{database}.orders"]


def test_no_match_and_bad_options_are_clear(cdc_conn, database) -> None:
    with pytest.raises(InvalidOptionError, match=rf"tables names \['{database}.nope'\], which the server has no"):
        discover_tables(cdc_conn, TableSelection((TableId(database, "orders"), TableId(database, "nope"))))
    with pytest.raises(InvalidOptionError, match="no table matches include_databases='nothing_here'"):
        discover_tables(cdc_conn, matching("nothing_here"))
    with pytest.raises(InvalidOptionError, match="not a valid regular expression"):
        discover_tables(cdc_conn, matching("("))
    with pytest.raises(InvalidOptionError, match="not captured"):
        discover_tables(cdc_conn, matching(database, exclude_tables=(".*logs",)), chunk_key_columns={"other.t": "id"})
    with pytest.raises(TableNotSupportedError, match=rf"{database}.logs has no primary key.*chunk_key_columns="):
        discover_tables(cdc_conn, matching(database))  # logs has no key
    overrides = {f"{database}.logs": "line", f"{database}.orders": "id"}
    # with a column to split on, a table without any key is captured as a multiset of whole rows
    logs, _ = discover_tables(cdc_conn, matching(database, include_tables=r".*\.(logs|orders)"),
                              chunk_key_columns=overrides)
    assert logs.keyless and logs.chunk_key == "line" and logs.key_index == "" and logs.primary_key == ()
    with pytest.raises(TableNotSupportedError) as error:  # every refused table in one error
        discover_tables(cdc_conn, matching(f"{database}|dïsc.*", include_tables=r".*\.(logs|more_logs)"))
    assert [line.split(" has no")[0] for line in str(error.value).splitlines()] == [
        f"table {database}.logs", f"table {database}.more_logs"]
    with pytest.raises(TableNotSupportedError, match="not a column"):
        load_table_schema(cdc_conn, TableId(database, "orders"), "nope")


def test_column_facts_of_odd_names(cdc_conn) -> None:
    schema = load_table_schema(cdc_conn, TableId(ODD_DB, ODD_TABLE))
    assert schema.primary_key == ("sub", "k ey") and schema.chunk_key == "sub"
    c = {col.name: col for col in schema.columns}
    assert list(c) == ["k ey", "sub", "price", "at", "e", "s", "doc", "l1"]
    assert c["k ey"].unsigned and c["k ey"].data_type == "bigint" and not c["k ey"].nullable
    assert (c["sub"].charset, c["sub"].collation) == ("utf8mb4", "utf8mb4_unicode_ci")
    assert (c["price"].precision, c["price"].scale) == (65, 30)
    assert c["at"].datetime_precision == 6
    assert c["e"].members == ("it's", "a,b", "ü", "")
    assert c["s"].members == ("x", "y")
    assert c["l1"].charset == "latin1"
    with cdc_conn.cursor() as cur:  # the quoted names work in SQL
        cur.execute(f"SELECT COUNT(*), MAX({c['k ey'].quoted}) FROM {schema.id.quoted}")
        assert cur.fetchone() == (0, None)


def test_parse_members() -> None:
    assert parse_members("enum('a','it''s','x,y','')") == ("a", "it's", "x,y", "")
    assert parse_members("set('😀','b')") == ("😀", "b")
