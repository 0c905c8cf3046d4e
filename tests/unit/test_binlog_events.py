"""The binlog events as ``events.parse`` reads them, from packets built here as the replication
protocol delivers them (an OK byte, the 19-byte header, the post-header and body, a CRC32). The MySQL
forms (GTID, anonymous GTID, version-2 rows events, HEARTBEAT_V2, 4-byte table ids) are checked only
here: no MySQL server runs in the test environment. The tagged GTID event (MySQL 8.3+) is also read from a
binlog file a MySQL 9.6 server wrote (``tests/fixtures/mysql_binlogs``)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.dump import checked_end
from airflow_provider_mysqlcdc.cdc.binlog.events import (
    Format,
    FormatDescription,
    Gtid,
    HeartbeatEvent,
    Query,
    Rotate,
    Rows,
    TableMap,
    TableMaps,
    Undecoded,
    Xid,
    parse,
)
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import RowDecodeError
from tests.mysql_fixtures import MYSQL_BINLOGS, owner_expected

MARIADB = Format("10.11.6-MariaDB-log")
MYSQL = Format("8.0.36")


def packet(event_type: int, body: bytes, server_id: int = 1, log_pos: int = 4321, flags: int = 0) -> bytes:
    header = struct.pack("<IBIIIH", 1_700_000_000, event_type, server_id, 19 + len(body) + 4, log_pos, flags)
    return b"\x00" + header + body + zlib.crc32(header + body).to_bytes(4, "little")


def read(data: bytes, fmt: Format = MARIADB, table_ids: dict[int, TableMap] | None = None,
         table_maps: TableMaps | None = None) -> Any:
    return parse(data, checked_end(data, True, "mysql-bin.000001", 4), fmt, {} if table_ids is None else table_ids,
                 table_maps or TableMaps())


def packed(value: int) -> bytes:
    """A length-encoded integer."""
    if value < 0xFB:
        return bytes([value])
    return b"\xfc" + value.to_bytes(2, "little") if value < 1 << 16 else b"\xfe" + value.to_bytes(8, "little")


def text(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return packed(len(raw)) + raw


def test_the_header_and_the_checksum() -> None:
    data = packet(16, struct.pack("<Q", 99), log_pos=777)
    event = read(data)
    assert type(event) is Xid and (event.timestamp, event.log_pos) == (1_700_000_000, 777)
    assert checked_end(data, True, "f", 4) == len(data) - 4
    assert checked_end(data[:-4], False, "f", 4) == len(data) - 4
    damaged = data[:30] + bytes([data[30] ^ 1]) + data[31:]
    with pytest.raises(RowDecodeError, match="after mysql-bin.000009:120 fails its CRC32 checksum"):
        checked_end(damaged, True, "mysql-bin.000009", 120)


def format_description(version: str, table_map_post_header: int = 8) -> bytes:
    lengths = bytearray(40)
    lengths[19 - 1] = table_map_post_header
    lengths[2 - 1] = 13
    head = struct.pack("<H", 4) + version.encode().ljust(50, b"\0") + struct.pack("<IB", 0, 19)
    return head + bytes(lengths) + b"\x01"


def test_format_description_and_the_table_id_size() -> None:
    event = read(packet(15, format_description("10.11.6-MariaDB-log")))
    assert type(event) is FormatDescription
    fmt = event.format
    assert fmt.dbms == "mariadb" and fmt.version == (10, 11, 6)
    assert fmt.post_header(19, 0) == 8 and fmt.table_id_size == 6 and fmt.post_header(2, 0) == 13
    old = read(packet(15, format_description("5.1.30", table_map_post_header=6))).format
    assert old.dbms == "mysql" and old.table_id_size == 4
    assert Format().table_id_size == 6  # before the format description: the current form


def test_rotate_heartbeats_and_harmless_events() -> None:
    rotate = read(packet(4, struct.pack("<Q", 4) + b"mysql-bin.000010", log_pos=0))
    assert type(rotate) is Rotate and (rotate.position, rotate.next_binlog) == (4, "mysql-bin.000010")
    assert type(read(packet(27, b"mysql-bin.000010"))) is HeartbeatEvent
    assert type(read(packet(41, b"\x01\x02"))) is HeartbeatEvent  # MySQL's HEARTBEAT_LOG_EVENT_V2
    for harmless in (35, 160, 161, 163):  # PREVIOUS_GTIDS, ANNOTATE_ROWS, BINLOG_CHECKPOINT, GTID_LIST
        assert read(packet(harmless, b"\x00" * 8)) is None


def query(statement: str, database: bytes, status: bytes = b"\x00\x00\x00\x00\x00") -> bytes:
    return struct.pack("<IIBHH", 7, 0, len(database), 0, len(status)) + status + database + b"\x00" + statement.encode()


def test_query_events() -> None:
    event = read(packet(2, query("ALTER TABLE t ADD c INT -- ünï", b"shop")))
    assert type(event) is Query and event.schema == b"shop" and event.query == "ALTER TABLE t ADD c INT -- ünï"
    assert read(packet(2, query("BEGIN", b""))).query == "BEGIN"
    # a server whose post-header is longer than the 13 bytes known: the format description says so
    longer = Format("10.11.6-MariaDB", bytes([0, 15]))
    body = query("COMMIT", b"db")
    body = body[:13] + b"\x00\x00" + body[13:]
    assert read(packet(2, body), longer).query == "COMMIT"


def test_gtid_events() -> None:
    mariadb = read(packet(162, struct.pack("<QIB", 42, 3, 0), server_id=7))
    assert type(mariadb) is Gtid and mariadb.gtid == "3-7-42"
    sid = bytes.fromhex("3e11fa47712211e19e33c80aa9429562")
    mysql = read(packet(33, b"\x01" + sid + struct.pack("<Q", 23) + b"\x02" + bytes(16)), MYSQL)
    assert mysql.gtid == "3e11fa47-7122-11e1-9e33-c80aa9429562:23"
    anonymous = read(packet(34, b"\x01" + bytes(16) + bytes(8) + b"\x02" + bytes(16)), MYSQL)
    assert anonymous.gtid == "00000000-0000-0000-0000-000000000000:0"


TAGGED_GTID_FILE = "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"


def test_a_tagged_gtid_event_that_mysql_96_wrote() -> None:
    """GTID_TAGGED_LOG_EVENT (42) in a binlog file a MySQL 9.6.0 server wrote, as the reader's binlog file source
    hands it over (the events a dump would send): the GTID its owner expects, at its event's position, and nothing
    left undecoded. ``test_gtid`` reads the same file through ``BinlogReader``."""
    (expected,) = owner_expected(TAGGED_GTID_FILE, "GTID_TAGGED")
    path = MYSQL_BINLOGS / TAGGED_GTID_FILE
    source = BinlogFiles([path]).open(path.name, 4)
    events, ends = [], []
    for event in source:
        events.append(event)
        ends.append(source.log_pos)
    gtids = [(event, end) for event, end in zip(events, ends, strict=True) if isinstance(event, Gtid)]
    assert [(event.gtid, end) for event, end in gtids] == [(expected["gtid"], 328)]
    assert gtids[0][0].timestamp == int.from_bytes(bytes.fromhex("afae8569"), "little")  # its header's
    assert expected["event_pos"] == 245 and not any(isinstance(event, Undecoded) for event in events)


def varlen(value: int) -> bytes:
    """An unsigned integer as MySQL's serialization framework writes it (this test's reading of the format,
    which the real event above proves): 1-8 bytes of 7 value bits each, their count in the first byte's
    trailing ones, or 0xff and 8 bytes."""
    size = next((n for n in range(1, 9) if value < 1 << 7 * n), 9)
    if size == 9:
        return b"\xff" + value.to_bytes(8, "little")
    return (value << size | (1 << size - 1) - 1).to_bytes(size, "little")


def tagged_gtid(uuid: bytes, number: int, tag: str, version: int = 1) -> bytes:
    """A GTID_TAGGED_LOG_EVENT's body: flags, uuid, number (zigzag), tag (left out when empty), last_committed."""
    fields = (varlen(0) + varlen(0) + varlen(1) + b"".join(varlen(b) for b in uuid) + varlen(2) + varlen(number * 2)
              + (varlen(3) + varlen(len(tag)) + tag.encode() if tag else b"") + varlen(4) + varlen(7))
    return varlen(version) + varlen(3 + len(fields)) + varlen(0) + fields


