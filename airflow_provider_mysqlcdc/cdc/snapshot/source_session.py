"""One session with the source for every table a snapshot task reads: its connections, the server, the
watermarks, the tables' columns and the binlog changes between two watermarks.

A Spark task of a pack of many small tables reads a few chunks of each. Connecting, asking the server's
version and loading a table's whole schema for each table cost ~3 ms a table, as much as reading its
rows: the session does each once a task. It holds the control connection (watermarks, columns, string
key weights, keyless chunks' snapshots) and, opened at its first use, the unbuffered reader connection
that selects chunks where connectorx cannot (a TLS client certificate). One thread uses it at a time
(the task's reading thread); it is closed once, when the task ends or fails.

The columns are what a batch's schema check compares (``ChunkReader``: an ALTER TABLE while a batch is
read stops the attempt), so the session asks the server for only them, for all the tables of a check in
one query (``discovery.load_table_columns``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, SchemaChanged, SchemaStatement
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset, read_snapshot_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_columns, load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SchemaChangeError


def schema_changed(planned: TableSchema, columns: Sequence[Column], when: str) -> SchemaChangeError:
    """The table changed while its batch is read (an ALTER TABLE): a batch has one schema, so this
    attempt stops and commits nothing; the task's retry reads with the table's current schema."""
    now = (f"the table now has {', '.join(f'{c.name} {c.column_type}' for c in columns)}" if columns else
           "the table no longer exists (or the CDC user cannot see it)")
    return SchemaChangeError(
        f"{planned.id} changed {when}: the batch reads columns "
        f"{', '.join(f'{c.name} {c.column_type}' for c in planned.columns)}, {now}. Nothing of this attempt is "
        f"committed; retry the task (or clear it): it reads with the current schema"
    )


class SourceSession:
    """The source as one snapshot task sees it (see the module docstring)."""

    def __init__(self, config: ConnectionConfig) -> None:
        self.config = config
        self.control = config.connect()
        self._reader: Any = None
        try:
            self.server = ServerInfo.read(self.control)
        except BaseException:
            self.control.close()
            raise

    def reader(self) -> Any:
        """The unbuffered pymysql connection chunks are selected through where connectorx is not used."""
        if self._reader is None:
            import pymysql.cursors  # only where connectorx cannot connect

            self._reader = self.config.connect(cursorclass=pymysql.cursors.SSCursor)
        return self._reader

    def close(self) -> None:
        try:
            self.control.close()
        finally:
            if self._reader is not None:
                self._reader.close()

    def __enter__(self) -> SourceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def low_watermark(self) -> BinlogOffset:
        """LW, consistent with the engine's commits on MariaDB (``chunk_reader``'s docstring). Watermarks carry
        file and position only: they order chunks and changes on this server, and the stream can look its GTID
        up once where it starts (offset._mariadb_gtid_at has the cost)."""
        if not self.server.is_mariadb:
            return self.high_watermark()
        with self.control.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            try:
                return read_snapshot_offset(self.control, with_gtid=False)
            finally:
                cur.execute("COMMIT")

    def high_watermark(self) -> BinlogOffset:
        """The binlog's current end: read after a SELECT ends, an offset at or after every row it saw."""
        return read_current_offset(self.control, self.server, with_gtid=False)

    def check_columns(self, schemas: Sequence[TableSchema], when: Mapping[TableId, str]) -> None:
        """Raises ``SchemaChangeError`` for the first of ``schemas`` whose table's columns are not its own now
        (one query for all); ``when[table]`` says when the change was seen."""
        current = load_table_columns(self.control, [s.id for s in schemas])
        for schema in schemas:
            # the chunk key may be a configured one that information_schema does not know: the columns decide
            if current.get(schema.id) != schema.columns:
                raise schema_changed(schema, current.get(schema.id, ()), when[schema.id])

    def changes_between(self, server_id: int, schemas: Sequence[TableSchema], low: BinlogOffset,
                        high: BinlogOffset) -> list[ChangeRecord]:
        """The changes of ``schemas``' tables in (low, high], in offset order, from one binlog pass. A DDL of
        one of them in the window stops the attempt: the fix-up cannot replay a change of columns, nor a
        statement that changes rows without row events (TRUNCATE)."""
        planned = {s.id: s for s in schemas}
        reader = BinlogReader(
            self.config.replication_settings(),
            server_id,
            self.config.server_id,
            planned,
            low,
            reload_schema=lambda table: load_table_schema(self.control, table),
            stop=high,
        )
        changes = []
        for item in reader:
            if isinstance(item, SchemaChanged):
                raise schema_changed(planned[item.schema.id], item.schema.columns,
                                     f"at {item.offset}, between the watermarks of its chunks")
            if isinstance(item, SchemaStatement):
                for change in item.ddl.changes:
                    table = change.table if change.table in planned else change.renamed_to
                    if change.changes_columns and table in planned:
                        assert table is not None
                        raise schema_changed(planned[table], load_table_columns(self.control, [table]).get(table, ()),
                                             f"by {item.ddl.statement!r} at {item.offset}, between the watermarks "
                                             f"of its chunks")
            if isinstance(item, ChangeRecord) and low < item.offset <= high:
                changes.append(item)
        return changes
