"""Binlog files as a source of changes: the files a server wrote, read as its dump sends them.

A copy of the binlog (``mysqlbinlog --read-from-remote-server --raw``, ``mariadb-binlog`` likewise, a
backup tool, or the server's own files) holds the events as the server wrote them: the magic
``\\xfebin``, then each event with its 19-byte header, its position in the file being the server's
position of it. ``BinlogFiles`` is a set of such files (an ordered list, or a folder or an
object-store prefix listed and ordered by the files' index numbers), on the local disk or any pyarrow
filesystem (S3, GCS, Azure, HDFS: its URI or a ``pyarrow.fs.FileSystem`` with the credentials).
``BinlogFiles.open`` gives what ``BinlogReader`` takes in place of the server's dump (its ``events``):
an ``EventStream`` of the files, so the reader's loop, checks, decoders and offsets are the same, and
an offset read from the files is the server's offset of the same event.

The stream sends what the server's dump sends: at each file's start a rotate event (made here, flagged
artificial as the server's is) to the file and the position read from, the file's FORMAT_DESCRIPTION
(without the flag of a file in use, and its position after it left 0 when reading from further on, as
the server sends it), then the file's
events from the position; at a file's end the next file of the set, to the last file's end (as a
non-blocking dump ends at the binlog's end). Each file's FORMAT_DESCRIPTION says whether its events
carry a CRC32 (then checked, as the dump checks them). Events are read one at a time from a buffered
stream: memory holds the buffer and one event, whatever the files' sizes.

Refused with an error rather than read wrong: a start file not in the set (as a purged file is on the
server) or a position inside an event (each event's header names the position after it, which must be
where it ends: a relay log's events name their source's positions, and are refused so); a file missing
between two (its predecessor's rotate event names it); a file that is not a binlog. A last file cut
inside an event (a copy of the file the server was writing) ends at its last whole event.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from airflow_provider_mysqlcdc.cdc.binlog.dump import EventStream
from airflow_provider_mysqlcdc.cdc.binlog.events import CHECKSUM, FORMAT_DESCRIPTION, ROTATE, Format
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import file_index
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, RowDecodeError, SourceConfigError

MAGIC = b"\xfebin"
_START = len(MAGIC)  # where a binlog file's first event (its FORMAT_DESCRIPTION) starts
_HEADER = 19
_NAME = re.compile(r"^(?P<base>.+)\.\d+$")  # mysql-bin.000042; not mysql-bin.index
_ARTIFICIAL = 0x20  # LOG_EVENT_ARTIFICIAL_F: an event the dump makes, not in the binlog
_IN_USE = 0x01  # LOG_EVENT_BINLOG_IN_USE_F: the FORMAT_DESCRIPTION of a file the server has not closed
_CRC32 = 1  # the FORMAT_DESCRIPTION's checksum algorithm
_CHECKSUMS_SINCE = (5, 6, 1)  # servers before it write no checksum algorithm into the FORMAT_DESCRIPTION
_BUFFER = 4 << 20


@dataclass(frozen=True)
class _File:
    name: str
    filesystem: pafs.FileSystem
    path: str


class BinlogFiles:
    """An ordered set of binlog files: ``paths`` (local paths or URIs; paths of ``filesystem`` when given), in
    the order of their index numbers, which must belong to one binlog (one base name)."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]], filesystem: pafs.FileSystem | None = None) -> None:
        files: dict[str, _File] = {}
        for path in paths:
            fs, located = _located(os.fspath(path), filesystem)
            name = located.rstrip("/").rsplit("/", 1)[-1]
            if name in files:
                raise InvalidOptionError(f"two binlog files named {name}: {files[name].path} and {located}")
            file_index(name)  # a binlog file's name, or InvalidOptionError
            files[name] = _File(name, fs, located)
        bases = {name.rsplit(".", 1)[0] for name in files}
        if len(bases) > 1:
            raise InvalidOptionError(f"binlog files of several binlogs ({', '.join(sorted(bases))}): give the files "
                                     f"of one")
        if not files:
            raise InvalidOptionError("no binlog files given")
        self._files = sorted(files.values(), key=lambda f: file_index(f.name))

    @classmethod
    def in_folder(cls, folder: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None,
                  base_name: str | None = None) -> BinlogFiles:
        """The binlog files in ``folder`` (a local folder, or a URI's folder or prefix), those named
        ``base_name.<number>`` if given (a folder may hold several binlogs, e.g. a server's and its relay log)."""
        fs, root = _located(os.fspath(folder), filesystem)
        try:
            found = fs.get_file_info(pafs.FileSelector(root.rstrip("/")))
        except (OSError, pa.ArrowException) as exc:
            raise SourceConfigError(f"cannot list the binlog files in {folder}: {exc}") from exc
        paths = [info.path for info in found if info.type == pafs.FileType.File
                 and (match := _NAME.match(info.base_name)) is not None
                 and (base_name is None or match.group("base") == base_name)]
        if not paths:
            raise SourceConfigError(f"no binlog files (named <base name>.<number>) in {folder}")
        return cls(paths, fs)

    @property
    def names(self) -> list[str]:
        """The files' names, in binlog order."""
        return [f.name for f in self._files]

    def open(self, file: str, position: int) -> BinlogFileEvents:
        """The events from ``file``:``position`` to the last file's end (``BinlogReader``'s ``events``)."""
        names = self.names
        if file not in names:
            raise SourceConfigError(f"binlog file {file} is not among the binlog files ({names[0]} .. {names[-1]}): "
                                    f"the changes from {file}:{position} on are not in them")
        return BinlogFileEvents(self._files[names.index(file):], position)


