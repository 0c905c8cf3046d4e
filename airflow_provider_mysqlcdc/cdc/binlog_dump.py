"""The binlog dump: a replica's connection to the server, and the events it sends, parsed.

The connection is pymysql's (with the reader's connection settings, TLS included). Before the dump
the session declares what this replica understands: ``@master_binlog_checksum`` (events then carry
the server's CRC32, which is verified and stripped), ``@mariadb_slave_capability=4`` (MariaDB then
sends its GTID events as they are, rather than dummy events replacing them; MySQL ignores it) and,
for a blocking dump, ``@master_heartbeat_period`` (nanoseconds). COM_BINLOG_DUMP then asks for the
events from a file and position, with BINLOG_DUMP_NON_BLOCK unless the dump blocks: a non-blocking
dump ends with an EOF packet at the binlog's current end.

Errors are pymysql's, as the reader expects them: a lost connection raises OperationalError 2013,
a server refusing the dump (a purged binlog, a server id clash) the error it sent. pymysql's packet
reading (``_read_packet``, which joins packets of 16 MiB and raises the server's errors) and command
sending (``_execute_command``) are private: mysql-replication uses them the same way.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import pymysql
from pymysql.constants.COMMAND import COM_BINLOG_DUMP

from airflow_provider_mysqlcdc.cdc.binlog_events import (
    CHECKSUM,
    Event,
    Format,
    FormatDescription,
    Rotate,
    TableMap,
    parse,
)
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

_NON_BLOCK = 0x01
_MAX_HEARTBEAT_SECONDS = 4294967  # the period is a 32-bit count of milliseconds on the server
_OK, _EOF = 0x00, 0xFE


def checked_end(data: bytes, checksum: bool, log_file: str, log_pos: int) -> int:
    """Where the event in packet ``data`` ends: before its CRC32, which must match, if ``checksum``.
    ``log_file`` and ``log_pos`` are where the event before it ended (for the error)."""
    if not checksum:
        return len(data)
    end = len(data) - CHECKSUM
    if end < 0 or zlib.crc32(memoryview(data)[1:end]) != int.from_bytes(data[end:], "little"):
        raise RowDecodeError(f"the binlog event after {log_file}:{log_pos} fails its CRC32 checksum: the binlog or "
                             f"the connection damaged it")
    return end


class BinlogDump:
    """The events from ``log_file``/``log_pos`` on; ``log_file`` and ``log_pos`` follow them (the
    file and the position after the last event read)."""

    def __init__(self, settings: Mapping[str, Any], server_id: int, log_file: str, log_pos: int,
                 blocking: bool = False, heartbeat_seconds: float | None = None) -> None:
        self.log_file, self.log_pos = log_file, log_pos
        self.format = Format()
        self.checksum = False
        self._table_ids: dict[int, TableMap] = {}
        self._connection = pymysql.connect(**settings)
        try:
            self._start(server_id, blocking, heartbeat_seconds, settings.get("read_timeout"))
        except BaseException:
            self._connection.close()
            raise

    def _start(self, server_id: int, blocking: bool, heartbeat_seconds: float | None, read_timeout: Any) -> None:
        with self._connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_checksum'")  # no such variable before MySQL 5.6
            row = cursor.fetchone()
            self.checksum = row is not None and str(row[1]).upper() != "NONE"
            if self.checksum:
                cursor.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            if heartbeat_seconds:
                # the server drops a replica silent for its read timeout: beat at least twice in it
                seconds = min(heartbeat_seconds, float(read_timeout) / 2 if read_timeout else heartbeat_seconds,
                              _MAX_HEARTBEAT_SECONDS)
                cursor.execute("SET @master_heartbeat_period = %s", (int(seconds * 1_000_000_000),))
            cursor.execute("SET @mariadb_slave_capability = 4")
        flags = 0 if blocking else _NON_BLOCK
        command = struct.pack("<IHI", self.log_pos, flags, server_id) + self.log_file.encode()
        self._connection._execute_command(COM_BINLOG_DUMP, command)

    def __iter__(self) -> Iterator[Event]:
        """The events, until the end of the binlog (non-blocking) or the connection's end."""
        read_packet, checksum = self._connection._read_packet, self.checksum
        table_ids = self._table_ids
        while True:
            packet = read_packet()
            data: bytes = packet.get_all_data()
            first = data[0]
            if first == _EOF and len(data) < 9:
                return
            if first != _OK:
                continue
            end = checked_end(data, checksum, self.log_file, self.log_pos)
            event = parse(data, end, self.format, table_ids)
            if isinstance(event, Rotate):
                self.log_file, self.log_pos = event.next_binlog, event.position
            elif event is not None and event.log_pos:
                self.log_pos = event.log_pos
            elif event is None:
                log_pos = int.from_bytes(data[14:18], "little")
                if log_pos:
                    self.log_pos = log_pos
            if isinstance(event, FormatDescription):
                self.format = event.format
            if event is not None:
                yield event

    def close(self) -> None:
        self._connection.close()
