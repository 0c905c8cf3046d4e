"""Binlog offsets: where a watermark was taken, where a change sits, and where to resume.

An offset names a point between transactions by binlog file and position and, where the server
has them, by GTIDs, which survive binlog rotation and failover. Inside a transaction it adds how
many row events and rows of the next transaction were already consumed, so a restart in the
middle of a large transaction neither loses nor repeats rows. A change record's offset is the
point to resume *after* it: the start of its transaction, the GTIDs executed before it, and the
row events / rows consumed up to and including it. It therefore sorts after every offset taken
before its transaction began (such as a high watermark that does not include it) and before any
offset taken after its transaction committed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.source.server_info import MARIADB, MYSQL, ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

_FILE_INDEX = re.compile(r"\.(\d+)$")


@lru_cache(maxsize=1024)
def file_index(name: str) -> int:
    """The numeric suffix of a binlog file: ``mysql-bin.000010`` comes after ``mysql-bin.000009``."""
    match = _FILE_INDEX.search(name)
    if not match:
        raise InvalidOptionError(f"{name!r} is not a binlog file name (expected e.g. 'mysql-bin.000003')")
    return int(match.group(1))


@lru_cache(maxsize=4096)
def _parsed_gtid(flavor: str, text: str) -> GtidSet | MariaDbGtidPosition:
    """The stream compares every event's offset with chunk watermarks that repeat: parse each once."""
    return GtidSet.parse(text) if flavor == MYSQL else MariaDbGtidPosition.parse(text)


