"""``on_position_lost='archive'``: the binlog range the server purged, read from archived copies of its files.

The server purged the binlog file of the stream's checkpoint, with transactions after it. An archive of the
binlog (``binlog_archive_uri``: a local folder or an object-store prefix, as ``mysqlbinlog
--read-from-remote-server --raw`` writes it, reached with the lake's storage options) may still hold that range.
The stream then reads it with its own batch machinery, as it reads the server (its batches committed as any, its
DDLs applied), from the checkpoint's point in the archive (``cdc.offset.archived_start``: by GTIDs, or by file
and position without them) to the archive's end, and hands the checkpoint over to the server: there it must be a
point the server's binlog has, or the archive did not reach the server's binlog and the stream stops, what it read
committed (the lake is consistent as of that checkpoint).

Positions read from an archive are the archive's. They are this server's only when the archive is a copy of this
server's binlog, which shows where the checkpoint is found (``archived_start``): at its own file and position.
Else (a copy from another server of the replication topology, or renamed files) the end is found on the server
by its GTIDs, and such an archive is refused unless its positions order as the lake orders changes: by binlog
file number and position (the changelog's ``_binlog_file``, ``_binlog_pos``, which the MERGE compares, and the
snapshot's high watermarks, which the emit filter compares while the stream has not passed them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.offset.archived_start import archived_start
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, binlog_files, file_index
from airflow_provider_mysqlcdc.cdc.offset.startup import Transaction, reanchor, scan_transactions
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_batches import CaughtUp, StreamCommit
from airflow_provider_mysqlcdc.exceptions import BinlogPositionLostError, ServerChangedError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake

_log = logging.getLogger(__name__)


class ArchiveCatchUp:
    """The archive of ``options.binlog_archive_uri`` for the checkpoint ``lost`` names: ``start`` finds the
    checkpoint in it, ``read`` counts the commits of the read, ``hand_over`` brings the checkpoint to the server."""

    def __init__(self, options: StreamOptions, config: ConnectionConfig, server_id: int,
                 lost: BinlogPositionLostError) -> None:
        self._uri = str(options.binlog_archive_uri)
        place = Lake.at(self._uri, options.storage_options)  # the lake's way to a filesystem with these options
        # a URI as given (its errors name it; the filesystem takes its path), a local folder made absolute
        self.files = BinlogFiles.in_folder(self._uri if "://" in self._uri else place.root, place.fs)
        self._config, self._server_id, self._lost = config, server_id, lost
        self._own = False  # whether the archive's positions are the checkpoint server's

    def _describe(self) -> str:
        names = self.files.names
        return f"the binlog archive at {self._uri} ({names[0]} .. {names[-1]})"

    def start(self, control: Any, checkpoint: Checkpoint) -> BinlogOffset:
        """The checkpoint's offset in the archive, or ``BinlogPositionLostError`` when the archive lacks it."""
        offset, server = checkpoint.offset, ServerInfo.read(control)

        def transactions(file: str) -> Iterator[Transaction]:
            return scan_transactions(self._config, self._server_id, server, control, file, self.files.open)

        start = archived_start(self.files.names, transactions, offset)
        if start is None:
            needed = (f"none of its transactions is one the checkpoint's GTIDs ({offset.gtid}) cover, so it may "
                      f"begin after the checkpoint: it must reach back to the checkpoint's binlog file {offset.file} "
                      f"(or the file of another server that holds the same transactions)" if offset.gtid else
                      f"the checkpoint has no GTIDs, so the archive must hold its binlog file {offset.file} under "
                      f"that name")
            raise BinlogPositionLostError(
                f"on_position_lost is 'archive', but {self._describe()} does not hold the stream's checkpoint "
                f"{offset}: {needed}. Nothing was written: the lake holds the tables as of the checkpoint. The "
                f"server's oldest binlog starts at {self._lost.oldest}", self._lost.checkpoint, self._lost.oldest)
        self._own = (start.file, start.position) == (offset.file, offset.position)  # a copy of its own binlog
        if not self._own:
            self._refuse_foreign(checkpoint, start)
        _log.info("reading %s from %s:%d, the stream's checkpoint %s (found %s)", self._describe(), start.file,
                  start.position, offset, "by its GTIDs" if offset.gtid else "by its file and position")
        return start

    def _refuse_foreign(self, checkpoint: Checkpoint, start: BinlogOffset) -> None:
        """An archive that is not a copy of the checkpoint's binlog (another server's, renamed files) is read only
        if its positions order as the lake orders changes: the snapshot's high watermarks (positions of the
        checkpoint's binlog) are passed, and the archive's files number between the checkpoint's file and the
        server's oldest (the changelog and the MERGE order changes by file number and position)."""
        offset, oldest, names = checkpoint.offset, self._lost.oldest.rsplit(":", 1)[0], self.files.names
        where = (f"{self._describe()} is not a copy of the checkpoint's own binlog (the checkpoint {offset} is at "
                 f"{start.file}:{start.position} there)")
        if checkpoint.chunks:
            problem = (f"the stream has not yet passed the snapshot's high watermarks of "
                       f"{sorted(map(str, checkpoint.chunks))}, positions in the checkpoint's binlog")
        elif start.file_order < offset.file_order or (
                oldest != "none" and file_index(names[-1]) >= file_index(oldest)):
            problem = (f"its files' numbers do not lie between the checkpoint's {offset.file}:{offset.position} and "
                       f"the server's oldest binlog {oldest}, and the lake orders changes by binlog file number and "
                       f"position (_binlog_file, _binlog_pos): give the archived files the numbers they had on the "
                       f"server")
        else:
            return
        raise BinlogPositionLostError(
            f"on_position_lost is 'archive', but {where}, and {problem}. Nothing was written: the lake holds the "
            f"tables as of the checkpoint. Archive the server's own binlog files, or set on_position_lost to "
            f"'resnapshot'", self._lost.checkpoint, self._lost.oldest)

    def read(self, batches: Iterable[StreamCommit | CaughtUp],
             account: Callable[[StreamCommit, StreamProgress], None], checkpoint: Checkpoint) -> None:
        """Commit ``batches`` (the archive's, not following) to the archive's end, each one ``account``ed."""
        progress = StreamProgress.start()
        for item in batches:
            if isinstance(item, StreamCommit):
                account(item, progress)
        _log.info("read %s to its end at %s: %d %s, %d changelog rows committed", self._describe(),
                  checkpoint.offset, progress.batches, "batch" if progress.batches == 1 else "batches", progress.rows)

    def hand_over(self, control: Any, offset: BinlogOffset,
                  kept_position: Callable[[BinlogOffset], BinlogOffset]) -> BinlogOffset:
        """``offset`` (the archive's end) as a point of the server's binlog: ``kept_position`` for an archive of
        this server's own binlog, else found by its GTIDs; ``BinlogPositionLostError`` when the archive ends
        before the server's binlog starts."""
        server = ServerInfo.read(control)
        try:
            if self._own:
                live = kept_position(offset)
            else:
                live = replace(reanchor(control, server, self._config, self._server_id, offset), server=offset.server)
        except (BinlogPositionLostError, ServerChangedError) as exc:
            files = binlog_files(control)
            oldest = f"{files[0]}:4" if files else "none"
            raise BinlogPositionLostError(
                f"{self._describe()} ends at {offset}, and the server's binlog starts at {oldest}: the changes "
                f"between them are in neither. What was read from the archive is committed: the lake holds the "
                f"tables as of {offset}, readable as they are. Add the missing binlog files to the archive and run "
                f"the stream again (it goes on from its checkpoint in the archive), or set on_position_lost to "
                f"'resnapshot'", str(offset), oldest) from exc
        _log.info("the server's binlog takes over from %s at %s:%d", self._uri, live.file, live.position)
        return live
