"""The binlog files real MySQL servers wrote (``tests/fixtures/mysql_binlogs``, see its SOURCES.md), read the one
way the stream reads binlog files: ``BinlogReader`` with ``BinlogFiles`` as its events. Nothing here reads the
files' events otherwise, so a test's values are the reader's values; ``lake_rows`` takes them as the columnar
stream does (``rows()`` gathered in an ``ImageBuffer``, made into lake rows by ``rows_table``).

What the files' owners publish of them is in ``catalogue.json`` (``owner_expected``). ``previous_gtids`` reads
the one event a test needs that the reader passes over (PREVIOUS_GTIDS: the GTIDs executed before the file), at
the position the catalogue gives it.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, ChangeRows
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.lake.changelog import rows_table

MYSQL_BINLOGS = Path(__file__).parent / "fixtures" / "mysql_binlogs"
CATALOGUE: dict[str, Any] = json.loads((MYSQL_BINLOGS / "catalogue.json").read_text())["files"]
BINLOG_NAME = "mysql-bin.000001"


def owner_expected(fixture: str, kind: str | None = None) -> list[dict[str, Any]]:
    """What the owner of ``fixture`` (a path under ``MYSQL_BINLOGS``) asserts of it, as ``catalogue.json`` quotes
    it with its source: every entry, or those of ``kind`` (e.g. ``GTID_TAGGED``)."""
    return [entry for entry in CATALOGUE[fixture]["expected"] if kind is None or entry.get("kind") == kind]


def binlog_copy(tmp_path: Path, fixture: str, name: str = BINLOG_NAME) -> BinlogFiles:
    """The fixture, byte for byte, as the binlog file ``name`` (some owners named theirs otherwise)."""
    path = tmp_path / name
    shutil.copyfile(MYSQL_BINLOGS / fixture, path)
    return BinlogFiles([path])


def file_reader(files: BinlogFiles, *schemas: TableSchema, start: BinlogOffset | None = None,
                **options: Any) -> BinlogReader:
    """``BinlogReader`` capturing ``schemas``' tables from ``start`` (the first file's start by default), the files
    as its events; a table map that does not describe a schema is checked against the same schema again."""
    def reload_schema(table: TableId) -> TableSchema:
        return next(schema for schema in schemas if schema.id == table)

    start = start or BinlogOffset(files.names[0], 4)
    return BinlogReader({}, 1, ServerIdRange(1, 1), {s.id: s for s in schemas}, start, reload_schema,
                        events=files.open, **options)


def records(reader: BinlogReader, table: TableId) -> list[ChangeRecord]:
    """The reader's records of ``table``, one per row image."""
    return [item for item in reader if isinstance(item, ChangeRecord) and item.table == table]


def lake_rows(reader: BinlogReader, schema: TableSchema) -> pa.Table:
    """The reader's images of ``schema``'s table as the columnar stream commits them: its rows events' images
    gathered in an ``ImageBuffer``, then the lake's rows (``rows_table``: the table's columns, then ``_op``...)."""
    events = [item for item in reader.rows() if isinstance(item, ChangeRows) and item.table == schema.id]
    return rows_table(ImageBuffer.of(schema, events))


def previous_gtids(fixture: str) -> str:
    """The fixture's PREVIOUS_GTIDS (the event at the position the catalogue gives) as GTID set text,
    ``uuid[:tag]:start-end`` entries joined by ``,``.

    Its body: a count of (uuid, tag) sources in 8 bytes (MySQL 8.3+'s tagged form: first and last byte 1,
    the count in the 6 between), then per source its uuid (16 bytes), in the tagged form its tag (a length
    below 128 in one byte, as twice the length, then the tag), its number of intervals (8 bytes) and each
    interval's start and end (8 bytes each, the end exclusive)."""
    file = CATALOGUE[fixture]
    (event,) = (e for e in file["events"] if e["name"] == "PREVIOUS_GTIDS")
    with open(MYSQL_BINLOGS / fixture, "rb") as binlog:
        binlog.seek(event["pos"])
        data = binlog.read(event["size"])
    body = data[19:-4] if file["checksum_alg"] == 1 else data[19:]  # its CRC32 when the file has them
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
