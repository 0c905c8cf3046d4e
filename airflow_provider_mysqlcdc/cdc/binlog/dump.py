"""The binlog dump: a replica's connection to the server, and the events it sends, parsed.

**The event stream.** The reader reads events from an ``EventStream``: this dump, or binlog files
(``binlog.binlog_files``). Both hand over the packets the replication protocol carries (an OK byte, the
event, its CRC32 when the binlog checksums events), so everything after the packets is one loop: the
CRC32 checked and left out, the event parsed by ``events.parse``, ``log_file`` and ``log_pos``
following the events (a ROTATE moves to its file and position, any other event to the position after
it), ``format`` following the FORMAT_DESCRIPTION events, and a compressed transaction (MySQL's
TRANSACTION_PAYLOAD_EVENT) read as the events in it, one by one (``compressed.payload_packets``): its
events come after it in ``log_pos``, the position after the payload being where its transaction ends.
``checksum`` is read at every packet: binlog files set it per file, from each file's FORMAT_DESCRIPTION.

**The dump.**
The connection is pymysql's (with the reader's connection settings, TLS included). Before the dump
the session declares what this replica understands: ``@master_binlog_checksum`` (events then carry
the server's CRC32, which is verified and stripped), ``@mariadb_slave_capability=4`` (MariaDB then
sends its GTID events as they are, rather than dummy events replacing them; MySQL ignores it) and,
for a blocking dump, ``@master_heartbeat_period`` (nanoseconds). COM_BINLOG_DUMP then asks for the
events from a file and position, with BINLOG_DUMP_NON_BLOCK unless the dump blocks: a non-blocking
dump ends with an EOF packet at the binlog's current end.

Errors are pymysql's, as the reader expects them: a lost connection raises OperationalError 2013,
a server refusing the dump (a purged binlog, a server id clash) the error it sent. pymysql's packet
state (its buffered socket file and sequence number, read as ``_read_packet`` reads them) and command
sending (``_execute_command``) are private: mysql-replication uses them the same way.
"""

from __future__ import annotations

import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any

import pymysql
from pymysql.constants.COMMAND import COM_BINLOG_DUMP
from pymysql.constants.CR import CR_SERVER_LOST
from pymysql.err import InternalError, OperationalError
from pymysql.protocol import MysqlPacket

from airflow_provider_mysqlcdc.cdc.binlog.compressed import payload_packets
from airflow_provider_mysqlcdc.cdc.binlog.events import (
    CHECKSUM,
    Event,
    Format,
    FormatDescription,
    Rotate,
    TableMap,
    TransactionPayload,
    parse,
)
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

_NON_BLOCK = 0x01
_MAX_HEARTBEAT_SECONDS = 4294967  # the period is a 32-bit count of milliseconds on the server
_OK, _EOF, _ERROR = 0x00, 0xFE, b"\xff"
_MAX_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next packet


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


class EventStream(ABC):
    """The events from ``log_file``/``log_pos`` on; ``log_file`` and ``log_pos`` follow them (the file and the
    position after the last event read). A source provides the packets (``_packets``) and ``close``."""

    def __init__(self, log_file: str, log_pos: int) -> None:
        self.log_file, self.log_pos = log_file, log_pos
        self.format = Format()
        self.checksum = False
        self._table_ids: dict[int, TableMap] = {}

    def __iter__(self) -> Iterator[Event]:
        """The events, until the source ends (a non-blocking dump's EOF packet, the last file's end)."""
        table_ids = self._table_ids
        for data in self._packets():
            first = data[0]
            if first == _EOF and len(data) < 9:
                return
            if first != _OK:
                continue
            end = checked_end(data, self.checksum, self.log_file, self.log_pos)
            event = parse(data, end, self.format, table_ids)
            if event is None:
                log_pos = int.from_bytes(data[14:18], "little")
                if log_pos:
                    self.log_pos = log_pos
                continue
            if isinstance(event, Rotate):
                self.log_file, self.log_pos = event.next_binlog, event.position
            elif event.log_pos:
                self.log_pos = event.log_pos
            if isinstance(event, FormatDescription):
                self.format = event.format
            elif isinstance(event, TransactionPayload):
                yield from self._payload(event)
                continue
            yield event

    def _payload(self, payload: TransactionPayload) -> Iterator[Event]:
        """The events of a compressed transaction, parsed as the stream's own (their packets carry a CRC32 when
        the stream's do)."""
        checksum, table_ids = self.checksum, self._table_ids
        for data in payload_packets(payload.data, payload.end, payload.log_pos, checksum):
            event = parse(data, len(data) - CHECKSUM if checksum else len(data), self.format, table_ids)
            if isinstance(event, Rotate | FormatDescription | TransactionPayload):
                raise RowDecodeError(f"the TRANSACTION_PAYLOAD_EVENT ending at {self.log_file}:{payload.log_pos} "
                                     f"holds a {type(event).__name__} event, which no transaction holds")
            if event is not None:
                yield event

    @abstractmethod
    def _packets(self) -> Iterator[bytes]:
        """The source's packets, in binlog order."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what the source holds (a connection, a file)."""


class BinlogDump(EventStream):
    """The events of the server's binlog from ``log_file``/``log_pos`` on, over a replica's connection."""

    def __init__(self, settings: Mapping[str, Any], server_id: int, log_file: str, log_pos: int,
                 blocking: bool = False, heartbeat_seconds: float | None = None) -> None:
        super().__init__(log_file, log_pos)
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

    def _packets(self) -> Iterator[bytes]:
        """The dump's packets, read from the connection's buffered socket file without a pymysql packet
        object each (its ``_read_packet`` costs as much as parsing the event). As pymysql does: a payload
        of 16 MiB - 1 continues in the next packet, a short read or a socket error is a lost connection
        (2013), and so is an unexpected sequence number 0 (MariaDB's error packet when it shuts down);
        an error packet raises the server's error."""
        connection = self._connection
        connection._sock.settimeout(connection._read_timeout)
        connection._current_timeout = connection._read_timeout
        read, sequence = connection._rfile.read, connection._next_seq_id
        while True:
            parts = []
            while True:
                try:
                    header = read(4)
                    length = int.from_bytes(header[:3], "little") if len(header) == 4 else -1
                    payload = read(length) if length >= 0 else b""
                except OSError as exc:
                    raise OperationalError(CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})") \
                        from exc
                if len(payload) != length:
                    raise OperationalError(CR_SERVER_LOST, "Lost connection to MySQL server during query")
                if header[3] != sequence:
                    if header[3] == 0:
                        raise OperationalError(CR_SERVER_LOST, "Lost connection to MySQL server during query")
                    raise InternalError(f"Packet sequence number wrong - got {header[3]} expected {sequence}")
                sequence = (sequence + 1) % 256
                parts.append(payload)
                if length < _MAX_PAYLOAD:
                    break
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            if data[:1] == _ERROR:
                MysqlPacket(data, connection.encoding).raise_for_error()
            yield data

    def close(self) -> None:
        self._connection.close()
