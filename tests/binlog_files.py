"""Binlog files that real MySQL servers wrote (``tests/fixtures/mysql_binlogs``), read as a live dump reads them.

``FileDump`` is the binlog dump with the connection replaced by a file: the same ``BinlogDump.__iter__`` turns each
event into the packet the server would send (the OK byte, then the event) and parses it with ``events.parse``,
checking its CRC32 when the file's FORMAT_DESCRIPTION carries one, and follows ``log_file``/``log_pos`` as over
the network. A test hands it to ``BinlogReader`` in place of ``BinlogDump`` to run the reader's own loop on the
file. ``previous_gtids`` reads the file's PREVIOUS_GTIDS event (the reader passes it over): the GTID set executed
before the file, where a reader starting at the file's first event starts.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
from airflow_provider_mysqlcdc.cdc.binlog.events import Format

MYSQL_BINLOGS = Path(__file__).parent / "fixtures" / "mysql_binlogs"
_MAGIC = b"\xfebin"
_PREVIOUS_GTIDS = 35


def owner_expected(name: str, kind: str) -> list[dict[str, Any]]:
    """What the fixture's owner asserts of file ``name`` (relative to ``MYSQL_BINLOGS``), as ``catalogue.json``
    quotes it: the entries of ``kind`` (e.g. ``GTID_TAGGED``), each with its event's position and its source."""
    catalogue = json.loads((MYSQL_BINLOGS / "catalogue.json").read_text())
    return [entry for entry in catalogue["files"][name]["expected"] if entry["kind"] == kind]


def file_events(path: Path) -> Iterator[tuple[int, bytes]]:
    """Each event of the file (its 19-byte header, body and checksum, if any) with its position."""
    data = path.read_bytes()
    assert data[:4] == _MAGIC, f"{path} is not a binlog file"
    position = 4
    while position < len(data):
        size = int.from_bytes(data[position + 9:position + 13], "little")
        yield position, data[position:position + size]
        position += size


class FileDump(BinlogDump):
    """``BinlogDump`` over a binlog file, from its first event: no connection, the file's events as packets."""

    def __init__(self, path: Path) -> None:  # no super().__init__: it connects to a server
        self.log_file, self.log_pos = path.name, 4
        self.format = Format()
        self._table_ids = {}
        self._path = path
        _, first = next(file_events(path))  # the FORMAT_DESCRIPTION: is its last 4 bytes' CRC32 right?
        self.checksum = zlib.crc32(first[:-4]) == int.from_bytes(first[-4:], "little")

    def _packets(self) -> Iterator[bytes]:
        for _, event in file_events(self._path):
            yield b"\x00" + event

    def close(self) -> None:
        pass


def previous_gtids(path: Path) -> str:
    """The file's PREVIOUS_GTIDS as GTID set text, ``uuid[:tag]:start-end`` entries joined by ``,``.

    Its body: a count of (uuid, tag) sources in 8 bytes (MySQL 8.3+'s tagged form: first and last byte 1,
    the count in the 6 between), then per source its uuid (16 bytes), in the tagged form its tag (a length
    below 128 in one byte, as twice the length, then the tag), its number of intervals (8 bytes) and each
    interval's start and end (8 bytes each, the end exclusive)."""
    event = next(event for _, event in file_events(path) if event[4] == _PREVIOUS_GTIDS)
    body = event[19:-4] if FileDump(path).checksum else event[19:]
    tagged = body[0] == 1 and body[7] == 1
    count = int.from_bytes(body[1:7] if tagged else body[:8], "little")
    position, entries = 8, []
    for _ in range(count):
        source = str(uuid.UUID(bytes=body[position:position + 16]))
        position += 16
        if tagged:
            assert body[position] & 1 == 0, "a tag's length in more than one byte"
            length = body[position] >> 1
            if length:
                source += ":" + body[position + 1:position + 1 + length].decode("ascii")
            position += 1 + length
        intervals = int.from_bytes(body[position:position + 8], "little")
        position += 8
        for _ in range(intervals):
            start, end = (int.from_bytes(body[p:p + 8], "little") for p in (position, position + 8))
            entries.append(f"{source}:{start}-{end - 1}")
            position += 16
    return ",".join(entries)
