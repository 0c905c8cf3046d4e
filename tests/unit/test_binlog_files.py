"""Binlog files as a source (``cdc.binlog.binlog_files``) and MySQL's compressed transactions, proven on binlog
files that real MySQL servers wrote (``tests/fixtures/mysql_binlogs``, see its SOURCES.md), read through
``BinlogReader`` exactly as a live dump is read: the reader's own loop, with the files as its ``events``.

What the owners publish is asserted (``catalogue.json``): row values, and the inner events of each
TRANSACTION_PAYLOAD_EVENT; for every file, the commits fall where the file's own events end them. Most of these
files' table maps carry no column names (MINIMAL metadata, or MySQL 5.7): the reader reads their rows by position
against the schema it is given, and stops, naming both, where a map contradicts it. Offsets inside a payload are
proven on the real payloads by such a stop's offset, and with decoded rows on a real file whose transactions this
test compresses into one payload as
MySQL does (bytes built here: they encode this project's reading of the payload format, which the real payloads
prove; the events inside are MySQL's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.events import Event, Query, Rows, Xid
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, Committed, describes
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange
from airflow_provider_mysqlcdc.exceptions import (
    IncompleteChangeError,
    InvalidOptionError,
    RowDecodeError,
    SchemaChangeError,
    SourceConfigError,
)
from tests.mysql_fixtures import lake_rows

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql_binlogs"
CATALOGUE = json.loads((FIXTURES / "catalogue.json").read_text())["files"]
RELAY_LOG = "rust_mysql_common/rpl_unfiltered_hidden_gcol.000001"
STATEMENTS = "rust_mysql_common/ver_trunk_row_v2.001"
PAYLOAD_FILES = ["rust_mysql_common/transaction_compression.000001", "mysql-binlog-connector-java/mysql-bin.compressed",
                 "mysql-binlog-connector-rust/mysql-bin.000057"]
ENUM_SET = "rust_mysql_common/mysql-enum-string-set.000001"
BIT = "rust_mysql_common/mysql_type_bit.000001"
# the tables as their CREATE TABLE in the file says (its QUERY event), in MySQL 8's default character set
UTF8, COLLATION = "utf8mb4", "utf8mb4_0900_ai_ci"
ENUM_SET_TABLE = TableSchema(TableId("mysql", "t"), (
    Column("f1", "char", "char(128)", char_max_length=128, charset=UTF8, collation=COLLATION),
    Column("f2", "varchar", "varchar(300)", char_max_length=300, charset=UTF8, collation=COLLATION),
    Column("f3", "enum", "enum('var1','variant2','foo')", members=("var1", "variant2", "foo"), charset=UTF8,
           collation=COLLATION),
    Column("f4", "set", "set('one','two','three','four')", members=("one", "two", "three", "four"), charset=UTF8,
           collation=COLLATION),
    Column("f5", "text", "text", charset=UTF8, collation=COLLATION),
), ())
BIT_TABLE = TableSchema(TableId("mysql", "foo"), (
    Column("a", "bit", "bit(3)"), Column("b", "text", "text", charset=UTF8, collation=COLLATION),
    Column("c", "bit", "bit(8)")), ())
# noria.t1 as its table map gives it (the owner publishes no CREATE TABLE; the names are ours): INT, BLOB (its
# COLUMN_CHARSET: binary), CHAR(2) (8 bytes of utf8mb4), INT, and an INT UNSIGNED (the map's SIGNEDNESS)
NORIA_TABLE = TableSchema(TableId("noria", "t1"), (
    Column("c1", "int", "int", nullable=False), Column("c2", "blob", "blob"),
    Column("c3", "char", "char(2)", char_max_length=2, charset=UTF8, collation=COLLATION), Column("c4", "int", "int"),
    Column("c5", "int", "int unsigned", unsigned=True)), ("c1",))
PERCONA_TABLE = TableSchema(TableId("test", "t1"), (  # id SERIAL: BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
    Column("id", "bigint", "bigint unsigned", nullable=False, unsigned=True),), ("id",), key_index="id")


def binlog_copy(tmp_path: Path, fixture: str, name: str = "mysql-bin.000001") -> Path:
    """The fixture under a binlog file's name (some owners named theirs otherwise), byte for byte."""
    path = tmp_path / name
    shutil.copyfile(FIXTURES / fixture, path)
    return path


