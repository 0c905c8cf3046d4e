"""The idle stream's self-check against a real server: a change the binlog never shows fails the stream
with the table and both column lists; an idle stream whose tables match goes on; a change the binlog
does show, past the stream's checkpoint, is no divergence (the stream reads it next)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.schema_check import check_source_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceSchemaDivergedError
from tests.integration.stream_task import stream_task

pytestmark = pytest.mark.usefixtures("connections")


def unlogged(admin, *statements: str) -> None:
    """Run ``statements`` without writing them to the binlog, as an operator might behind our back."""
    with admin.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        try:
            for statement in statements:
                cur.execute(statement)
        finally:
            cur.execute("SET SESSION sql_log_bin = 1")


@pytest.mark.parametrize(("name", "ddl", "found"), [
    ("widened", "ALTER TABLE widened ADD COLUMN note VARCHAR(10)",
     "[id int(11) NOT NULL, v int(11) NULL, note varchar(10) NULL COLLATE utf8mb4_general_ci]"),
    ("tightened", "ALTER TABLE tightened MODIFY v INT NOT NULL", "[id int(11) NOT NULL, v int(11) NOT NULL]"),
    ("dropped", "DROP TABLE dropped", "no such table"),
])
def test_a_change_the_binlog_never_showed_fails_the_idle_stream(admin, database, tmp_path, name, ddl,
                                                                 found) -> None:
    table = f"{database}.{name}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, v INT)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        cur.execute(f"INSERT INTO `{name}` VALUES (1, 10)")
    stream_task(base_uri, table)  # idle and equal: goes on

    unlogged(admin, ddl)
    with pytest.raises(SourceSchemaDivergedError) as failed:
        stream_task(base_uri, table)
    message = str(failed.value)
    assert f"{table}: the stream has [id int(11) NOT NULL, v int(11) NULL], information_schema has {found}" in message
    assert "sql_log_bin=0" in message and "clear the stream task" in message


def test_an_idle_stream_whose_tables_match_goes_on(admin, database, tmp_path, caplog) -> None:
    """A change that is in the binlog is followed, and then the check passes; it must have run."""
    table = f"{database}.followed"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE followed (id INT PRIMARY KEY, v INT)")
    base_uri = str(tmp_path / "lake")
    stream_task(base_uri, table, startup_mode="latest-offset")
    with admin.cursor() as cur:
        cur.execute("INSERT INTO followed VALUES (1, 10)")
        cur.execute("ALTER TABLE followed ADD COLUMN note VARCHAR(10)")
        cur.execute("INSERT INTO followed VALUES (2, 20, 'two')")
    caplog.set_level(logging.DEBUG, logger="airflow_provider_mysqlcdc.engine.stream.schema_self_check")
    summary = stream_task(base_uri, table, stop_after_idle_seconds=1.0, schema_check_seconds=0.1)
    assert summary["stopped"] == "idle for 1 s"  # not by an error: its changes (and the ALTER) were written
    passed = [r for r in caplog.records if "match information_schema" in r.getMessage()]
    assert passed, "the self-check never ran"
    # once per idle spell: the stream stayed idle for a second, at four heartbeats a second
    assert len(passed) == 1


def test_a_change_past_the_checkpoint_is_read_next_not_a_divergence(admin, cdc_conn, database) -> None:
    """An ALTER logged after the stream's offset skips the round (the stream reads it next), by GTIDs and
    by file and position; a binlog that only rotated is no movement."""
    table = TableId(database, "racing")
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE racing (id INT PRIMARY KEY, v INT)")
    server = ServerInfo.read(cdc_conn)
    known = {table: load_table_schema(cdc_conn, table)}
    before = read_current_offset(cdc_conn, server)
    assert before.gtid  # MariaDB: the stream's offsets carry the GTID position
    assert check_source_schemas(cdc_conn, server, before, known) == []

    with admin.cursor() as cur:
        cur.execute("ALTER TABLE racing ADD COLUMN note VARCHAR(10)")
    assert check_source_schemas(cdc_conn, server, before, known) is None
    assert check_source_schemas(cdc_conn, server, replace(before, gtid=None), known) is None

    after = read_current_offset(cdc_conn, server)  # had the stream read the ALTER and not followed it
    with admin.cursor() as cur:
        cur.execute("FLUSH NO_WRITE_TO_BINLOG BINARY LOGS")
    differences = check_source_schemas(cdc_conn, server, after, known)
    assert differences is not None and [d.table for d in differences] == [table]