def test_tagged_gtid_events_built_here() -> None:
    """Beyond the real event: numbers of every width, an untagged transaction in the tagged event, and bodies
    that are not MySQL's format 1 or end early."""
    sid = bytes.fromhex("3e11fa47712211e19e33c80aa9429562")
    for number in (1, 127, 128, 2**20, 2**56, 2**63 - 1):
        event = read(packet(42, tagged_gtid(sid, number, "blue_7")), MYSQL)
        assert type(event) is Gtid and event.gtid == f"3e11fa47-7122-11e1-9e33-c80aa9429562:blue_7:{number}"
    assert read(packet(42, tagged_gtid(sid, 5, "")), MYSQL).gtid == "3e11fa47-7122-11e1-9e33-c80aa9429562:5"
    with pytest.raises(RowDecodeError, match="not MySQL's format 1"):
        read(packet(42, tagged_gtid(sid, 5, "a", version=2)), MYSQL)
    with pytest.raises(RowDecodeError, match="ends 26 bytes early"):
        read(packet(42, tagged_gtid(sid, 5, "a")[:9]), MYSQL)


# a table map: INT UNSIGNED, VARCHAR(300) utf8mb4, DECIMAL(10,2), DATETIME(3), ENUM('a','ÿ') latin1,
# SET('x','y'), BIT(13), BLOB, CHAR(4) latin1, TINYINT (signed), GEOMETRY
TYPES = bytes([3, 15, 246, 18, 254, 254, 16, 252, 254, 1, 255])
METADATA = (struct.pack("<H", 1200) + bytes([10, 2]) + bytes([3]) + bytes([247, 1]) + bytes([248, 1])
            + bytes([5, 1]) + bytes([2]) + bytes([254, 4]) + bytes([4]))