def reader(files: BinlogFiles, start: BinlogOffset, *schemas: TableSchema, **options: Any) -> BinlogReader:
    def reload_schema(table: TableId) -> TableSchema:
        return next(s for s in schemas if s.id == table)

    return BinlogReader({}, 1, ServerIdRange(1, 1), {s.id: s for s in schemas}, start, reload_schema,
                        events=files.open, **options)


def commits_in(fixture: str, file: str) -> list[tuple[str, int]]:
    """Where the file's transactions end, from its events as the catalogue lists them: an XID, a COMMIT, a
    statement outside BEGIN (DDL), a payload holding an XID; a ROTATE moves on to the file it names."""
    ends, in_transaction = [], False
    for event in CATALOGUE[fixture]["events"]:
        name, query = event["name"], event.get("query", "").upper()
        inner = [e["name"] for e in event.get("inner_events", [])]
        if name == "ROTATE":
            break
        if query == "BEGIN":
            in_transaction = True
        elif name == "XID" or query == "COMMIT" or "XID" in inner or (name == "QUERY" and not in_transaction):
            ends.append((file, event["next_pos"]))
            in_transaction = False
    return ends


def wire_type(code: int) -> int:
    """A table map column's type as the event has it: ENUM and SET are STRING (254) there, their own type in its
    metadata, which the reader takes."""
    return 254 if code in (247, 248) else code


def seen(event: Event) -> Any:
    """What the catalogue says of an inner event: a statement's text, a rows event's table and column types."""
    if isinstance(event, Query):
        return event.query
    if isinstance(event, Rows):
        return str(event.table_map.table), [wire_type(c.type) for c in event.table_map.columns]
    return None


def items(source: BinlogReader) -> list[Any]:
    return list(source)


@pytest.mark.parametrize("fixture", sorted(set(CATALOGUE) - {RELAY_LOG}))
def test_every_real_file_commits_where_its_events_end_transactions(tmp_path: Path, fixture: str) -> None:
    """No table captured: each file's commits, MySQL 5.6 to 9.6 and MariaDB, at the positions its events give,
    payloads included (a compressed transaction ends where its payload event ends)."""
    files = BinlogFiles([binlog_copy(tmp_path, fixture)])
    committed: list[BinlogOffset] = []
    try:
        start = BinlogOffset("mysql-bin.000001", 4)
        committed.extend(i.offset for i in reader(files, start) if isinstance(i, Committed))
    except SourceConfigError as error:  # MySQL 5.6's statement-based LOAD DATA: its rows are in no event
        assert fixture == STATEMENTS and "APPEND_BLOCK_EVENT (type 9) ending at mysql-bin.000001:151433" in str(error)
    expected = commits_in(fixture, "mysql-bin.000001")
    assert [(c.file, c.position) for c in committed] == expected[:len(committed)]
    assert len(committed) == len(expected) or fixture == STATEMENTS
    assert all(c.events_to_skip == c.rows_to_skip == 0 for c in committed)


def test_a_folder_is_one_binlog_in_index_order_and_reads_across_its_files(tmp_path: Path) -> None:
    """percona's two files of one MySQL 8.0.45 server, as a folder: read across the rotation from the first, and
    from any commit on, the commits are exactly those after it."""
    for name in ("binlog.000002", "binlog.000001"):
        shutil.copyfile(FIXTURES / "percona-binlog-server" / name, tmp_path / name)
    (tmp_path / "binlog.index").write_text("./binlog.000001\n./binlog.000002\n")
    files = BinlogFiles.in_folder(tmp_path)
    assert files.names == ["binlog.000001", "binlog.000002"]
    committed = [i.offset for i in reader(files, BinlogOffset("binlog.000001", 4)) if isinstance(i, Committed)]
    assert [(c.file, c.position) for c in committed] == (
        commits_in("percona-binlog-server/binlog.000001", "binlog.000001")
        + commits_in("percona-binlog-server/binlog.000002", "binlog.000002"))
    for index, offset in enumerate(committed):
        after = [i.offset for i in reader(files, offset) if isinstance(i, Committed)]
        assert after == committed[index + 1:]


