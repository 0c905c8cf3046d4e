"""A purged binlog range recovered by reading the captured tables again (``on_position_lost='resnapshot'``).

When the server purged the binlog between the lake's checkpoint and the oldest binlog it still has, the
changes in between are gone for good, so the only exact way on is each table's rows as they are now.
They are read as a DDL that gave rows values without row events is followed (``engine.stream.schema_changes``):

1. a binlog position ``since`` of the server is taken, before any row is read;
2. each captured table's chunks are read again lock-free, as the snapshot reads them (low watermark,
   SELECT, high watermark, binlog fix-up: ``cdc.snapshot.chunk_reader``), each chunk's rows as of its own
   high watermark, at or after ``since``; the current table is replaced by them in one Delta commit;
3. one batch commits a ``!G`` record to each table's changelog at ``since``, naming the lost range, and
   the checkpoint at ``since``: the stream reads on from there. A change it reads between ``since`` and a
   chunk's high watermark is older than the re-read row and loses to it in the MERGE (``lake.write.merge``);
   a later one wins. As-of reads before the table's highest high watermark are refused
   (``Checkpoint.history_from``): the rows replaced have no history in between.

A transaction the lake holds in part (committed in batches, its rest purged) loses its part from the changelog:
nobody may read part of a transaction, and its effect is in the rows read again.

Killed midway, the tables already replaced keep ``since`` in their replace commit (``replace_current``) and
are not read again: the retry goes on from that ``since``, so none of their changes after it is missed.
Refused before anything is written: a keyless table (its changes count without order keys, so those between
``since`` and a high watermark would count twice) and a table whose columns ``schema_change_behavior='ignore'``
keeps (the rows read again have the server's). A captured table the server no longer has is no longer
captured (its ``!G`` record says so; the replica keeps its rows as of the lost checkpoint).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.verification.resnapshot import reread_current
from airflow_provider_mysqlcdc.exceptions import BinlogPositionLostError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.changelog import table_event_record
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.current_ddl import replaced_since
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

_log = logging.getLogger(__name__)


def resnapshot_lost_range(
    lake: Lake, store: StreamStore, config: ConnectionConfig, server_id: int, control: Any,
    checkpoint: Checkpoint, lost: BinlogPositionLostError,
) -> None:
    """Read every table ``checkpoint`` captures again and commit the batch that goes on past the lost range;
    ``checkpoint`` is advanced in place (the lease is held). ``server_id``: the binlog reader id of the
    chunks' fix-ups (the stream's own: it is not reading meanwhile)."""
    started = time.monotonic()
    seq = checkpoint.seq + 1
    tables = sorted(checkpoint.schemas)
    present = load_table_schemas(control, tables)
    _refuse(checkpoint, [present[t] for t in tables if t in present])
    since = _since(lake, control, tables, seq)
    visible_seq = checkpoint.visible[0]
    if visible_seq < checkpoint.seq:  # a transaction committed in part before the loss: its rest is lost with it
        removed = store.remove_uncommitted(replace(checkpoint, seq=visible_seq))
        _log.warning("removed the %d changelog rows of the part of a transaction committed before the loss (batches "
                     "%d-%d): its rest is purged, and nobody may read part of a transaction", removed,
                     visible_seq + 1, checkpoint.seq)
    checkpoint.advance(seq, since)
    records = {}
    for table in tables:
        schema = present.get(table)
        if schema is None:  # gone from the server in the lost range: its DROP or RENAME is purged with it
            old = checkpoint.schemas.pop(table)
            checkpoint.stopped[table] = StoppedTable(old, since, [], f"gone from the server ({lost.lost_range})")
            checkpoint.chunks.pop(table, None)
            note = f"{lost.lost_range}; {table} is no longer on the server: no longer captured"
            records[table] = [table_event_record(old, ChangeKind.GAP, note, since, int(time.time() * 1000))]
            _log.warning("%s; the lake keeps its rows as of the lost checkpoint", note)
            continue
        checkpoint.schemas[table] = schema
        checkpoint.chunks.pop(table, None)  # read whole again: no snapshot chunk is pending any more
        highest = reread_current(config, lake, table, present.__getitem__, seq, server_id, since)
        checkpoint.history_from[table] = highest
        note = f"{lost.lost_range}; the table was read again from {since} (its rows as of {highest} at the latest)"
        records[table] = [table_event_record(schema, ChangeKind.GAP, note, since, int(time.time() * 1000))]
    store.commit(checkpoint, records)
    _log.warning("%s: read %d tables again in %.1f s; the stream goes on from %s, each changelog marks the lost "
                 "range with a !G record", lost.lost_range, len(tables), time.monotonic() - started, since)


def _refuse(checkpoint: Checkpoint, schemas: list[TableSchema]) -> None:
    """The tables a re-read cannot replace exactly, refused before anything is written."""
    keyless = [str(s.id) for s in schemas if s.keyless]
    kept = sorted(str(t) for t in checkpoint.kept if t in checkpoint.schemas)
    if keyless or kept:
        what = (f"the keyless tables {keyless} (their changes count without order keys, so the changes the stream "
                f"reads while a table is read again would count twice)" if keyless else
                f"{kept}, whose lake keeps the columns schema_change_behavior 'ignore' kept (the rows read again "
                f"have the server's)")
        raise TableNotSupportedError(
            f"on_position_lost 'resnapshot' cannot read {what} again exactly; nothing was written. Take them anew by "
            f"hand: run the stream once without them in tables, delete their folders <db>/<table> in the lake, add "
            f"them back (the split and snapshot read them), or set on_position_lost to 'archive'")


def _since(lake: Lake, control: Any, tables: list[TableId], seq: int) -> BinlogOffset:
    """Where the stream goes on from: the position a killed recovery took before its re-reads, when it
    replaced a table already (the tables it replaced are as of after it), else the server's position now."""
    for table in tables:
        since = replaced_since(lake.table(table).current, seq)
        if since is not None:
            _log.info("a recovery killed after re-reading %s goes on from its position %s", table, since)
            return since
    return read_current_offset(control, ServerInfo.read(control), with_gtid=False)
