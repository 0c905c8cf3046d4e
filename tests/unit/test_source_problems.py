"""Judging source facts: each problem is one line naming the setting or GRANT to fix."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.source.checks import SourceFacts, find_problems, parse_grants, row_metadata_path
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceConfigError

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
MARIA = ServerInfo.from_version("10.11.19-MariaDB-0+deb12u1")
MYSQL84 = ServerInfo.from_version("8.4.3")


def facts(server: ServerInfo, grants: list[str], **variables: str) -> SourceFacts:
    return SourceFacts(server, {**GOOD, **variables}, parse_grants(grants))


def test_server_info_flavours() -> None:
    assert MARIA.flavor == "mariadb" and MARIA.version == (10, 11, 19)
    assert MYSQL84.flavor == "mysql" and MYSQL84.binary_log_status_sql == "SHOW BINARY LOG STATUS"
    assert ServerInfo.from_version("8.0.36").binary_log_status_sql == "SHOW MASTER STATUS"
    assert ServerInfo.from_version("10.5.1", "mariadb.org binary distribution").flavor == "mariadb"
    with pytest.raises(SourceConfigError, match="cannot read the server version from 'banana': .* MariaDB"):
        ServerInfo.from_version("banana")


def test_a_ready_server_has_no_problems() -> None:
    grants = ["GRANT SELECT, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` IDENTIFIED BY "
              "PASSWORD '*ABC'"]
    assert find_problems(facts(MARIA, grants)) == []
    assert find_problems(facts(MYSQL84, ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"])) == []


def test_every_problem_is_reported_at_once() -> None:
    problems = find_problems(
        facts(ServerInfo.from_version("10.4.3-MariaDB"), ["GRANT USAGE ON *.* TO `cdc`@`%`"],
              log_bin="OFF", binlog_format="MIXED", binlog_row_image="MINIMAL", binlog_row_metadata="NO_LOG"),
        databases=["shop"],
    )
    assert problems == [
        "MariaDB 10.4.3-MariaDB is too old: use MariaDB 10.5 or newer",
        "log_bin is OFF: start the server with log_bin (binary logging) enabled",
        "binlog_format is MIXED: SET GLOBAL binlog_format = 'ROW' (and in the server config)",
        "binlog_row_image is MINIMAL: SET GLOBAL binlog_row_image = 'FULL' (and in the server config)",
        "the CDC user lacks REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* TO <cdc user>",
        "the CDC user lacks BINLOG MONITOR: GRANT BINLOG MONITOR ON *.* TO <cdc user>",
        "the CDC user lacks SELECT on shop: GRANT SELECT ON `shop`.* TO <cdc user>",
    ]


def test_mysql_8s_compressed_transactions_and_partial_json_updates_are_read() -> None:
    """The reader decodes both (TRANSACTION_PAYLOAD_EVENT, PARTIAL_UPDATE_ROWS_EVENT): no problem of the source."""
    grants = ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"]
    assert find_problems(facts(MYSQL84, grants, binlog_transaction_compression="ON",
                               binlog_row_value_options="PARTIAL_JSON")) == []


def test_old_mysql_without_row_metadata_and_per_database_select() -> None:
    variables = {k: v for k, v in GOOD.items() if k != "binlog_row_metadata"}
    grants = ["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%'",
              "GRANT SELECT ON `shop`.* TO 'cdc'@'%'"]
    old = SourceFacts(ServerInfo.from_version("5.7.44-log"), variables, parse_grants(grants))
    refused = ("MySQL 5.7.44-log is not supported: its binlog's table maps carry no column names, signedness or "
               "character sets (binlog_row_metadata exists from MySQL 8.0.14 on), and reading its rows by position "
               "against the schema the stream keeps is not proven on MySQL 5.7's binlog")
    assert [p[:len(refused)] for p in find_problems(old, databases=["shop"])] == [refused]
    assert find_problems(old, databases=["shop", "crm"])[1:] == [
        "the CDC user lacks SELECT on crm: GRANT SELECT ON `crm`.* TO <cdc user>"
    ]
    recent = SourceFacts(ServerInfo.from_version("8.0.14"), variables, parse_grants(grants))
    assert find_problems(recent, databases=["shop"]) == []
    # MariaDB may print the old name REPLICATION CLIENT for BINLOG MONITOR
    maria = facts(MARIA, ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"])
    assert find_problems(maria) == []


def test_database_level_grants_match_like_patterns() -> None:
    grants = ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`",
              "GRANT SELECT ON `shop\\_%`.* TO `cdc`@`%`", "GRANT ALL PRIVILEGES ON `crm`.* TO `cdc`@`%`",
              "GRANT SELECT ON `hr`.`staff` TO `cdc`@`%`"]
    problems = find_problems(facts(MARIA, grants), databases=["shop_eu", "shopping", "crm", "hr"])
    # `shop\_%` matches shop_eu but not shopping; a table-level grant does not cover the database
    assert problems == [
        "the CDC user lacks SELECT on hr: GRANT SELECT ON `hr`.* TO <cdc user>",
        "the CDC user lacks SELECT on shopping: GRANT SELECT ON `shopping`.* TO <cdc user>",
    ]


def test_no_select_anywhere_without_captured_databases() -> None:
    grants = ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`"]
    assert find_problems(facts(MARIA, grants)) == [
        "the CDC user has SELECT on nothing: GRANT SELECT ON <captured database>.* TO <cdc user>"
    ]
    assert find_problems(facts(MARIA, [*grants, "GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`%`"])) == []


def test_grant_parsing_keeps_quoted_names_and_skips_roles_and_routines() -> None:
    assert parse_grants([
        "GRANT SELECT ON `a.b c`.* TO `cdc`@`%`",
        "GRANT SELECT ON `x``y`.* TO `cdc`@`%`",
        "GRANT EXECUTE ON PROCEDURE `db`.`p` TO `cdc`@`%`",
        "GRANT `reader_role` TO `cdc`@`%`",
        "GRANT PROXY ON ''@'' TO 'root'@'localhost' WITH GRANT OPTION",
    ]) == {"a.b c": {"SELECT"}, "x`y": {"SELECT"}}


@pytest.mark.parametrize(("server", "setting"), [(MYSQL84, "MINIMAL"), (MARIA, "NO_LOG"), (MARIA, "MINIMAL")])
def test_row_metadata_without_names_is_read_by_position(server: ServerInfo, setting: str) -> None:
    """The servers' defaults (MySQL 8.0/8.4: MINIMAL; MariaDB: NO_LOG) are no problem: the reader reads rows by
    position against the schema it keeps, and the log says so."""
    grants = ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"]
    default = facts(server, grants, binlog_row_metadata=setting)
    assert find_problems(default) == []
    assert row_metadata_path(default).startswith(f"binlog_row_metadata is {setting}: table maps carry no column names")
    assert "checks them by name" in row_metadata_path(facts(server, grants))