def percona_owner_rows() -> list[tuple[ChangeKind, tuple[Any, ...]]]:
    """The owner's rows of ``test.t1`` across both files: ids 1..6 written, 1..3 updated to 101..103, 4..6
    deleted (its SELECT after them: 101, 102, 103)."""
    rows: list[tuple[ChangeKind, tuple[Any, ...]]] = []
    for name in ("binlog.000001", "binlog.000002"):
        for entry in CATALOGUE[f"percona-binlog-server/{name}"]["expected"]:
            if entry["kind"] == "WRITE":
                rows += [(ChangeKind.INSERT, tuple(r)) for r in entry["after"]]
            elif entry["kind"] == "UPDATE":
                for before, after in entry["before_after"]:
                    rows += [(ChangeKind.UPDATE_BEFORE, tuple(before)), (ChangeKind.UPDATE_AFTER, tuple(after))]
            else:
                rows += [(ChangeKind.DELETE, tuple(r)) for r in entry["before"]]
    return rows


def test_a_table_map_without_names_is_read_by_position(tmp_path: Path) -> None:
    """percona's MySQL 8.0.45 table maps carry no column names (binlog_row_metadata = MINIMAL: SIGNEDNESS only):
    read by position against the owner's CREATE TABLE (``id SERIAL``), the rows of ``test.t1`` across both files
    are the owner's, in the records and in the columnar stream's lake rows, and resuming after any record gives
    exactly the records after it."""
    for name in ("binlog.000001", "binlog.000002"):
        shutil.copyfile(FIXTURES / "percona-binlog-server" / name, tmp_path / name)
    files = BinlogFiles.in_folder(tmp_path)
    start = BinlogOffset("binlog.000001", 4)
    read = records_and_offsets(reader(files, start, PERCONA_TABLE))
    assert [(op, values) for op, values, _ in read] == percona_owner_rows()
    assert lake_rows(reader(files, start, PERCONA_TABLE), PERCONA_TABLE).column("id").to_pylist() == [
        values[0] for _, values in percona_owner_rows()]
    assert_every_resume_gives_the_tail(files, PERCONA_TABLE, start)


def test_a_map_without_names_that_the_schema_does_not_describe_stops_the_reader(tmp_path: Path) -> None:
    """The same map against a schema it contradicts (its SIGNEDNESS says unsigned; a schema of a signed BIGINT, or
    of two columns): the reader stops at the first rows of ``test.t1``, at its transaction's start, naming both,
    and never reloads the server's schema (it may be ahead of this point)."""
    files = BinlogFiles([FIXTURES / "percona-binlog-server" / "binlog.000001"])
    first = commits_in("percona-binlog-server/binlog.000001", "binlog.000001")[0][1]  # CREATE TABLE's end
    signed = replace(PERCONA_TABLE, columns=(replace(PERCONA_TABLE.columns[0], unsigned=False, column_type="bigint"),))
    wider = replace(PERCONA_TABLE, columns=(*PERCONA_TABLE.columns, Column("note", "text", "text")))
    reloads: list[TableId] = []

    def reload_schema(table: TableId) -> TableSchema:
        reloads.append(table)
        return PERCONA_TABLE

    for schema, what in ((signed, "its column 1 has unsigned values where the table's id is bigint"),
                         (wider, "its rows have 1 columns where the table has 2")):
        source = BinlogReader({}, 1, ServerIdRange(1, 1), {schema.id: schema}, BinlogOffset("binlog.000001", 4),
                              reload_schema, events=files.open)
        with pytest.raises(SchemaChangeError) as error:
            items(source)
        assert str(error.value).startswith(f"the binlog at binlog.000001:{first} has rows of test.t1")
        assert what in str(error.value) and "the table map has (#1 LONGLONG unsigned)" in str(error.value)
        assert reloads == []


