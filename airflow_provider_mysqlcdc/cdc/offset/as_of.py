"""A source position to read the replica as of: a binlog offset, a GTID position or a commit time.

``AsOf.parse`` takes a :class:`BinlogOffset`, ``"file:pos"``, a GTID position or set, a
``datetime`` or epoch milliseconds. Offsets order as ``BinlogOffset.compare`` does (file and position;
the changelog keeps no GTIDs). A GTID position names transactions, not bytes: :func:`resolve_as_of`
turns it (or a time) into the offset right after the last transaction it covers, by scanning the
source's binlog the way a ``specific-offset`` stream start does.

Parsing and resolving are the source's business, not the lake's: :func:`resolve_as_of` opens a
connection to the source and scans its binlog, so it lives in the core; ``lake.read.as_of_read`` reads the lake
at the offset (or time) it is given.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TypeAlias

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, binlog_files
from airflow_provider_mysqlcdc.cdc.offset.startup import (
    covered_by_gtids,
    find_first_uncovered,
    parse_file_position,
    parse_specific_offset,
    parse_timestamp_ms,
    scan_transactions,
)
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


@dataclass(frozen=True)
class AsOf:
    """One source position, parsed once: exactly one of ``offset``, ``gtid`` (text, resolved on the
    server by :func:`resolve_as_of`) and ``timestamp_ms`` (epoch milliseconds, UTC) is set."""

    offset: BinlogOffset | None = None
    gtid: str | None = None
    timestamp_ms: int | None = None

    def __post_init__(self) -> None:
        if sum(v is not None for v in (self.offset, self.gtid, self.timestamp_ms)) != 1:
            raise InvalidOptionError("AsOf takes exactly one of offset, gtid and timestamp_ms")

    @classmethod
    def parse(cls, value: AsOfValue) -> AsOf:
        """``value``: an AsOf, a BinlogOffset, ``"mysql-bin.000003:4"``, a MariaDB GTID position
        (``"0-1-100"``) or MySQL GTID set (``"uuid:1-100"``, tagged ``"uuid:tag:1-5"``), a datetime (naive = UTC), or
        epoch ms."""
        if isinstance(value, AsOf):
            return value
        if isinstance(value, BinlogOffset):
            return cls(offset=value)
        if isinstance(value, dt.datetime) or (isinstance(value, int) and not isinstance(value, bool)):
            return cls(timestamp_ms=parse_timestamp_ms(value))
        if isinstance(value, str) and value.strip():
            text = value.strip()
            if ":" in text and text.rsplit(":", 1)[1].isdigit() and "." in text.rsplit(":", 1)[0]:
                return cls(offset=parse_file_position(text, "as_of"))
            for flavor in ("mariadb", "mysql"):
                try:
                    parse_specific_offset(text, flavor)
                except InvalidOptionError:
                    continue
                return cls(gtid=text)
        raise InvalidOptionError(
            f"as_of must be a binlog offset ('mysql-bin.000003:4' or a BinlogOffset), a GTID position "
            f"('0-1-100') or set ('uuid:1-100'), a datetime or epoch milliseconds, not {value!r}"
        )

    def __str__(self) -> str:
        if self.offset is not None:
            return f"offset {self.offset}"
        if self.gtid is not None:
            return f"GTIDs {self.gtid}"
        moment = dt.datetime.fromtimestamp((self.timestamp_ms or 0) / 1000, dt.UTC)
        return f"time {moment.isoformat()} ({self.timestamp_ms} ms)"


AsOfValue: TypeAlias = AsOf | BinlogOffset | str | dt.datetime | int
"""What an ``as_of`` argument may be (``AsOf.parse``): an ``AsOf``, a ``BinlogOffset`` or ``"file:pos"``, a GTID
position or set (text), a ``datetime`` (naive = UTC) or epoch milliseconds. Anything else is an
``InvalidOptionError``."""


def resolve_as_of(as_of: AsOfValue, config: ConnectionConfig, server_id: int) -> AsOf:
    """``as_of`` as a binlog offset of the source: a GTID position or a time becomes the start of the
    first transaction it does not cover (the GTID not in it; committed after the time), found by
    scanning the binlog's transactions (no rows decoded) with binlog reader id ``server_id``."""
    point = AsOf.parse(as_of)
    if point.offset is not None:
        return point
    control = config.connect()
    try:
        server = ServerInfo.read(control)
        if point.gtid is not None:
            parsed = parse_specific_offset(point.gtid, server.flavor)
            assert not isinstance(parsed, BinlogOffset)
            covered = covered_by_gtids(parsed)
        else:
            millis = point.timestamp_ms
            covered = lambda txn: txn.commit_ms <= (millis or 0)  # noqa: E731
        offset = find_first_uncovered(binlog_files(control),
                                      lambda file: scan_transactions(config, server_id, server, control, file),
                                      covered, server.flavor)
    finally:
        control.close()
    return AsOf(offset=offset)