@dataclass(frozen=True)
class BinlogOffset:
    """A point in the binlog, ordered by ``compare`` (and ``<``, ``<=``, ...).

    GTIDs decide when both offsets have them, of one flavour, and one contains the other; equal
    GTIDs leave it to the skips. Otherwise (no GTIDs, or sets that are incomparable after a failover
    to a server that lacks some of the old one's transactions) file index and position decide, as in
    Flink CDC; across a failover that fallback is only a guess, so such offsets should not be mixed.
    ``==`` compares fields: two offsets can be equal in order (``compare() == 0``) with different
    files, e.g. the end of one binlog file and the start of the next.
    """

    file: str
    position: int
    gtid: str | None = None
    """MySQL: the executed GTID set; MariaDB: the GTID position. ``None`` when the server has none."""
    flavor: str = MYSQL
    events_to_skip: int = 0
    rows_to_skip: int = 0
    server: str | None = None
    """Which server's binlog ``file``/``position`` belong to (:func:`server_identity`); ``None`` when not
    known. Positions mean nothing on another server: the stream re-anchors by GTID when this changes.
    Order ignores it."""

    def __post_init__(self) -> None:
        if self.flavor not in (MYSQL, MARIADB):
            raise InvalidOptionError(f"offset flavor must be 'mysql' or 'mariadb', not {self.flavor!r}")
        if self.position < 0 or self.events_to_skip < 0 or self.rows_to_skip < 0:
            raise InvalidOptionError(f"offset positions and skips cannot be negative: {self}")
        file_index(self.file)

    # -- order ---------------------------------------------------------------------------------

    def _gtid_order(self, other: BinlogOffset) -> int | None:
        """-1/0/1 by GTIDs, or None when they cannot decide (missing, other flavour, incomparable).

        Incomparable sets happen after a failover to a server that has not applied everything the
        old one had; like Flink CDC we then fall back to file and position.
        """
        if not self.gtid or not other.gtid or self.flavor != other.flavor:
            return None
        mine, theirs = _parsed_gtid(self.flavor, self.gtid), _parsed_gtid(other.flavor, other.gtid)
        below, above = mine.issubset(theirs), theirs.issubset(mine)  # type: ignore[arg-type]
        if below and above:
            return 0
        if below:
            return -1
        if above:
            return 1
        return None

    @property
    def file_order(self) -> tuple[int, int]:
        """Where this offset sorts by binlog file number and position, whatever its GTIDs: as the lake orders
        changes (the changelog's ``_binlog_file``, ``_binlog_pos``, which the MERGE compares)."""
        return file_index(self.file), self.position

    def compare(self, other: BinlogOffset) -> int:
        by_gtid = self._gtid_order(other)
        if by_gtid is None:
            mine: tuple[int, ...] = (file_index(self.file), self.position)
            theirs: tuple[int, ...] = (file_index(other.file), other.position)
        elif by_gtid != 0:
            return by_gtid
        else:
            mine, theirs = (), ()
        mine += (self.events_to_skip, self.rows_to_skip)
        theirs += (other.events_to_skip, other.rows_to_skip)
        return (mine > theirs) - (mine < theirs)

    def __lt__(self, other: BinlogOffset) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: BinlogOffset) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: BinlogOffset) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: BinlogOffset) -> bool:
        return self.compare(other) >= 0

    def at_transaction_start(self) -> BinlogOffset:
        return replace(self, events_to_skip=0, rows_to_skip=0)

    # -- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Without ``server`` while unknown, so offsets read off a server keep their old layout. Field by field:
        ``dataclasses.asdict`` took a tenth of a small table's snapshot commit (its manifest's offsets)."""
        d = {name: getattr(self, name) for name in _OFFSET_FIELDS}
        if d["server"] is None:
            del d["server"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinlogOffset:
        return cls(**d)

    def __str__(self) -> str:
        text = f"{self.file}:{self.position}"
        if self.gtid:
            text += f" gtid={self.gtid}"
        if self.events_to_skip or self.rows_to_skip:
            text += f" (+{self.events_to_skip} events, +{self.rows_to_skip} rows)"
        return text


_OFFSET_FIELDS = tuple(f.name for f in fields(BinlogOffset))


# -- reading offsets from the server ---------------------------------------------------------------


def _mariadb_gtid_at(cur: Any, file: str, position: int, with_gtid: bool) -> str | None:
    """``BINLOG_GTID_POS(file, pos)`` is exact for that point, unlike ``@@gtid_binlog_pos`` read apart.

    It reads the binlog file up to the position (4 ms at 1 MB here, growing with the file), so
    watermarks that only order against each other on one server skip it (``with_gtid=False``).
    """
    if not with_gtid:
        return None
    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
    row = cur.fetchone()
    return (row[0] or None) if row else None


def read_current_offset(conn: Any, server: ServerInfo, with_gtid: bool = True) -> BinlogOffset:
    """The offset after the last transaction written to the binlog (a watermark)."""
    with conn.cursor() as cur:
        cur.execute(server.binary_log_status_sql)
        row = cur.fetchone()
        if row is None:
            raise SourceConfigError(
                "the server reports no binary log status: the binlog is off; start the server with "
                "log_bin (and binlog_format=ROW, binlog_row_image=FULL)"
            )
        file, position = row[0], int(row[1])
        if server.is_mariadb:
            return BinlogOffset(file, position, _mariadb_gtid_at(cur, file, position, with_gtid), MARIADB)
        executed = row[4] if len(row) > 4 else ""
        return BinlogOffset(file, position, str(GtidSet.parse(executed)) or None, MYSQL)


def read_snapshot_offset(conn: Any, with_gtid: bool = True) -> BinlogOffset:
    """MariaDB: the binlog offset of the caller's ``START TRANSACTION WITH CONSISTENT SNAPSHOT``.

    It stays frozen while other sessions commit, and every transaction before it is visible in the
    snapshot: the low watermark that closes the commit-visibility race.
    """
    with conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {name.lower(): value for name, value in cur.fetchall()}
        file, position = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
        if not file or position is None:
            raise SourceConfigError("the server has no binlog snapshot status: the binlog is off; set log_bin")
        return BinlogOffset(file, int(position), _mariadb_gtid_at(cur, file, int(position), with_gtid), MARIADB)


def server_identity(conn: Any, server: ServerInfo) -> str:
    """What tells this server's binlog apart from another's: MySQL's ``server_uuid`` (new with every
    data directory), MariaDB's ``server_id`` (it has no UUID; replication requires distinct ids).
    A server rebuilt under the same MariaDB id is caught by its GTIDs instead (``gtid_at``)."""
    with conn.cursor() as cur:
        if server.is_mariadb:
            cur.execute("SELECT @@server_id")
            return f"mariadb server_id={cur.fetchone()[0]}"
        cur.execute("SELECT @@server_uuid")
        return f"mysql server_uuid={cur.fetchone()[0]}"


def gtid_at(conn: Any, file: str, position: int) -> str | None:
    """MariaDB: the GTID position at ``file:position`` of this server's binlog, '' for a binlog
    without GTIDs yet, ``None`` when the file is not there or the position is no transaction
    boundary. Reads the file up to the position (about 4 ms a MB)."""
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
        row = cur.fetchone()
    return None if row is None or row[0] is None else str(row[0])


def binlog_files(conn: Any) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [row[0] for row in cur.fetchall()]


def check_offset_available(conn: Any, offset: BinlogOffset) -> None:
    """A purged start offset means changes were lost to us: fail, never skip ahead silently."""
    files = binlog_files(conn)
    if offset.file not in files:
        raise SourceConfigError(
            f"binlog file {offset.file} (offset {offset}) is no longer on the server (it has "
            f"{files[0] if files else 'none'} .. {files[-1] if files else 'none'}): the changes since then "
            f"are lost to CDC. Re-snapshot the tables, and keep binlogs longer "
            f"(binlog_expire_logs_seconds / expire_logs_days) than the pipeline may stop."
        )