def test_a_minimal_image_under_minimal_metadata_is_refused_for_its_image(tmp_path: Path) -> None:
    """rust_mysql_common's ``noria.t1`` (MySQL 8.0.40, binlog_row_metadata = MINIMAL: SIGNEDNESS and COLUMN_CHARSET)
    is read by position: its map agrees with the table (its fifth column unsigned, as the owner's value 3230202323 of
    it needs; its second binary), but its only rows event has a partial image (binlog_row_image = MINIMAL: columns
    1, 3 and 5), which the reader refuses, never the map."""
    fixture = "rust_mysql_common/minimal_row_metadata.000001"
    files = BinlogFiles([binlog_copy(tmp_path, fixture)])
    with pytest.raises(IncompleteChangeError, match="binlog_row_image = 'MINIMAL'") as error:
        items(reader(files, BinlogOffset("mysql-bin.000001", 4), NORIA_TABLE))
    assert "lack the columns #2, #4" in str(error.value)
    (rows,) = (event for event in files.open("mysql-bin.000001", 4) if isinstance(event, Rows))
    assert describes(rows.table_map.columns, NORIA_TABLE) and rows.table_map.columns[4].unsigned
    assert not describes(rows.table_map.columns, replace(NORIA_TABLE, columns=(
        *NORIA_TABLE.columns[:4], replace(NORIA_TABLE.columns[4], unsigned=False))))
    text = Column("c2", "text", "text", charset=UTF8, collation=COLLATION)  # MINIMAL's character sets are checked
    assert not describes(rows.table_map.columns, replace(NORIA_TABLE, columns=(
        NORIA_TABLE.columns[0], text, *NORIA_TABLE.columns[2:])))
    (write,) = CATALOGUE[fixture]["expected"]
    assert write["after_partial"] == {"@4": 3230202323} and 3230202323 >= 2**31  # only an INT UNSIGNED holds it


@pytest.mark.parametrize("fixture", PAYLOAD_FILES)
def test_a_payloads_events_are_its_transactions_events(tmp_path: Path, fixture: str) -> None:
    """Each TRANSACTION_PAYLOAD_EVENT a MySQL 8.0 server wrote, read as the events the catalogue lists inside it
    (the owner's for transaction_compression), in their place: its table maps registered, its rows events of
    their tables and types, its XID; each at the payload's end, which the stream's position follows."""
    stream = BinlogFiles([binlog_copy(tmp_path, fixture)]).open("mysql-bin.000001", 4)
    read = [(event, stream.log_pos) for event in stream]
    owner = {e["event_pos"]: e["inner_event_types"] for e in CATALOGUE[fixture]["expected"]
             if e["kind"] == "TRANSACTION_PAYLOAD"}
    for payload in (e for e in CATALOGUE[fixture]["events"] if e["name"] == "TRANSACTION_PAYLOAD"):
        inside = [(event, log_pos) for event, log_pos in read if event.log_pos == payload["next_pos"]]
        assert all(log_pos == payload["next_pos"] for _, log_pos in inside)
        maps = {e["table_id"]: e for e in payload["inner_events"] if e["name"] == "TABLE_MAP"}
        expected: list[tuple[type, Any]] = []
        for event in payload["inner_events"]:
            if event["name"] == "QUERY":
                expected.append((Query, event["query"]))
            elif "ROWS_V2" in event["name"]:
                table_map = maps[event["table_id"]]
                expected.append((Rows, (f"{table_map['db']}.{table_map['table']}", table_map["column_types"])))
            elif event["name"] == "XID":
                expected.append((Xid, None))
        assert [(type(e), seen(e)) for e, _ in inside] == expected
        if payload["pos"] in owner:  # the owner's inner event types: a table map is read into the rows after it
            assert owner[payload["pos"]] == [e["name"] for e in payload["inner_events"]]
            assert [t for t, _ in expected] == [Query, Rows, Xid]
    assert owner.keys() <= {e["pos"] for e in CATALOGUE[fixture]["events"] if e["name"] == "TRANSACTION_PAYLOAD"}


@pytest.mark.parametrize(("fixture", "table"), [("mysql-binlog-connector-rust/mysql-bin.000057", TableId("a", "b")),
                                               ("rust_mysql_common/transaction_compression.000001",
                                                TableId("test", "tb1"))])
def test_a_payloads_rows_without_names_are_read_by_position(tmp_path: Path, fixture: str, table: TableId) -> None:
    """The rows inside MySQL 8.0's compressed transactions, whose maps carry no names (MINIMAL: SIGNEDNESS), read
    by position against a one-INT table (the owners publish no CREATE TABLE; the map says INT, signed): the insert
    of ``a.b`` is the 1 its ROWS_QUERY event says the server ran (``insert into b values(1)``), and ``test.tb1``'s
    one insert is read whole (the owner asserts its inner event types only)."""
    schema = TableSchema(table, (Column("v", "int", "int"),), ())
    read = records_and_offsets(reader(BinlogFiles([binlog_copy(tmp_path, fixture)]),
                                      BinlogOffset("mysql-bin.000001", 4), schema))
    assert [(op, values) for op, values, _ in read] == [(ChangeKind.INSERT, (1,))]


