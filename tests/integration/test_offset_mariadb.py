"""Offsets read from the real MariaDB: the current offset moves with commits, the snapshot offset does not."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import (
    BinlogOffset,
    binlog_files,
    check_offset_available,
    read_current_offset,
    read_snapshot_offset,
)
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceConfigError


def test_current_offset_moves_with_each_commit(admin, cdc_conn, database) -> None:
    server = ServerInfo.read(cdc_conn)
    assert server.is_mariadb and server.binary_log_status_sql == "SHOW MASTER STATUS"
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE offsets_t (id INT PRIMARY KEY)")
        before = read_current_offset(cdc_conn, server)
        cur.execute("INSERT INTO offsets_t VALUES (1)")
    after = read_current_offset(cdc_conn, server)
    assert before.flavor == "mariadb" and before.gtid and after.gtid
    assert before < after
    domain, server_id, seq = (int(x) for x in after.gtid.split("-"))
    assert (domain, server_id) == (0, 1) and seq == int(before.gtid.split("-")[2]) + 1


def test_snapshot_offset_stays_frozen_while_others_commit(mariadb_server, admin, database) -> None:
    reader = mariadb_server.cdc_connect(database)
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE frozen_t (id INT PRIMARY KEY)")
    with reader.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        snapshot = read_snapshot_offset(reader)
        with admin.cursor() as writer:
            writer.execute("INSERT INTO frozen_t VALUES (1), (2)")
        assert read_snapshot_offset(reader) == snapshot
        cur.execute("SELECT COUNT(*) FROM frozen_t")
        assert cur.fetchone()[0] == 0  # the snapshot predates the insert
        cur.execute("COMMIT")
    assert read_current_offset(reader, ServerInfo.read(reader)) > snapshot


def test_purged_binlog_is_a_clear_error(cdc_conn) -> None:
    files = binlog_files(cdc_conn)
    check_offset_available(cdc_conn, BinlogOffset(files[-1], 4, flavor="mariadb"))
    with pytest.raises(SourceConfigError, match="no longer on the server.*Re-snapshot"):
        check_offset_available(cdc_conn, BinlogOffset("mysql-bin.000000", 4, flavor="mariadb"))
