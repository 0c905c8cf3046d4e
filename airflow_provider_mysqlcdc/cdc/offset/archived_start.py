"""Where a checkpoint's offset lies in archived copies of the binlog files.

The server purged the checkpoint's file; an archive of the binlog (``binlog.binlog_files``) may still hold
it. A checkpoint with GTIDs is found by them, not by file name: an archive copied from another server of the
same replication topology has other names and positions for the same transactions, and a renamed copy other
names. The start is the first archived transaction the checkpoint's GTIDs do not cover (``find_first_uncovered``,
as a GTID ``startup_offset`` is found on the server). Without GTIDs only the file and position can say where:
the archive must hold the checkpoint's file under its name.

An archive that holds the checkpoint's own file, where the GTIDs find no left-out transaction before the checkpoint's
position, is taken for a copy of its binlog: the read starts at the checkpoint's own file and position, as the
server's would (between the two lie only events outside transactions, a file's first events, and a change read
there must carry the offset the server's binlog gives it: the snapshot's high watermarks are compared with it).
An archive whose first transaction the checkpoint does not cover may begin after it (the transactions between
would be read by nobody), so it holds the checkpoint only if it also holds the checkpoint's own file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.offset.startup import Transaction, covered_by_gtids, find_first_uncovered
from airflow_provider_mysqlcdc.cdc.source.server_info import MYSQL

_FIRST_EVENT = 4  # where a binlog file's events start (after its magic bytes)


def archived_start(
    names: list[str], transactions: Callable[[str], Iterator[Transaction]], offset: BinlogOffset
) -> BinlogOffset | None:
    """``offset`` (a checkpoint's) in the archive of binlog files ``names`` (in binlog order), whose
    ``transactions(file)`` are those from ``file``'s start to the archive's end: its GTIDs, skips and server as
    they were, its file and position the archive's (``offset`` itself in a copy of its own binlog); None when
    the archive does not hold it."""
    if not offset.gtid:
        return offset if offset.file in names else None
    wanted = GtidSet.parse(offset.gtid) if offset.flavor == MYSQL else MariaDbGtidPosition.parse(offset.gtid)
    start = find_first_uncovered(names, transactions, covered_by_gtids(wanted), offset.flavor)
    if offset.file in names and start.file_order <= offset.file_order:
        return offset  # its own file, no transaction the GTIDs leave out before it: a copy of its binlog
    if (start.file, start.position) == (names[0], _FIRST_EVENT):
        return None  # no transaction before the checkpoint is in the archive: it may begin after the checkpoint
    return replace(offset, file=start.file, position=start.position)