def test_skipping_inside_a_real_payload(tmp_path: Path) -> None:
    """mysql-bin.000057's second payload holds two rows events of ``a.test_table_3`` (20 columns, no names), given a
    schema of one column: from its transaction's start the reader stops at the first, and told to skip one row
    event, at the second, its offset counting the payload's rows events as any transaction's."""
    fixture = "mysql-binlog-connector-rust/mysql-bin.000057"
    files = BinlogFiles([FIXTURES / fixture])
    table = TableSchema(TableId("a", "test_table_3"), (Column("id", "int", "int", nullable=False),), ("id",))
    start = BinlogOffset("mysql-bin.000057", commits_in(fixture, "mysql-bin.000057")[-2][1])
    for skip in (0, 1):
        with pytest.raises(SchemaChangeError) as error:
            items(reader(files, BinlogOffset(start.file, start.position, events_to_skip=skip), table))
        at = f"mysql-bin.000057:{start.position}" + (f" (+{skip} events, +0 rows)" if skip else "")
        assert str(error.value).startswith(f"the binlog at {at} has rows of a.test_table_3"), str(error.value)


def owner_rows(fixture: str) -> list[tuple[ChangeKind, tuple[Any, ...]]]:
    """The owner's published rows of the file, as the reader gives them: ENUM by its member, SET by its members'
    names, BIT as an integer (the owner writes the index, the bit mask and the bytes)."""
    if fixture == BIT:
        (write,) = CATALOGUE[fixture]["expected"]
        assert [list(c) for c in write["after"]] == [["a BIT(3)"], ["b TEXT"], ["c BIT(8)"]]
        assert [list(c.values()) for c in write["after"]] == [["0b100 (bytes [4])"], ["foo"], ["0b100000 (bytes [32])"]]
        return [(ChangeKind.INSERT, (0b100, "foo", 0b100000))]
    members = {"0b00000101 (SET one,three)": "one,three", "0b00001010 (SET two,four)": "two,four"}

    def row(values: list[Any]) -> tuple[Any, ...]:
        f1, f2, f3, f4, f5 = values
        return f1, f2, ENUM_SET_TABLE.columns[2].members[f3 - 1], members[f4], f5

    write, update, delete = CATALOGUE[fixture]["expected"]
    return [(ChangeKind.INSERT, row(write["after"])), (ChangeKind.UPDATE_BEFORE, row(update["before"])),
            (ChangeKind.UPDATE_AFTER, row(update["after"])), (ChangeKind.DELETE, row(delete["before"]))]


def records_and_offsets(source: BinlogReader) -> list[tuple[ChangeKind, tuple[Any, ...], BinlogOffset]]:
    return [(i.op, i.values, i.offset) for i in source if isinstance(i, ChangeRecord)]


def assert_every_resume_gives_the_tail(files: BinlogFiles, schema: TableSchema, start: BinlogOffset) -> None:
    read = records_and_offsets(reader(files, start, schema))
    for index, (op, _, offset) in enumerate(read):
        if op != ChangeKind.UPDATE_BEFORE:  # an update's offset is its after image's: resume after both
            assert records_and_offsets(reader(files, offset, schema)) == read[index + 1:]


@pytest.mark.parametrize(("fixture", "schema"), [(ENUM_SET, ENUM_SET_TABLE), (BIT, BIT_TABLE)])
def test_the_owners_values_through_the_reader(tmp_path: Path, fixture: str, schema: TableSchema) -> None:
    """MySQL 8.0 files with FULL metadata: the rows the owner publishes, and resuming after any of them."""
    files = BinlogFiles([binlog_copy(tmp_path, fixture)])
    start = BinlogOffset("mysql-bin.000001", 4)
    assert [(op, values) for op, values, _ in records_and_offsets(reader(files, start, schema))] == owner_rows(fixture)
    assert_every_resume_gives_the_tail(files, schema, start)


