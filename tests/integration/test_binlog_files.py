"""Binlog files as a source, on the real server: its binlog copied while it runs by ``mariadb-binlog
--read-from-remote-server --raw`` (as a user archives it), read through ``BinlogReader`` with the files as its
events, gives what the live dump gives for the same range: the same records and commits with the same offsets,
across a rotation, and the same tail from an offset in the middle of a transaction; and so do the server's own
files, as a backup tool copies them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, Committed, SchemaChanged, SchemaStatement
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.exceptions import RowDecodeError, SourceConfigError
from tests.integration.binlog_archive import copy_binlog
from tests.integration.source_sql import now, run

SERVER_ID = 5440


def read(config: ConnectionConfig, cdc_conn: Any, schema: TableSchema, start: BinlogOffset, stop: BinlogOffset,
         files: BinlogFiles | None = None) -> list[Any]:
    """What the reader yields from ``start`` to ``stop``, knowing ``schema`` (the table's before the range's
    DDL): from the live dump, or from ``files``."""
    reader = BinlogReader(
        config.replication_settings(), SERVER_ID, ServerIdRange(SERVER_ID, SERVER_ID), {schema.id: schema}, start,
        lambda t: load_table_schema(cdc_conn, t), stop=stop, events=files.open if files is not None else None,
    )
    return list(reader)


def test_copied_binlog_files_read_as_the_live_dump(mariadb_server, admin, cdc_conn, database,
                                                   tmp_path: Path) -> None:
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    table = TableId(database, "archived")
    run(admin, "CREATE TABLE archived (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), t DATETIME(3))")
    schema = load_table_schema(cdc_conn, table)
    start = now(cdc_conn)
    run(admin, "BEGIN", *(f"INSERT INTO archived VALUES ({i}, 'v{i}', {i}.25, '2024-01-0{i} 10:00:00.123')"
                          for i in range(1, 6)), "COMMIT",
        "UPDATE archived SET v = CONCAT(v, '!') WHERE id <= 3")
    run(admin, "FLUSH BINARY LOGS")  # the range crosses a rotation
    run(admin, "DELETE FROM archived WHERE id IN (2, 4)", "ALTER TABLE archived ADD COLUMN w INT",
        "INSERT INTO archived VALUES (9, 'nine', 9.99, '2024-02-01 00:00:00', 7)")
    stop = now(cdc_conn)
    assert stop.file != start.file

    files = copy_binlog(mariadb_server, start.file, tmp_path)
    assert files.names[0] == start.file and stop.file in files.names
    live = read(config, cdc_conn, schema, start, stop)
    archived = read(config, cdc_conn, schema, start, stop, files)
    assert archived == live
    # the server's own files, as a backup tool copies them (here read where they are): the same again
    own = BinlogFiles.in_folder(mariadb_server.data_dir, base_name=start.file.rsplit(".", 1)[0])
    assert read(config, cdc_conn, schema, start, stop, own) == live
    assert {type(i) for i in live} == {ChangeRecord, Committed, SchemaStatement, SchemaChanged}
    records = [i for i in live if isinstance(i, ChangeRecord)]
    assert len(records) == 5 + 6 + 2 + 1 and {r.offset.file for r in records} == {start.file, stop.file}

    # from the second insert on (inside the first transaction), and from the commit before the rotation
    for middle in (records[1].offset, next(i.offset for i in live if isinstance(i, Committed)
                                           and i.offset.file == start.file and i.offset > records[-8].offset)):
        tail = read(config, cdc_conn, schema, middle, stop, files)
        assert tail == read(config, cdc_conn, schema, middle, stop)
        assert [i for i in tail if isinstance(i, ChangeRecord)] == [r for r in records if r.offset > middle]


@pytest.mark.parametrize("position", ["inside an event", "past the end"])
def test_an_offset_the_files_do_not_hold_is_refused(mariadb_server, admin, cdc_conn, database, tmp_path: Path,
                                                    position: str) -> None:
    start = now(cdc_conn)
    run(admin, "CREATE TABLE IF NOT EXISTS refused (id INT PRIMARY KEY)", "REPLACE INTO refused VALUES (1)")
    files = copy_binlog(mariadb_server, start.file, tmp_path)
    size = (tmp_path / start.file).stat().st_size
    offset = BinlogOffset(start.file, start.position + 1 if position == "inside an event" else size + 1)
    events = files.open(offset.file, offset.position)
    with pytest.raises((RowDecodeError, SourceConfigError), match="no event at position|is not in"):
        list(events)
