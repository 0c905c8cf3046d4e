"""Whether the captured tables changed in a stretch of binlog: what the waiting stream wakes up for.

A stream waiting in the triggerer should wake for a change of its tables, not for every write on a
busy server: otherwise a source with other traffic never lets it stay deferred (each resume costs
seconds of scheduling). So the trigger reads the binlog it has not seen yet, through the same
reader as the stream, with the captured tables only, and stops at the first of their changes (a
row change, or a DDL of one of them: a TRUNCATE must empty the replica without waiting for a row).
The tables' schemas are read in two queries whatever their number (a poll over a thousand tables read
them one by one, two queries each, about 2 s on every poll that saw the binlog move). A captured
table the server no longer has wakes the stream at once: it was dropped or renamed after the
checkpoint, and the stream reads that DDL itself. A table the stream stopped capturing after a DROP
but still names (``awaited``) wakes it when it is made again, as a table matching the patterns does.
Other transactions are skipped without decoding their rows; the scan remembers the last transaction
boundary it passed, so the next poll continues there instead of reading the stretch again. The
stream's checkpoint does not move while it waits; the trigger's deadline (``wake_at``) resumes it
at a bounded interval, and it then advances the checkpoint past the unrelated traffic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, Committed, SchemaStatement
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection, load_table_schema, load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig


def first_captured_change(
    config: ConnectionConfig, server_id: int, control: Any, tables: Sequence[TableId], start: BinlogOffset,
    stop: BinlogOffset, selection: TableSelection | None = None, awaited: Sequence[TableId] = (),
) -> tuple[bool, BinlogOffset]:
    """``(True, offset of the change)`` at the first change of ``tables`` after ``start`` (or a table made
    or renamed under a name that ``selection``'s patterns match, or under one of ``awaited``), or ``(False,
    the last transaction boundary before stop)`` when there is none up to ``stop``. ``(True, start)`` when
    one of ``tables`` is gone from the server."""
    schemas = load_table_schemas(control, tables)
    if len(schemas) < len(set(tables)):
        return True, start
    watch_new = selection.matches if selection is not None and selection.by_pattern else None
    reader = BinlogReader(config.replication_settings(), server_id, config.server_id, schemas, start,
                          reload_schema=lambda table: load_table_schema(control, table), stop=stop,
                          watched=awaited, watch_new=watch_new)
    reached = start
    for item in reader:
        if isinstance(item, ChangeRecord | SchemaStatement):
            return True, item.offset
        if isinstance(item, Committed):
            reached = item.offset
    return False, reached