# -- a real file's transactions compressed as MySQL 8.0.20+ writes them (bytes built here) -----------------------


def events_of(data: bytes) -> list[bytes]:
    position, events = 4, []
    while position < len(data):
        size = int.from_bytes(data[position + 9:position + 13], "little")
        events.append(data[position:position + size])
        position += size
    return events


def with_crc(event: bytes) -> bytes:
    return event + zlib.crc32(event).to_bytes(4, "little")


def payload_event(inner: list[bytes], header: bytes, compression: int = 0) -> bytes:
    """A TRANSACTION_PAYLOAD_EVENT (no position or checksum yet) holding ``inner`` (events without checksums)."""
    raw = b"".join(inner)
    payload = raw if compression == 255 else pa.compress(raw, codec="zstd", asbytes=True)

    def field(kind: int, value: int) -> bytes:
        encoded = bytes([value]) if value < 251 else b"\xfe" + value.to_bytes(8, "little")
        return bytes([kind, len(encoded)]) + encoded

    body = field(2, compression) + field(3, len(raw)) + field(1, len(payload)) + b"\0" + payload
    return header[:4] + bytes([40]) + header[5:9] + (19 + len(body)).to_bytes(4, "little") + bytes(6) + body


def compressed_binlog(original: bytes) -> bytes:
    """``original`` (a file with CRC32s) with its transactions that hold rows merged into one, compressed into a
    payload after the first one's GTID event, as a server with binlog_transaction_compression=ON writes it: the
    inner events without checksums and with 0 as their next position; every event after it moved."""
    events = events_of(original)
    first = next(i for i, e in enumerate(events) if e[4] == 19) - 2  # the GTID before the first table map's BEGIN
    last = max(i for i, e in enumerate(events) if e[4] == 16)  # the last XID

    def inner(event: bytes) -> bytes:
        body = event[:-4]
        return body[:9] + len(body).to_bytes(4, "little") + bytes(4) + body[17:]

    transaction = [inner(events[first + 1]), *(inner(e) for e in events[first + 2:last] if e[4] in (19, 30, 31, 32)),
                   inner(events[last])]
    out, position = bytearray(original[:4]), 4
    for event in [*events[:first + 1], payload_event(transaction, events[first]), *events[last + 1:]]:
        body = event if event[4] == 40 else event[:-4]
        size = len(body) + 4
        out += with_crc(body[:9] + size.to_bytes(4, "little") + (position + size).to_bytes(4, "little") + body[17:])
        position += size
    return bytes(out)


def test_offsets_inside_and_after_a_payload(tmp_path: Path) -> None:
    """The owner's rows of mysql-enum-string-set in one compressed transaction: the same records as the file gives
    uncompressed, each offset counting the payload's rows events, and resuming after any record, inside the payload
    or after it, gives exactly the records after it."""
    plain = records_and_offsets(reader(BinlogFiles([binlog_copy(tmp_path, ENUM_SET)]),
                                       BinlogOffset("mysql-bin.000001", 4), ENUM_SET_TABLE))
    folder = tmp_path / "compressed"
    folder.mkdir()
    (folder / "mysql-bin.000001").write_bytes(compressed_binlog((FIXTURES / ENUM_SET).read_bytes()))
    files = BinlogFiles.in_folder(folder)
    start = BinlogOffset("mysql-bin.000001", 4)
    read = records_and_offsets(reader(files, start, ENUM_SET_TABLE))
    assert [(op, values) for op, values, _ in read] == [(op, values) for op, values, _ in plain] == owner_rows(ENUM_SET)
    assert [(o.events_to_skip, o.rows_to_skip) for _, _, o in read] == [(0, 1), (1, 1), (1, 1), (2, 1)]
    assert len({(o.file, o.position) for _, _, o in read}) == 1  # all in the one transaction
    assert_every_resume_gives_the_tail(files, ENUM_SET_TABLE, start)
    committed = [i.offset for i in reader(files, start) if isinstance(i, Committed)]
    assert committed[-1].position == (folder / "mysql-bin.000001").stat().st_size  # the payload is the last event


