"""Source checks against the real server: the harness user passes; each missing piece is named."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pymysql
import pytest

from airflow_provider_mysqlcdc.cdc.source.checks import check_source
from airflow_provider_mysqlcdc.exceptions import SourceConfigError


def test_harness_cdc_user_is_ready(cdc_conn, database) -> None:
    server = check_source(cdc_conn, databases=[database])
    assert server.is_mariadb


@contextlib.contextmanager
def user_with(mariadb_server, *grants: str) -> Iterator[pymysql.Connection]:
    admin = mariadb_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'limited'@'%'")
        cur.execute("CREATE USER 'limited'@'%' IDENTIFIED BY 'Secret-Pw-123'")
        for grant in grants:
            cur.execute(f"GRANT {grant} TO 'limited'@'%'")
    conn = pymysql.connect(host=mariadb_server.host, port=mariadb_server.port, user="limited",
                           password="Secret-Pw-123", autocommit=True)
    try:
        yield conn
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute("DROP USER 'limited'@'%'")
        admin.close()


@pytest.mark.parametrize(
    ("grants", "missing"),
    [
        ("SELECT, BINLOG MONITOR ON *.*", "GRANT REPLICATION SLAVE ON *.*"),
        ("SELECT, REPLICATION SLAVE ON *.*", "GRANT BINLOG MONITOR ON *.*"),
        ("REPLICATION SLAVE, BINLOG MONITOR ON *.*", "GRANT SELECT ON `t_test_source_checks`.*"),
    ],
)
def test_each_missing_privilege_is_named(mariadb_server, database, grants: str, missing: str) -> None:
    with user_with(mariadb_server, grants) as conn, pytest.raises(SourceConfigError) as error:
        check_source(conn, databases=[database])
    assert missing in str(error.value)
    assert "Secret-Pw-123" not in str(error.value) and "PASSWORD" not in str(error.value)


@pytest.mark.parametrize(
    ("variable", "bad"),
    [("binlog_format", "MIXED"), ("binlog_row_image", "MINIMAL")],
)
def test_each_wrong_binlog_setting_is_named(mariadb_server, cdc_conn, variable: str, bad: str) -> None:
    admin = mariadb_server.admin_connect()
    with admin.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{variable}")
        (original,) = cur.fetchone()
        cur.execute(f"SET GLOBAL {variable} = %s", (bad,))
        try:
            with pytest.raises(SourceConfigError, match=f"{variable} is {bad}: SET GLOBAL {variable} = "):
                check_source(cdc_conn)
        finally:
            cur.execute(f"SET GLOBAL {variable} = %s", (original,))
    admin.close()


def test_select_through_a_database_pattern_counts(mariadb_server, database) -> None:
    pattern = database.replace("_", "\\_")[:-3] + "%"
    with user_with(mariadb_server, "REPLICATION SLAVE, BINLOG MONITOR ON *.*", f"SELECT ON `{pattern}`.*") as conn:
        assert check_source(conn, databases=[database]).is_mariadb
        with pytest.raises(SourceConfigError, match="lacks SELECT on other_db: GRANT SELECT ON `other_db`"):
            check_source(conn, databases=[database, "other_db"])
