"""Which tables a change logged as a statement writes (``cdc/binlog/row_statements.py``)."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.row_statements import parse_row_statement
from airflow_provider_mysqlcdc.cdc.schema.table import TableId


def t(name: str, database: str = "db") -> TableId:
    return TableId(database, name)


@pytest.mark.parametrize(("statement", "written"), [
    ("INSERT INTO t (a) VALUES (1)", {t("t")}),
    ("insert into other.t select * from c", {t("t", "other")}),
    ("INSERT DELAYED IGNORE INTO `t` VALUES (1)", {t("t")}),
    ("insert ignore into t values (1) on duplicate key update a = 1", {t("t")}),
    ("REPLACE INTO `t` VALUES (1)", {t("t")}),
    ("REPLACE LOW_PRIORITY INTO d.t SELECT 1", {t("t", "d")}),
    ("UPDATE t SET a = (SELECT max(x) FROM c) WHERE b = 2", {t("t")}),
    ("UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.a", {t("t1"), t("t2")}),
    ("UPDATE t1, d2.t2 SET t1.a = 1, t2.b = 2", {t("t1"), t("t2", "d2")}),
    ("DELETE FROM t WHERE a IN (SELECT x FROM c)", {t("t")}),
    ("DELETE t1, t2 FROM t1 JOIN t2 ON t1.id = t2.id", {t("t1"), t("t2")}),
    ("/* a comment */ DELETE FROM `a b` WHERE 1", {t("a b")}),
    ("WITH c AS (SELECT 1) UPDATE t SET a = 1", {t("t")}),
    ("LOAD DATA INFILE '/tmp/x' INTO TABLE t FIELDS TERMINATED BY ','", {t("t")}),
    ("LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD_MB-1-2' IGNORE INTO TABLE `d`.`t`", {t("t", "d")}),
    ("CREATE TABLE t2 SELECT * FROM t", {t("t2")}),
    ("CREATE TABLE t3 (a INT) AS SELECT 1", {t("t3")}),
])
def test_the_tables_a_statement_writes(statement: str, written: set[TableId]) -> None:
    parsed = parse_row_statement(statement, "db")
    assert parsed is not None and parsed.exact
    assert parsed.tables == written


@pytest.mark.parametrize("statement", [
    "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT `x`", "ALTER TABLE t ADD c INT", "CREATE TABLE x (a INT)",
    "CREATE VIEW v AS SELECT * FROM t", "GRANT SELECT ON db.* TO u", "WITH c AS (SELECT 1) SELECT * FROM c",
    "DROP TABLE t", "TRUNCATE t",
])
def test_statements_that_change_no_rows(statement: str) -> None:
    assert parse_row_statement(statement, "db") is None


def test_writes_names_the_captured_tables_only() -> None:
    parsed = parse_row_statement("UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.a", "db")
    assert parsed is not None
    assert parsed.writes({t("t2"), t("t3")}) == [t("t2")]
    assert parsed.writes({t("t3")}) == []
    assert parsed.writes({t("t3")}, new_names=lambda table: table.table == "t1") == [t("t1")]
    reads_only = parse_row_statement("INSERT INTO t9 SELECT * FROM t1", "db")
    assert reads_only is not None and reads_only.writes({t("t1")}) == []


def test_a_statement_the_parser_cannot_read_counts_every_name() -> None:
    parsed = parse_row_statement("UPDATE t1 SET a = 1 WHERE (((", "db")
    assert parsed is not None and not parsed.exact
    assert parsed.writes({t("t1", "other"), t("t2")}) == [t("t1", "other")]