NAMES = ["id", "note", "amount", "at", "kind", "tags", "bits", "data", "code", "small", "shape"]


def optional(kind: int, value: bytes) -> bytes:
    return bytes([kind]) + packed(len(value)) + value


def table_map_body(table_id: int = 0x0102030405, names: bool = True, id_size: int = 6) -> bytes:
    body = table_id.to_bytes(id_size, "little") + b"\x01\x00" + b"\x04shop\x00" + b"\x06orders\x00"
    body += packed(len(TYPES)) + TYPES + packed(len(METADATA)) + METADATA + b"\xff\x07"
    # numeric columns: id, amount, small: only id unsigned (most significant bit first)
    body += optional(1, bytes([0b10000000]))
    # character columns: note, data, code (and shape on MariaDB): utf8mb4 by default, code (index 2) latin1
    body += optional(2, packed(45) + packed(2) + packed(8))
    if names:
        body += optional(4, b"".join(text(n) for n in NAMES))
    body += optional(6, packed(2) + text("a") + text(b"\xff"))  # latin1's ÿ
    body += optional(5, packed(2) + text("x") + text("y"))
    body += optional(10, packed(8) + packed(1) + packed(45))  # ENUM latin1, SET utf8mb4
    body += optional(8, packed(0))  # the primary key: not read
    return body


def test_a_table_map_with_full_metadata() -> None:
    table_ids: dict[int, TableMap] = {}
    assert read(packet(19, table_map_body()), table_ids=table_ids) is None  # kept, not yielded
    table_map = table_ids[0x0102030405]
    assert table_map.table == TableId("shop", "orders")
    columns = {c.name: c for c in table_map.columns}
    assert [c.name for c in table_map.columns] == NAMES
    assert columns["id"].unsigned and not columns["amount"].unsigned and not columns["small"].unsigned
    assert (columns["note"].max_length, columns["note"].character_set_name) == (1200, "utf8")
    assert (columns["amount"].precision, columns["amount"].decimals, columns["at"].fsp) == (10, 2, 3)
    assert (columns["kind"].type, columns["kind"].size, columns["kind"].enum_values) == (247, 1, ["", "a", "ÿ"])
    assert columns["kind"].character_set_name == "cp1252"
    assert (columns["tags"].type, columns["tags"].set_values, columns["tags"].character_set_name) == (
        248, ["x", "y"], "utf8")
    assert columns["bits"].bits == 13 and columns["data"].length_size == 2
    assert (columns["code"].type, columns["code"].max_length, columns["code"].character_set_name) == (254, 4, "cp1252")
    assert columns["shape"].length_size == 4 and columns["shape"].character_set_name == "utf8"  # MariaDB: a charset


