"""Table maps parsed once per table definition (``cdc.table_maps``), on the real server: the same table
map in later transactions is the parsed one, a DDL is parsed anew, and the rows read either way are the
server's; a reader filtering the table out still skips it."""

from __future__ import annotations

from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from airflow_provider_mysqlcdc.cdc import table_maps
from airflow_provider_mysqlcdc.cdc.binlog_reader import BinlogReader, ChangeRows, SchemaChanged
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.server_id import ServerIdRange
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo


def run(admin: Any, *statements: str) -> None:
    with admin.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def now(conn: Any) -> BinlogOffset:
    return read_current_offset(conn, ServerInfo.read(conn))


def events(mariadb_server: Any, start: BinlogOffset, server_id: int, kind: type = WriteRowsEvent,
           **filters: Any) -> list[tuple[str, Any, list[Any]]]:
    """mysql-replication's events of ``kind`` from ``start`` to the binlog's end: table, columns, row values."""
    stream = BinLogStreamReader(
        connection_settings={"host": mariadb_server.host, "port": mariadb_server.port,
                             "user": mariadb_server.cdc_user, "password": mariadb_server.cdc_password},
        server_id=server_id, log_file=start.file, log_pos=start.position, resume_stream=True, blocking=False,
        only_events=[kind], **filters)
    try:
        return [(event.table, event.columns, [row["values"] for row in getattr(event, "rows", [])])
                for event in stream]
    finally:
        stream.close()


def test_a_table_map_is_parsed_once_until_a_ddl(mariadb_server, admin, cdc_conn, database) -> None:
    table_maps.install()
    run(admin, "CREATE TABLE tm (id INT PRIMARY KEY, v VARCHAR(10))")
    start = now(cdc_conn)
    run(admin, "INSERT INTO tm VALUES (1, 'a')", "INSERT INTO tm VALUES (2, 'b')",
        "ALTER TABLE tm ADD COLUMN w INT NOT NULL DEFAULT 7", "INSERT INTO tm VALUES (3, 'c', 8)")
    inserts = events(mariadb_server, start, 5420)
    assert [values for _, _, values in inserts] == [[{"id": 1, "v": "a"}], [{"id": 2, "v": "b"}],
                                                   [{"id": 3, "v": "c", "w": 8}]]
    first, second, altered = (columns for _, columns, _ in inserts)
    assert second is first  # the second transaction's table map: the first one's parse
    assert altered is not first and [c.name for c in altered] == ["id", "v", "w"]


def test_a_reader_filtering_the_table_out_skips_it(mariadb_server, admin, cdc_conn, database) -> None:
    table_maps.install()
    run(admin, "CREATE TABLE kept (id INT PRIMARY KEY)", "CREATE TABLE left_out (id INT PRIMARY KEY)")
    start = now(cdc_conn)
    run(admin, "INSERT INTO kept VALUES (1)", "INSERT INTO left_out VALUES (1)")
    everything = events(mariadb_server, start, 5421, TableMapEvent)  # both parsed, and kept
    assert [table for table, _, _ in everything] == ["kept", "left_out"]
    assert [table for table, _, _ in events(mariadb_server, start, 5422, TableMapEvent, only_tables=["kept"])] == [
        "kept"]
    assert [table for table, _, _ in events(mariadb_server, start, 5423, only_tables=["kept"])] == ["kept"]


def test_the_stream_reader_reads_the_same_rows_over_many_transactions(mariadb_server, admin, cdc_conn,
                                                                      database) -> None:
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    run(admin, "CREATE TABLE m1 (id INT PRIMARY KEY, v INT)", "CREATE TABLE m2 (id INT PRIMARY KEY, s VARCHAR(5))")
    tables = [TableId(database, "m1"), TableId(database, "m2")]
    schemas = {t: load_table_schema(cdc_conn, t) for t in tables}  # as a checkpoint taken at the start has them
    start = now(cdc_conn)
    for i in range(1, 6):
        run(admin, "BEGIN", f"INSERT INTO m1 VALUES ({i}, {i * 10})", f"INSERT INTO m2 VALUES ({i}, 's{i}')", "COMMIT")
    run(admin, "ALTER TABLE m2 ADD COLUMN n INT", "INSERT INTO m2 VALUES (6, 'after', 1)")
    reader = BinlogReader(config.replication_settings(), 5424, ServerIdRange(5424, 5424),
                          schemas, start,
                          reload_schema=lambda t: load_table_schema(cdc_conn, t))
    items = list(reader.rows())
    rows = {t: [v for i in items if isinstance(i, ChangeRows) and i.table == t for v in i.column(1)] for t in tables}
    assert rows == {tables[0]: [10, 20, 30, 40, 50], tables[1]: ["s1", "s2", "s3", "s4", "s5", "after"]}
    assert [i.schema.column_names for i in items if isinstance(i, SchemaChanged)] == [("id", "s", "n")]