def test_a_damaged_payload_is_an_error_naming_its_position(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / PAYLOAD_FILES[0]).read_bytes())
    data[274 + 19 + 20] ^= 0xFF  # inside the zstd frame
    data[274 + 157 - 4:274 + 157] = zlib.crc32(data[274:274 + 157 - 4]).to_bytes(4, "little")
    (tmp_path / "mysql-bin.000001").write_bytes(bytes(data))
    with pytest.raises(RowDecodeError, match="TRANSACTION_PAYLOAD_EVENT ending at binlog position 431"):
        items(reader(BinlogFiles([tmp_path / "mysql-bin.000001"]), BinlogOffset("mysql-bin.000001", 4)))


def test_a_payload_of_hundreds_of_mebibytes_is_read_in_bounded_memory() -> None:
    """A payload of 300 MiB uncompressed (one write of 4,200 rows events of 75 KiB): the process's peak memory
    grows by far less than the payload, the inner events being decompressed and parsed one at a time."""
    script = """
import resource, sys
import pyarrow as pa
from airflow_provider_mysqlcdc.cdc.binlog.compressed import payload_packets
inner = bytearray(19 + 75 * 1024)
inner[4] = 30
inner[9:13] = len(inner).to_bytes(4, "little")
raw_size = len(inner) * 4200
sink = pa.BufferOutputStream()
with pa.CompressedOutputStream(sink, "zstd") as out:
    for _ in range(4200):
        out.write(inner)
payload = sink.getvalue().to_pybytes()
head = bytes([2, 1, 0, 3, 9, 0xfe]) + raw_size.to_bytes(8, "little") + bytes([1, 9, 0xfe]) \\
    + len(payload).to_bytes(8, "little") + b"\\0"
packet = b"\\0" + bytes(4) + bytes([40]) + bytes(14) + head + payload
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
count = sum(1 for _ in payload_packets(packet, len(packet), 1234, True))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(count, raw_size, (after - before) * 1024)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    count, raw_size, grown = map(int, result.stdout.split())
    assert count == 4200 and raw_size > 300 * 2**20
    assert grown < 32 * 2**20, f"peak memory grew {grown / 2**20:.0f} MiB reading a {raw_size / 2**20:.0f} MiB payload"


def test_what_the_files_refuse(tmp_path: Path) -> None:
    """A relay log (its events carry the source's positions), a position inside an event, a file not in the set,
    a gap in the set, two binlogs in one set."""
    relay = BinlogFiles([binlog_copy(tmp_path, RELAY_LOG, "relay-bin.000001")])
    with pytest.raises(RowDecodeError, match="relay log"):
        items(reader(relay, BinlogOffset("relay-bin.000001", 4)))
    plain = BinlogFiles([binlog_copy(tmp_path, ENUM_SET)])
    with pytest.raises(RowDecodeError, match="has no event at position 1000"):
        items(reader(plain, BinlogOffset("mysql-bin.000001", 1000)))
    with pytest.raises(SourceConfigError, match="mysql-bin.000000 is not among the binlog files"):
        items(reader(plain, BinlogOffset("mysql-bin.000000", 4)))
    first = FIXTURES / "percona-binlog-server" / "binlog.000001"
    gap = tmp_path / "binlog.000003"
    shutil.copyfile(FIXTURES / "percona-binlog-server" / "binlog.000002", gap)
    with pytest.raises(SourceConfigError, match="rotation to binlog.000002, which the binlog files lack"):
        items(reader(BinlogFiles([first, gap]), BinlogOffset("binlog.000001", 4)))
    with pytest.raises(InvalidOptionError, match="several binlogs"):
        BinlogFiles([first, tmp_path / "mysql-bin.000001"])


def test_the_last_file_cut_inside_an_event_ends_at_its_last_whole_event(tmp_path: Path) -> None:
    """A copy of the file the server was writing: read to its last whole event, as a dump would be."""
    whole = (FIXTURES / ENUM_SET).read_bytes()
    (tmp_path / "mysql-bin.000001").write_bytes(whole[:3300 + 10])  # inside the last XID
    read = list(reader(BinlogFiles([tmp_path / "mysql-bin.000001"]), BinlogOffset("mysql-bin.000001", 4),
                       ENUM_SET_TABLE))
    assert [i.op for i in read if isinstance(i, ChangeRecord)][-1] == ChangeKind.DELETE  # its rows event is whole
    assert [i.offset.position for i in read if isinstance(i, Committed)][-1] == 2659  # its commit is not
