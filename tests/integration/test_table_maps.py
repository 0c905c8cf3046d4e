"""Table maps read by ``binlog.events`` on the real server: parsed once per definition (the same table
map in later transactions is the parsed one, a DDL is parsed anew), with the column metadata
mysql-replication reads from the same events, and the rows read either way are the server's."""

from __future__ import annotations

from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import TableMapEvent

from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
from airflow_provider_mysqlcdc.cdc.binlog.events import Rows
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, ChangeRows, SchemaChanged
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from tests.integration.source_sql import now, run

# what the row decoder and the reader's checks read of a column (``row_decoder._METADATA``)
METADATA = ("type", "name", "unsigned", "max_length", "length_size", "precision", "decimals", "fsp", "bits", "size",
            "character_set_name", "enum_values", "set_values")




def settings(mariadb_server: Any) -> dict[str, Any]:
    return {"host": mariadb_server.host, "port": mariadb_server.port, "user": mariadb_server.cdc_user,
            "password": mariadb_server.cdc_password}


def rows_events(mariadb_server: Any, start: BinlogOffset, server_id: int) -> list[Rows]:
    """The rows events from ``start`` to the binlog's end, as the reader's dump parses them."""
    dump = BinlogDump(settings(mariadb_server), server_id, start.file, start.position)
    try:
        return [event for event in dump if isinstance(event, Rows)]
    finally:
        dump.close()


def test_a_table_map_is_parsed_once_until_a_ddl(mariadb_server, admin, cdc_conn, database) -> None:
    run(admin, "CREATE TABLE tm (id INT PRIMARY KEY, v VARCHAR(10))")
    start = now(cdc_conn)
    run(admin, "INSERT INTO tm VALUES (1, 'a')", "INSERT INTO tm VALUES (2, 'b')",
        "ALTER TABLE tm ADD COLUMN w INT NOT NULL DEFAULT 7", "INSERT INTO tm VALUES (3, 'c', 8)")
    first, second, altered = (event.table_map for event in rows_events(mariadb_server, start, 5420))
    assert second is first  # the second transaction's table map: the first one's parse
    assert altered is not first and [c.name for c in altered.columns] == ["id", "v", "w"]
    assert first.table == TableId(database, "tm")


def test_table_map_columns_carry_what_mysql_replication_reads(mariadb_server, admin, cdc_conn, database) -> None:
    run(admin, "CREATE TABLE meta (id INT UNSIGNED PRIMARY KEY, t TINYINT, s SMALLINT UNSIGNED, m MEDIUMINT, "
               "b BIGINT UNSIGNED, f FLOAT, d DOUBLE, n DECIMAL(20,6) UNSIGNED, y YEAR, dt DATETIME(3), "
               "ts TIMESTAMP(6) NULL, tm TIME(2), da DATE, bi BIT(13), e ENUM('x','ÿ','z') CHARACTER SET latin1, "
               "st SET('p','q'), c CHAR(4) CHARACTER SET latin1, vc VARCHAR(300), vb VARBINARY(20), "
               "bl BLOB, tx MEDIUMTEXT CHARACTER SET utf8mb3, bn BINARY(3), g GEOMETRY, j JSON)")
    start = now(cdc_conn)
    run(admin, "INSERT INTO meta (id) VALUES (1)")
    ours = rows_events(mariadb_server, start, 5421)[0].table_map.columns
    stream = BinLogStreamReader(connection_settings=settings(mariadb_server), server_id=5422, log_file=start.file,
                                log_pos=start.position, resume_stream=True, blocking=False,
                                only_events=[TableMapEvent])
    try:
        theirs = next(iter(stream)).columns
    finally:
        stream.close()
    assert len(ours) == len(theirs) == 24
    # mysql-replication makes an ENUM or SET string that is not UTF-8 '' (the latin1 'ÿ' here); ours is the string
    assert ours[14].enum_values == ["", "x", "ÿ", "z"] and theirs[14].enum_values == ["", "x", "", "z"]
    theirs[14].enum_values = ours[14].enum_values
    for mine, reference in zip(ours, theirs, strict=True):
        for attribute in METADATA:
            if hasattr(reference, attribute):
                assert getattr(mine, attribute) == getattr(reference, attribute), (reference.name, attribute)


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