def test_a_table_map_without_names_and_one_parse_per_definition() -> None:
    table_ids: dict[int, TableMap] = {}
    maps = TableMaps()
    read(packet(19, table_map_body(names=False)), table_ids=table_ids, table_maps=maps)
    bare = table_ids[0x0102030405]
    assert {c.name for c in bare.columns} == {None}
    # what MINIMAL writes is read without the names: the signedness and character sets
    assert bare.columns[0].unsigned and bare.columns[1].character_set_name == "utf8"
    assert bare.columns[2].unsigned is False and bare.columns[4].enum_values == ["", "a", "ÿ"]
    read(packet(19, table_map_body(), log_pos=1), table_ids=table_ids, table_maps=maps)
    first = table_ids[0x0102030405]
    read(packet(19, table_map_body(), log_pos=2), table_ids=table_ids, table_maps=maps)
    assert table_ids[0x0102030405] is first is not bare  # the same body: the same parse
    old = Format("5.1.30", bytes([0] * 18 + [6]))
    read(packet(19, table_map_body(table_id=9, id_size=4)), old, table_ids, maps)
    assert table_ids[9].table == TableId("shop", "orders")


def rows_body(table_id: int, count: int, bitmaps: bytes, images: bytes, extra: bytes | None = None,
              id_size: int = 6) -> bytes:
    head = table_id.to_bytes(id_size, "little") + b"\x01\x00"
    if extra is not None:
        head += struct.pack("<H", len(extra) + 2) + extra
    return head + packed(count) + bitmaps + images


def test_rows_events_v1_and_v2() -> None:
    orders = TableMap(5, TableId("shop", "orders"), [], b"")
    images = b"\x00" + struct.pack("<i", 7) + b"\x00" + struct.pack("<i", 8)
    write = read(packet(23, rows_body(5, 2, b"\x03", images)), table_ids={5: orders})
    assert type(write) is Rows and write.table_map is orders and write.kinds == (ChangeKind.INSERT,)
    assert (write.column_count, write.present, write.present_after) == (2, b"\x03", None)
    assert write.data[write.start:write.end] == images
    # MySQL's version 2: extra data after the flags (its length counts itself); an update has two bitmaps
    update = read(packet(31, rows_body(5, 2, b"\x03\x01", images, extra=b"\x00\x01\x02")), MYSQL, {5: orders})
    assert update.kinds == (ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER)
    assert (update.present, update.present_after) == (b"\x03", b"\x01")
    assert update.data[update.start:update.end] == images
    delete = read(packet(32, rows_body(5, 2, b"\x03", images, extra=b"")), MYSQL, {5: orders})
    assert delete.kinds == (ChangeKind.DELETE,) and delete.data[delete.start:delete.end] == images
    old = Format("5.1.30", bytes([0] * 18 + [6]))
    assert read(packet(23, rows_body(5, 2, b"\x03", images, id_size=4)), old, {5: orders}).table_map is orders


def test_rows_of_a_table_id_no_table_map_defined_are_an_error() -> None:
    with pytest.raises(RowDecodeError, match="names a table id no table map before it defined"):
        read(packet(23, rows_body(6, 1, b"\x01", b"\x00\x01")))


def test_a_table_map_with_a_type_not_known_here_still_parses() -> None:
    """A column type this parse does not know (243: none of MySQL's) in a table not captured: its table map must
    not stop the stream; the columns after it keep their names, and no schema's type lists the unknown one."""
    body = (b"\x07\x00\x00\x00\x00\x00\x01\x00" + b"\x04shop\x00" + b"\x03vec\x00" + packed(3) + bytes([3, 243, 15])
            + packed(6) + struct.pack("<I", 12) + struct.pack("<H", 40) + b"\x06"
            + optional(4, text("id") + text("v") + text("note")))
    table_ids: dict[int, TableMap] = {}
    read(packet(19, body), table_ids=table_ids)
    assert [(c.name, c.type) for c in table_ids[7].columns] == [("id", 3), ("v", 243), ("note", 15)]