class BinlogFileEvents(EventStream):
    """The events of ``files`` from the first one's ``position`` on, as the server's dump sends them."""

    def __init__(self, files: list[_File], position: int) -> None:
        super().__init__(files[0].name, position)
        self._files = files
        self._open: pa.NativeFile | None = None

    def _packets(self) -> Iterator[bytes]:
        position = self.log_pos
        for number, file in enumerate(self._files):
            last = number == len(self._files) - 1
            rotated_to = yield from self._file_packets(file, position, last)
            if rotated_to is not None and not last and self._files[number + 1].name != rotated_to:
                raise SourceConfigError(f"binlog file {file.name} ends in a rotation to {rotated_to}, which the "
                                        f"binlog files lack (the next one is {self._files[number + 1].name})")
            position = _START

    def _file_packets(self, file: _File, position: int, last: bool) -> Generator[bytes, None, str | None]:
        """The packets of one file from ``position``; returns the file a rotate event at its end names."""
        with file.filesystem.open_input_file(file.path) as raw:
            self._open = raw
            size = raw.size()
            if raw.read(_START) != MAGIC:
                raise SourceConfigError(f"{file.path} is not a binlog file: it does not start with {MAGIC!r}")
            description = _read_event(raw, file, _START, last=False)
            if description is None or description[4] != FORMAT_DESCRIPTION:
                raise SourceConfigError(f"{file.path} does not start with a FORMAT_DESCRIPTION event")
            first = _START + len(description)
            if not (position == _START or first <= position <= size):
                raise SourceConfigError(f"binlog position {position} is not in {file.name}, whose events are at "
                                        f"{_START} .. {size}")
            has_crc = Format(description[21:71].rstrip(b"\0").decode()).version >= _CHECKSUMS_SINCE
            self.checksum = has_crc and description[-CHECKSUM - 1] == _CRC32
            yield _rotate(file.name, position, description[5:9], self.checksum)
            yield _description(description, position == _START, has_crc)
            position = max(position, first)
            raw.seek(position)
            stream = pa.BufferedInputStream(raw, _BUFFER)
            rotated_to = None
            while (event := _read_event(stream, file, position, last)) is not None:
                if event[4] == ROTATE:
                    end = len(event) - CHECKSUM if self.checksum else len(event)
                    rotated_to = event[_HEADER + 8:end].decode()
                position += len(event)
                yield b"\0" + event
        self._open = None
        return rotated_to

    def close(self) -> None:
        if self._open is not None:
            self._open.close()


def _read_event(stream: pa.NativeFile, file: _File, position: int, last: bool) -> bytes | None:
    """The event at ``position`` of ``stream`` (header, body, checksum), None at the file's end (or, in the last
    file, at an event cut short)."""
    header: bytes = stream.read(_HEADER)
    if not header:
        return None
    if len(header) == _HEADER:
        size, after = int.from_bytes(header[9:13], "little"), int.from_bytes(header[13:17], "little")
        if size < _HEADER or (after and after != position + size):
            raise RowDecodeError(
                f"{file.name} has no event at position {position} (the bytes there name a size of {size} and a next "
                f"position of {after}): the position is not where an event starts, the file is damaged, or it is a "
                f"relay log, whose events carry their source's positions"
            )
        body: bytes = stream.read(size - _HEADER)
        if len(body) == size - _HEADER:
            return header + body
    if last:
        return None  # the server was writing the event when the file was copied
    raise SourceConfigError(f"{file.name} ends inside the event at position {position}: the file is damaged or was "
                            f"copied before the server finished it")


def _rotate(name: str, position: int, server_id: bytes, checksum: bool) -> bytes:
    """The packet of the rotate event a dump sends before a file's events: to ``name`` at ``position``."""
    body = position.to_bytes(8, "little") + name.encode()
    size = _HEADER + len(body) + (CHECKSUM if checksum else 0)
    header = bytes(4) + bytes([ROTATE]) + server_id + size.to_bytes(4, "little") + bytes(4) \
        + _ARTIFICIAL.to_bytes(2, "little")
    return _packet(header + body, checksum)


def _description(event: bytes, at_start: bool, has_crc: bool) -> bytes:
    """The packet of a file's FORMAT_DESCRIPTION as a dump sends it: without the flag that the file is in use (a
    file the server had open has it set; its CRC32 is that of the event without it) and, unless read from the
    file's start, with 0 as the position after it (the position the reader follows stays the one read from)."""
    flags = (int.from_bytes(event[17:19], "little") & ~_IN_USE).to_bytes(2, "little")
    event = event[:13] + (event[13:17] if at_start else bytes(4)) + flags + event[19:]
    return _packet(event[:-CHECKSUM], True) if has_crc else b"\0" + event


def _packet(event: bytes, checksum: bool) -> bytes:
    """The packet of ``event`` (no checksum yet), with its CRC32 if ``checksum``."""
    return b"\0" + event + (zlib.crc32(event).to_bytes(CHECKSUM, "little") if checksum else b"")


def _located(uri: str, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of ``uri``: ``filesystem``'s path (a URI's scheme left off), else the URI's own
    filesystem, else a local path made absolute."""
    if filesystem is not None:
        return filesystem, uri.split("://", 1)[1] if "://" in uri else uri
    if "://" in uri:
        try:
            located: tuple[pafs.FileSystem, str] = pafs.FileSystem.from_uri(uri)
        except (OSError, pa.ArrowException) as exc:
            raise InvalidOptionError(f"binlog files at {uri}: {exc}") from exc
        return located
    return pafs.LocalFileSystem(), os.path.abspath(uri)
