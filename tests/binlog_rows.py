"""The rows events of a binlog file that a real MySQL server wrote (``tests/fixtures/mysql_binlogs``), parsed by the
reader's own ``events.parse`` as the dump would hand them over (the OK byte, the event, its CRC32 apart), with the
table maps before them; the tests decode them with the real ``RowDecoders`` and ``row_columns``."""

from __future__ import annotations

import zlib
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.binlog.events import Format, FormatDescription, Rows, TableMap, TableMaps, parse

MYSQL_BINLOGS = Path(__file__).parent / "fixtures" / "mysql_binlogs"


def rows_events(name: str) -> list[tuple[int, Rows]]:
    """Each rows event of file ``name`` (relative to ``MYSQL_BINLOGS``) with its position in the file."""
    data = (MYSQL_BINLOGS / name).read_bytes()
    assert data[:4] == b"\xfebin", f"{name} is not a binlog file"
    fmt, table_ids, table_maps = Format(), dict[int, TableMap](), TableMaps()
    found, position, checksum = [], 4, 0
    while position < len(data):
        size = int.from_bytes(data[position + 9:position + 13], "little")
        event = data[position:position + size]
        if not checksum and zlib.crc32(event[:-4]) == int.from_bytes(event[-4:], "little"):
            checksum = 4  # the FORMAT_DESCRIPTION, first, says by its own CRC32 that the file has them
        packet = b"\x00" + event
        parsed = parse(packet, len(packet) - checksum, fmt, table_ids, table_maps)
        if isinstance(parsed, FormatDescription):
            fmt = parsed.format
        elif isinstance(parsed, Rows):
            found.append((position, parsed))
        position += size
    return found
