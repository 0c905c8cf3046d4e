"""Where a stream without a checkpoint starts: Flink CDC's ``scan.startup.mode`` minus ``initial``.

``latest-offset`` and ``earliest-offset`` are read off the server. ``specific-offset`` takes a
``file:position`` as it is, but a GTID set or position (``uuid:1-5`` on MySQL, ``0-1-100`` on
MariaDB) and ``timestamp`` name transactions, not bytes: they are found from the binlog reader's
commit markers (GTID and commit time of each transaction) with no table captured, so no row is
decoded. Binlog files are searched by their first transaction (a binary search, one short
connection per probe), then the chosen file is scanned to the first transaction that is not
covered: the stream starts right before it.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import (
    BinlogOffset,
    binlog_files,
    gtid_at,
    read_current_offset,
    server_identity,
)
from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import MARIADB, MYSQL, ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, ServerChangedError

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.binlog.dump import EventStream

_log = logging.getLogger(__name__)


class StartupMode(enum.StrEnum):
    """Where a new stream starts (Flink CDC's ``scan.startup.mode``)."""

    INITIAL = "initial"  # from the snapshot's high watermarks
    SNAPSHOT = "snapshot"  # no stream at all
    LATEST = "latest-offset"
    EARLIEST = "earliest-offset"
    SPECIFIC = "specific-offset"
    TIMESTAMP = "timestamp"

    @classmethod
    def parse(cls, value: Any) -> StartupMode:
        try:
            return cls(value)
        except ValueError:
            raise InvalidOptionError(
                f"startup_mode must be one of {[m.value for m in cls]}, not {value!r}"
            ) from None

_FILE_POSITION = re.compile(r"^(?P<file>[^\s:]+\.\d+):(?P<position>\d+)$")
_MARIADB_POSITION = re.compile(r"^\s*\d+-\d+-\d+(\s*,\s*\d+-\d+-\d+)*\s*$")


@dataclass(frozen=True)
class Transaction:
    """One transaction of the binlog: where it starts and ends, its GTID (if any), its commit time."""

    start: BinlogOffset
    end: BinlogOffset
    gtid: str | None
    commit_ms: int


Covered = Callable[[Transaction], bool]


def start_offset(
    mode: StartupMode,
    control: Any,
    server: ServerInfo,
    config: ConnectionConfig,
    server_id: int,
    startup_offset: str | None = None,
    startup_timestamp: Any = None,
) -> BinlogOffset:
    """The first offset of a stream started in ``mode`` (one that starts from the binlog alone)."""
    if mode is StartupMode.LATEST:
        return read_current_offset(control, server, with_gtid=False)
    if mode is StartupMode.EARLIEST:
        return BinlogOffset(binlog_files(control)[0], 4, flavor=server.flavor)

    def transactions(file: str) -> Iterator[Transaction]:
        return scan_transactions(config, server_id, server, control, file)

    if mode is StartupMode.SPECIFIC:
        parsed = parse_specific_offset(startup_offset, server.flavor)
        if isinstance(parsed, BinlogOffset):
            return parsed
        return find_first_uncovered(binlog_files(control), transactions, covered_by_gtids(parsed), server.flavor)
    if mode is StartupMode.TIMESTAMP:
        millis = parse_timestamp_ms(startup_timestamp)
        files = binlog_files(control)
        offset = find_first_uncovered(files, transactions, lambda txn: txn.commit_ms < millis, server.flavor)
        if offset.file == files[0] and offset.position <= 4:
            _log.warning("startup_timestamp %s is not after the oldest binlog's first transaction: the stream starts "
                         "at the oldest binlog still on the server (%s); older changes may have been purged",
                         startup_timestamp, files[0])
        return offset
    raise InvalidOptionError(f"startup_mode {mode.value!r} does not start from the binlog alone")


def parse_file_position(text: str, option: str, flavor: str = MYSQL) -> BinlogOffset:
    """``binlog-file:position``, as ``startup_offset`` and ``stop_at_offset`` take it."""
    match = _FILE_POSITION.match(text.strip())
    if not match:
        raise InvalidOptionError(f"{option} must be 'binlog-file:position' (e.g. 'mysql-bin.000003:4'), not {text!r}")
    return BinlogOffset(match.group("file"), int(match.group("position")), flavor=flavor)


def parse_specific_offset(text: str | None, flavor: str) -> BinlogOffset | GtidSet | MariaDbGtidPosition:
    """``file:position``, or the GTIDs already captured: a MySQL GTID set or a MariaDB GTID position."""
    value = (text or "").strip()
    if _FILE_POSITION.match(value):
        return parse_file_position(value, "startup_offset", flavor)
    if value and _MARIADB_POSITION.match(value):
        if flavor != MARIADB:
            raise InvalidOptionError(f"startup_offset {value!r} is a MariaDB GTID position, but the server is MySQL")
        return MariaDbGtidPosition.parse(value)
    try:
        gtids = GtidSet.parse(value) if value else None
    except InvalidOptionError:
        gtids = None
    if gtids is None:
        raise InvalidOptionError(
            f"startup_offset must be 'binlog-file:position' (e.g. 'mysql-bin.000003:4'), a MySQL GTID set "
            f"('uuid:1-100', with tags 'uuid:1-100:tag:1-5') or a MariaDB GTID position ('0-1-100'), not {text!r}"
        )
    if flavor != MYSQL:
        raise InvalidOptionError(f"startup_offset {value!r} is a MySQL GTID set, but the server is MariaDB")
    return gtids


def parse_timestamp_ms(value: Any) -> int:
    """Epoch milliseconds, or an ISO 8601 time (a naive one is UTC), as Airflow templates render it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    text = value.strip() if isinstance(value, str) else ""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidOptionError(
            f"startup_mode 'timestamp' needs startup_timestamp as epoch milliseconds or an ISO 8601 time "
            f"(e.g. '2026-11-22T10:00:00+00:00'), not {value!r}"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def covered_by_gtids(gtids: GtidSet | MariaDbGtidPosition) -> Covered:
    """A transaction is covered when its GTID (``uuid:n``, or ``uuid:tag:n`` on MySQL 8.3+) is in the set (MySQL)
    or at or before the position (MariaDB).

    A transaction without a GTID (MySQL without gtid_mode) is never covered: the set cannot vouch
    for it, so the stream starts there rather than skip it.
    """
    if isinstance(gtids, GtidSet):
        return lambda txn: txn.gtid is not None and gtids.contains(txn.gtid)
    return lambda txn: txn.gtid is not None and MariaDbGtidPosition.parse(txn.gtid).issubset(gtids)


def find_first_uncovered(
    files: list[str], transactions: Callable[[str], Iterator[Transaction]], covered: Covered, flavor: str
) -> BinlogOffset:
    """The start of the first transaction that ``covered`` rejects, or the binlog's end if there is none.

    ``transactions(file)`` gives the transactions from the start of ``file`` on, through the later
    files. ``covered`` must hold for a prefix of the binlog (GTIDs and commit times grow with it).
    Files are bisected by the first transaction from them on; when none is left, the probe counts
    as uncovered, which only moves the scan to an earlier file, never past a transaction it should
    return.
    """
    low, high = 0, len(files) - 1  # invariant: the answer lies in files[low:]
    while low < high:
        middle = (low + high + 1) // 2
        first = next(transactions(files[middle]), None)
        if first is not None and covered(first):
            low = middle
        else:
            high = middle - 1
    end = BinlogOffset(files[low], 4, flavor=flavor)
    for txn in transactions(files[low]):
        if not covered(txn):
            return txn.start
        end = txn.end
    return end


def scan_transactions(
    config: ConnectionConfig, server_id: int, server: ServerInfo, control: Any, file: str,
    events: Callable[[str, int], EventStream] | None = None,
) -> Iterator[Transaction]:
    """The transactions from the start of ``file`` to the binlog's current end: the binlog reader's
    commit markers, with no table captured (so no row is decoded). ``events`` reads other binlog files
    than the server's (``BinlogReader``'s, e.g. an archive's ``BinlogFiles.open``)."""
    # imported here: the stream operator imports this module's constants at DAG-parse time
    from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, Committed
    from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema

    start = BinlogOffset(file, 4, flavor=server.flavor)
    reader = BinlogReader(config.replication_settings(), server_id, config.server_id, {}, start,
                          reload_schema=lambda table: load_table_schema(control, table), events=events)
    for item in reader:
        if isinstance(item, Committed):
            yield Transaction(start, item.offset, item.gtid, item.ts_ms)
            start = item.offset


# -- the stream's offset on the server the connection reaches now ---------------------------------


def _gtids(flavor: str, text: str) -> GtidSet | MariaDbGtidPosition:
    return GtidSet.parse(text) if flavor == MYSQL else MariaDbGtidPosition.parse(text)


def _covers(big: GtidSet | MariaDbGtidPosition, small: GtidSet | MariaDbGtidPosition) -> bool:
    return small.issubset(big)  # type: ignore[arg-type]


def anchor(
    control: Any, server: ServerInfo, config: ConnectionConfig, server_id: int, offset: BinlogOffset
) -> BinlogOffset:
    """``offset`` (a checkpoint's) made valid on the server ``control`` reaches, with its GTIDs and identity.

    On the server the offset was taken on, it gains what it lacks: the server's identity, and on
    MariaDB the GTID position at its file and position (snapshot watermarks are read without one,
    for speed), which the binlog reader then advances at every commit, so that every committed
    offset carries GTIDs. On MySQL the executed set comes with ``SHOW MASTER STATUS`` offsets
    (``initial``, ``latest-offset``); other startup offsets on MySQL stay without one.

    On another server (a failover, an edited connection: another identity, or on MariaDB a GTID
    position at that file and position that differs or does not exist) file and position mean
    nothing. The offset's GTIDs then find the same point in this server's binlog
    (:func:`reanchor`); without GTIDs that is impossible and a ``ServerChangedError`` says what to do.
    """
    identity = server_identity(control, server)
    here = gtid_at(control, offset.file, offset.position) if server.is_mariadb else None
    same = offset.flavor == server.flavor and offset.server in (None, identity)
    if same and server.is_mariadb and offset.gtid is not None:
        same = here is not None and _covers(_gtids(MARIADB, here), _gtids(MARIADB, offset.gtid)) and _covers(
            _gtids(MARIADB, offset.gtid), _gtids(MARIADB, here))
    if same:
        gtid = offset.gtid if offset.gtid is not None else here
        return replace(offset, gtid=gtid, server=identity)
    if not offset.gtid or offset.flavor != server.flavor:
        raise ServerChangedError(
            f"the stream's checkpoint {offset} is a position in the binlog of "
            f"{offset.server or 'another server'}, but the mysql_cdc connection now reaches {identity} "
            f"({server.flavor}), and the checkpoint has no GTIDs to find the same point there: file and "
            f"position cannot be carried over. Point the connection back at the old server, or enable GTIDs "
            f"(MySQL: gtid_mode=ON, enforce_gtid_consistency=ON) and re-snapshot the tables on this server "
            f"(a new lake, or startup_mode 'initial' after new snapshot tasks)."
        )
    anchored = reanchor(control, server, config, server_id, offset)
    anchored = replace(anchored, server=identity)
    check_sorts_after(offset, anchored)
    _log.warning("the mysql_cdc connection now reaches %s, not %s: the stream continues from GTIDs %s at %s "
                 "(was %s on the old server)", identity, offset.server or "the checkpoint's server",
                 anchored.gtid, f"{anchored.file}:{anchored.position}", f"{offset.file}:{offset.position}")
    return anchored


def check_sorts_after(checkpoint: BinlogOffset, moved: BinlogOffset) -> None:
    """Refuse a checkpoint moved to another server's binlog at a point numbered below it. The lake orders
    changes by binlog file number and position (the changelog's ``_binlog_file``, ``_binlog_pos``; the MERGE
    takes a change only when it is newer than the row it replaces), so the new server's changes would sort
    before those the lake holds and lose to them: the replica would stop following the source, silently."""
    if moved.file_order >= checkpoint.file_order:
        return
    raise ServerChangedError(
        f"the mysql_cdc connection reaches another server than the stream's checkpoint came from, and the same "
        f"point of its binlog, {moved.file}:{moved.position}, is numbered below the checkpoint's "
        f"{checkpoint.file}:{checkpoint.position}: the lake orders changes by binlog file number and position, so "
        f"this server's changes would sort before the lake's and lose to them. Nothing was written. Point the "
        f"connection at a server whose binlog is numbered past {checkpoint.file} at that point, or take the tables "
        f"anew on this server (delete the lake and run the DAG)"
    )


def reanchor(
    control: Any, server: ServerInfo, config: ConnectionConfig, server_id: int, offset: BinlogOffset
) -> BinlogOffset:
    """The point of this server's binlog right after the transactions in ``offset.gtid``, with its skips.

    The transactions are found as for a GTID ``startup_offset``: the start of the first transaction
    the GTIDs do not cover. The stream then reads by file and position again, as ever (no GTID-mode
    binlog connection, whose reconnects mysql-replication gets wrong on MariaDB). It refuses, rather
    than lose or repeat changes, when this server lacks some of those transactions (a replica that
    had not caught up), or, on MariaDB, when the binlog before that point holds other transactions
    than exactly those (purged binlogs; local writes in another replication domain before them).
    MySQL cannot be run here: its path follows the same steps on paper, with ``@@gtid_executed`` and
    ``@@gtid_purged`` for the checks.
    """
    assert offset.gtid
    wanted = _gtids(server.flavor, offset.gtid)
    with control.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos" if server.is_mariadb else "SELECT @@GLOBAL.gtid_executed")
        executed = _gtids(server.flavor, str(cur.fetchone()[0] or ""))
    if not _covers(executed, wanted):
        raise ServerChangedError(
            f"the mysql_cdc connection reaches another server than the stream's checkpoint came from, and it "
            f"lacks transactions the lake already has (checkpoint GTIDs {offset.gtid}, this server has "
            f"{executed}): it is not a caught-up replica of the old server. Wait until it has applied them, "
            f"point the connection at a server that has, or re-snapshot the tables."
        )
    files = binlog_files(control)

    def transactions(file: str) -> Iterator[Transaction]:
        return scan_transactions(config, server_id, server, control, file)

    start = find_first_uncovered(files, transactions, covered_by_gtids(wanted), server.flavor)
    if server.is_mariadb:
        before = gtid_at(control, start.file, start.position)
        parsed = _gtids(MARIADB, before or "")
        if before is None or not (_covers(wanted, parsed) and _covers(parsed, wanted)):
            raise ServerChangedError(
                f"the mysql_cdc connection reaches another server than the stream's checkpoint came from; the "
                f"checkpoint's GTID position {offset.gtid} is not a point of its binlog (at "
                f"{start.file}:{start.position} it has {before!r}): binlogs purged, or transactions of other "
                f"replication domains in between. Re-snapshot the tables."
            )
        gtid = str(parsed)
    else:
        if start.file == files[0] and start.position <= 4:
            with control.cursor() as cur:
                cur.execute("SELECT @@GLOBAL.gtid_purged")
                purged = GtidSet.parse(str(cur.fetchone()[0] or ""))
            if not purged.issubset(wanted):  # type: ignore[arg-type]
                raise ServerChangedError(
                    f"the server the mysql_cdc connection now reaches purged transactions the lake lacks "
                    f"(gtid_purged {purged}, checkpoint {offset.gtid}). Re-snapshot the tables."
                )
        gtid = offset.gtid
    return BinlogOffset(start.file, start.position, gtid, server.flavor, offset.events_to_skip, offset.rows_to_skip)
