"""Reading the captured tables' changes from the binlog, with an exact offset for every record.

``binlog.dump`` speaks the replication protocol and ``binlog.events`` parses its events; the row
decoder reads the rows, and mysql-replication only the rows it cannot (``legacy_rows``), behind the same
typed events, in the one loop of ``_read_from``. This module adds what a consistent pipeline needs:

- offsets: each record carries the point to resume after it (transaction start, GTIDs before
  it, row events and rows consumed), and each commit yields a ``Committed`` marker with the
  offset after the transaction. A consumer that checkpoints only at markers never keeps half a
  transaction; one that checkpoints a record's offset resumes right after that record.
- restarts mid-transaction: reading from an offset with skips drops the records already taken.
- a stop offset, for reading exactly (LW, HW] of a chunk.
- schema changes: each table map is checked against the table's known schema, the schema at this point of
  the binlog (the checkpoint's, followed through each DDL by ``track``). A map that names its columns
  (``binlog_row_metadata=FULL``) and differs makes the reader reload the table's schema; if the server's
  current schema does not describe it either, capture stops with an error naming both. A map without names
  (MINIMAL, NO_LOG, MySQL 5.7) is read by position: it must agree with the known schema on everything it
  carries (``difference``), and its rows are decoded with the names, signedness, character sets and ENUM/SET
  members the schema adds (``completed``); one that does not agree stops the reader, never a reload.
- clear errors for a purged binlog and a server-id clash.

The reader always reads by file and position (COM_BINLOG_DUMP); GTIDs ride along in the offsets (the
start's, advanced at every commit, and the start's server identity), and a failover finds the file and
position on the new server from them before the reader starts (``startup.anchor``), so no GTID-mode
connection is ever needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pymysqlreplication.constants.CHARSET import Charset

from airflow_provider_mysqlcdc.cdc.binlog.compressed import refuse_undecoded
from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump, EventStream
from airflow_provider_mysqlcdc.cdc.binlog.events import (
    Format,
    Gtid,
    HeartbeatEvent,
    Query,
    Rotate,
    Rows,
    TableMap,
    TableMaps,
    Undecoded,
    Xid,
)
from airflow_provider_mysqlcdc.cdc.binlog.legacy_rows import LegacyRows
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import Located, RowDecoders
from airflow_provider_mysqlcdc.cdc.binlog.row_statements import parse_row_statement
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.gtid import GtidSet, MariaDbGtidPosition
from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter
from airflow_provider_mysqlcdc.cdc.schema.ddl import DdlStatement, parse_ddl
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import TYPES, BinlogType, type_of
from airflow_provider_mysqlcdc.cdc.source.server_id import ServerIdRange, explain_server_id_clash
from airflow_provider_mysqlcdc.cdc.source.server_info import MARIADB
from airflow_provider_mysqlcdc.exceptions import IncompleteChangeError, SchemaChangeError, SourceConfigError

_NO_SOURCE = "00000000-0000-0000-0000-000000000000"
_UNSEEN: Any = object()  # a table map ``BinlogReader._captured`` has not answered for
_CONNECTION_LOST = {2006, 2013}  # server has gone away, lost connection during query
_BINLOG_TYPES = frozenset(BinlogType)
_DECODED = frozenset(code for spec in TYPES for code in spec.binlog_types)  # types some column type reads
_OTHER_TYPES = {245: "JSON (MySQL's binary JSON)", 242: "VECTOR", 253: "VAR_STRING", 7: "TIMESTAMP (before 5.6)",
                12: "DATETIME (before 5.6)", 11: "TIME (before 5.6)", 0: "DECIMAL (before 5.0)", 14: "NEWDATE"}
_SAVEPOINTS = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT")  # statements inside a transaction, not its end
_TAKE_ANEW = ("run the stream once without them in tables, delete their folders <db>/<table> in the lake, and add "
              "them back (the split takes them anew, chunked, while the server keeps writing).")
_SIGNED_TYPES = frozenset({BinlogType.TINY, BinlogType.SHORT, BinlogType.INT24, BinlogType.LONG, BinlogType.LONGLONG,
                           BinlogType.NEWDECIMAL, BinlogType.FLOAT, BinlogType.DOUBLE})
_TEMPORAL = frozenset({BinlogType.TIME2, BinlogType.DATETIME2, BinlogType.TIMESTAMP2})
_ENUM_OR_SET = frozenset({BinlogType.ENUM, BinlogType.SET})
_CHARACTER = frozenset({BinlogType.STRING, BinlogType.VARCHAR, BinlogType.BLOB, *_ENUM_OR_SET})
"""The types whose table map columns carry a character set (in FULL, and MySQL's MINIMAL)."""
_BLOB_SIZES = {"tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3, "mediumtext": 3, "longblob": 4,
               "longtext": 4}
_BLOB_NAMES = {1: "TINYBLOB/TINYTEXT", 2: "BLOB/TEXT", 3: "MEDIUMBLOB/MEDIUMTEXT", 4: "LONGBLOB/LONGTEXT"}
# bytes per character of each character set (MAXLEN of SHOW CHARACTER SET): a CHAR or VARCHAR column's map gives bytes
_MAX_BYTES = {**dict.fromkeys(("binary", "latin1", "latin2", "latin5", "latin7", "ascii", "cp1250", "cp1251", "cp1256",
                               "cp1257", "cp850", "cp852", "cp866", "dec8", "greek", "hebrew", "hp8", "keybcs2",
                               "koi8r", "koi8u", "macce", "macroman", "swe7", "tis620", "armscii8", "geostd8"), 1),
              **dict.fromkeys(("big5", "cp932", "euckr", "gb2312", "gbk", "sjis", "ucs2"), 2),
              **dict.fromkeys(("utf8", "utf8mb3", "eucjpms", "ujis"), 3),
              **dict.fromkeys(("utf8mb4", "utf16", "utf16le", "utf32", "gb18030"), 4)}


@dataclass(frozen=True)
class Committed:
    """A transaction boundary: everything before ``offset`` is complete. ``gtid`` is the ending
    transaction's own GTID (None without one), whatever the offsets carry."""

    offset: BinlogOffset
    ts_ms: int
    gtid: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    """The server is idle at ``offset``: nothing of the captured tables is pending."""

    offset: BinlogOffset


@dataclass(frozen=True)
class SchemaChanged:
    """From here on the table's records follow ``schema``."""

    schema: TableSchema
    offset: BinlogOffset


@dataclass(frozen=True)
class SchemaStatement:
    """A DDL naming a watched table, read from a query event: ``ddl`` holds only the changes of watched
    tables. ``offset`` is where its transaction starts (every change before it is complete there); a
    ``Committed`` marker with the offset after it follows at once."""

    ddl: DdlStatement
    offset: BinlogOffset
    ts_ms: int
    names_logged: bool | None = None
    """Whether the last table map the reader checked named its columns (``binlog_row_metadata=FULL``; the
    setting is global, so any captured table's map tells); None before the first."""


@dataclass(frozen=True, slots=True)
class ChangeRows:
    """The row images of one rows event, for the columnar stream (``BinlogReader.rows``): ``images``
    are places in the event's packet (``row_columns`` reads them into Arrow), or canonical tuples where
    the row decoder cannot read the event. Image ``i`` is of kind ``kinds[i % len(kinds)]`` (an
    update's row is a before and an after image) and of row ``i // len(kinds)``; ``keep`` selects the
    images taken (None: all). ``base`` is the event's offset (its index in the transaction), ``offset``
    where to resume after it (made when asked for: the stream asks for few of them)."""

    kinds: tuple[ChangeKind, ...]
    table: TableId
    images: Located | list[tuple[Any, ...]]
    count: int
    """Images in the event, taken or not."""
    base: BinlogOffset
    ts_ms: int
    keep: tuple[bool, ...] | None = None

    @property
    def offset(self) -> BinlogOffset:
        return _with_rows_skipped(self.base, self.count // len(self.kinds))

    @property
    def taken(self) -> int:
        return self.count if self.keep is None else sum(self.keep)

    def image_offset(self, index: int) -> BinlogOffset:
        """The offset of image ``index`` (a record's ``offset``: resume after its row)."""
        return _with_rows_skipped(self.base, index // len(self.kinds) + 1)

    def column(self, index: int) -> list[Any]:
        """Column ``index`` of every image, taken or not, as canonical values."""
        from airflow_provider_mysqlcdc.cdc.binlog.row_columns import (
            column_values,  # numpy: for the columnar stream only
        )

        images = self.images
        return column_values(images, index) if isinstance(images, Located) else [i[index] for i in images]


Item = ChangeRecord | Committed | Heartbeat | SchemaChanged | SchemaStatement
RowsItem = ChangeRows | Committed | Heartbeat | SchemaChanged | SchemaStatement


@dataclass
class _Position:
    """Where the reader is: the offset of the last boundary and what the open transaction consumed."""

    boundary: BinlogOffset
    in_transaction: bool = False
    pending_gtid: str | None = None
    row_events: int = 0
    _gtids: tuple[str, MariaDbGtidPosition | GtidSet] | None = None
    """The boundary's GTIDs as text and parsed: each commit adds one to the parsed form (parsing the text
    again took most of a small transaction's bookkeeping)."""

    def advanced(self, gtid: str, transaction: str) -> str:
        """``gtid`` (the boundary's, of its flavour) with the ``transaction`` GTID added."""
        parsed = self._gtids[1] if self._gtids is not None and self._gtids[0] == gtid else (
            MariaDbGtidPosition.parse(gtid) if self.boundary.flavor == MARIADB else GtidSet.parse(gtid))
        after = parsed.advance(transaction) if isinstance(parsed, MariaDbGtidPosition) else parsed.add(transaction)
        text = str(after)
        self._gtids = (text, after)
        return text


def _unchecked(base: BinlogOffset, **fields: Any) -> BinlogOffset:
    """``replace(base, **fields)`` without the constructor: the checks (a regular expression on the file name)
    and ``replace`` cost more per row than decoding the row. Only for values valid by where they come from."""
    offset = object.__new__(BinlogOffset)
    offset.__dict__.update(base.__dict__, **fields)
    return offset


def _with_skips(base: BinlogOffset, events: int, rows: int) -> BinlogOffset:
    """``base`` (checked) with counts >= 0: still valid."""
    return _unchecked(base, events_to_skip=events, rows_to_skip=rows)


def _moved(base: BinlogOffset, file: str, position: int, gtid: str | None) -> BinlogOffset:
    """``base`` at another transaction boundary: a file the server named, a position it reported."""
    return _unchecked(base, file=file, position=position, gtid=gtid, events_to_skip=0, rows_to_skip=0)


def _with_rows_skipped(base: BinlogOffset, rows: int) -> BinlogOffset:
    return _with_skips(base, base.events_to_skip, rows)


def describes(columns: Sequence[Any], schema: TableSchema) -> bool:
    """Whether a table map's columns (``binlog.events``') describe rows of ``schema`` (``difference``)."""
    return difference(columns, schema) is None


def named(columns: Sequence[Any]) -> bool:
    """Whether a table map names its columns (``binlog_row_metadata=FULL``; MINIMAL, NO_LOG and MySQL 5.7 do not)."""
    return not columns or columns[0].name is not None


def difference(columns: Sequence[Any], schema: TableSchema) -> str | None:
    """What tells a table map's columns from ``schema``'s, or None if they describe its rows.

    Position by position: the column count, a binlog type the column's type accepts (``type_registry``), and
    whatever else the map carries: the names (FULL only), signedness and character sets (FULL, and MySQL's
    MINIMAL), and always the lengths, DECIMAL precision and scale, fractional seconds, BIT widths, BLOB and
    ENUM/SET sizes of the type metadata. A map without names read this way decodes exactly what the schema
    says, so it must agree with it on everything it carries (a type change keeps the names: INT to BIGINT,
    DECIMAL(10,2) to (12,4), VARCHAR(20) to (40))."""
    if len(columns) != len(schema.columns):
        return f"its rows have {len(columns)} columns where the table has {len(schema.columns)}"
    for index, (binlog, column) in enumerate(zip(columns, schema.columns, strict=True)):
        place = f"column {index + 1}" if binlog.name is None else f"column {binlog.name}"
        if binlog.type not in _DECODED:
            return f"its {place} is of binlog type {_type_name(binlog.type)}, which the reader does not decode"
        if binlog.name is not None and binlog.name != column.name:
            return f"its column {index + 1} is named {binlog.name} where the table's is {column.name}"
        if binlog.type not in type_of(column).binlog_types:
            return f"its {place} is of binlog type {_type_name(binlog.type)} where the table's is {column.column_type}"
        what = _metadata_difference(binlog, column)
        if what is not None:
            return f"its {place} has {what} where the table's {column.name} is {column.column_type}" + (
                f" {column.charset}" if column.charset else "")
    return None


def _metadata_difference(binlog: Any, column: Column) -> str | None:
    """The first of the map's facts about a column (beyond its type) that ``column`` contradicts, described."""
    kind = binlog.type
    if kind in _SIGNED_TYPES and binlog.unsigned is not None and bool(binlog.unsigned) != column.unsigned:
        return "unsigned values" if binlog.unsigned else "signed values"
    if kind == BinlogType.NEWDECIMAL and (binlog.precision, binlog.decimals) != (column.precision, column.scale):
        return f"DECIMAL({binlog.precision},{binlog.decimals})"
    if kind in _TEMPORAL and binlog.fsp != (column.datetime_precision or 0):
        return f"{binlog.fsp} fractional digits"
    if kind == BinlogType.BIT and column.precision and binlog.bits != column.precision:
        return f"{binlog.bits} bits"
    if kind == BinlogType.BLOB and _BLOB_SIZES.get(column.data_type, binlog.length_size) != binlog.length_size:
        return f"a {binlog.length_size}-byte length (a {_BLOB_NAMES[binlog.length_size]})"
    if kind in (BinlogType.VARCHAR, BinlogType.STRING) and column.char_max_length is not None:
        per_character = _MAX_BYTES.get(column.charset or "binary")
        if per_character is not None and binlog.max_length != column.char_max_length * per_character:
            return f"values of up to {binlog.max_length} bytes"
    if kind in _ENUM_OR_SET and column.members and binlog.size != _member_bytes(kind, len(column.members)):
        return f"{binlog.size}-byte values"
    if kind in _CHARACTER and binlog.character_set_name is not None \
            and binlog.character_set_name != _encoding_of(column):
        return f"the character set of Python codec {binlog.character_set_name}"
    return None


def _member_bytes(kind: int, members: int) -> int:
    """The bytes of an ENUM's index or a SET's bitmask of ``members`` members."""
    if kind == BinlogType.ENUM:
        return 1 if members < 256 else 2
    size = (members + 7) // 8
    return 8 if size > 4 else size


def _encoding_of(column: Column) -> str:
    """The codec name ``binlog.events`` gives a column of ``column``'s character set (binary: ``binary``)."""
    return str(Charset(0, column.charset or "binary", "").encoding)


def completed(columns: Sequence[Any], schema: TableSchema) -> list[Any]:
    """A table map's columns without names (``difference`` found they describe ``schema``'s rows) with what
    the schema knows that the map does not carry: the names, the signedness and character sets a map of
    NO_LOG lacks, and the ENUM and SET members only FULL writes. The row decoder reads the map's type
    metadata (lengths, precision, fractional seconds) as it always does."""
    out = []
    for binlog, column in zip(columns, schema.columns, strict=True):
        kind = binlog.type
        out.append(replace(
            binlog, name=column.name,
            unsigned=column.unsigned if binlog.unsigned is None else binlog.unsigned,
            character_set_name=binlog.character_set_name or (_encoding_of(column) if kind in _CHARACTER else None),
            enum_values=binlog.enum_values or (["", *column.members] if kind == BinlogType.ENUM else None),
            set_values=binlog.set_values or (list(column.members) if kind == BinlogType.SET else None),
        ))
    return out


def _type_name(code: int) -> str:
    return BinlogType(code).name if code in _BINLOG_TYPES else _OTHER_TYPES.get(code, f"type {code}")


def explain_mismatch(columns: Sequence[Any], schema: TableSchema) -> str:
    """What tells a table map's columns (``describes`` found they do not describe ``schema``) from the
    schema's, naming both, with what to do about it."""
    what = difference(columns, schema) or "they differ"
    both = f"{what}: the table map has ({', '.join(_describe(columns))}), the table ({_describe_schema(schema)})"
    if any(c.type not in _DECODED for c in columns):
        return f"{both}; leave {schema.id} out of tables"
    cause = ("a DDL the binlog does not show (run with sql_log_bin = 0), one not read yet, or a schema read after the "
             "stream's offset")
    if not named(columns):
        return (f"{both}. The map carries no column names (binlog_row_metadata = MINIMAL or NO_LOG; MySQL 5.7 writes "
                f"none), so the reader reads its rows by position with the schema it holds for this point of the "
                f"binlog, which this map contradicts: {cause}. The server's schema of today is no answer (it may be "
                f"ahead of this point). Take the table anew: {_TAKE_ANEW} (SET GLOBAL binlog_row_metadata = 'FULL' "
                f"names the columns of later maps)")
    return f"{both}: {cause}; take the table anew: {_TAKE_ANEW}"


def _describe(columns: Sequence[Any]) -> list[str]:
    return [f"{c.name or f'#{i + 1}'} {_type_name(c.type)}{' unsigned' if c.unsigned else ''}"
            + (f"({c.precision},{c.decimals})" if c.type == BinlogType.NEWDECIMAL else "")
            + (f"({c.max_length} bytes)" if c.type in (BinlogType.VARCHAR, BinlogType.STRING) else "")
            for i, c in enumerate(columns)]


def _describe_schema(schema: TableSchema) -> str:
    return ", ".join(f"{c.name} {c.column_type}" for c in schema.columns)


def _excerpt(statement: str, limit: int = 200) -> str:
    text = " ".join(statement.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _partial_image(event: Rows, table: TableId, offset: BinlogOffset, log_file: str) -> IncompleteChangeError:
    """The error for a rows event whose images lack columns (``binlog_row_image`` not FULL)."""
    bitmaps = [event.present] if event.present_after is None else [event.present, event.present_after]
    columns = event.table_map.columns
    missing = sorted({i for bitmap in bitmaps for i in range(event.column_count) if not bitmap[i // 8] >> (i % 8) & 1})
    names = [columns[i].name or f"#{i + 1}" if i < len(columns) else f"#{i + 1}" for i in missing]
    return IncompleteChangeError(
        f"the binlog at {offset} (event ending at {log_file}:{event.log_pos}) has rows of {table} whose images lack "
        f"the columns {', '.join(names)}: the session that wrote them had binlog_row_image = 'MINIMAL' or 'NOBLOB', "
        f"and a partial image leaves the columns it lacks unknown, so the replica cannot be kept exactly; nothing "
        f"past {offset} is committed. Keep binlog_row_image = 'FULL' in every session (SET GLOBAL binlog_row_image "
        f"= 'FULL', and in the server config), then take {table} anew: {_TAKE_ANEW}"
    )


class BinlogReader:
    """Iterate the changes of ``schemas``' tables from ``start`` (exclusive of what it already covers).

    ``reload_schema(table)`` reads a table's current schema (discovery's ``load_table_schema`` on a
    control connection). ``stop`` ends the iteration at the first transaction boundary at or after it.
    ``watched`` names tables besides ``schemas``' whose DDL matters (a stopped table that may be created
    or renamed back): a DDL naming a captured or watched table is yielded as a ``SchemaStatement`` before
    its ``Committed``; ``track``/``untrack`` then tell the reader which tables it captures from there on.
    ``watch_new`` accepts the names of tables not known yet whose creation (or a rename to them) matters
    (tables chosen by patterns); with it the reader reads every table's events and filters them itself.
    ``blocking`` waits for new events (with heartbeats every ``heartbeat_seconds``) instead of
    ending when the binlog's current end is reached. Rows are decoded by ``row_decoder``, several
    times faster than mysql-replication; ``decode_rows=False`` leaves every row to mysql-replication
    (the reference the type matrix compares with). Iterating gives a ``ChangeRecord`` per row image;
    ``rows()`` a ``ChangeRows`` per rows event instead, which the stream turns into Arrow columns
    without a Python object per value (``row_columns``). ``events(file, position)`` opens where the
    events come from (``binlog_files.BinlogFiles.open``: binlog files); by default the server's dump,
    over a connection with ``connection_settings`` as replica ``server_id``.
    """

    def __init__(
        self,
        connection_settings: Mapping[str, Any],
        server_id: int,
        server_ids: ServerIdRange,
        schemas: Mapping[TableId, TableSchema],
        start: BinlogOffset,
        reload_schema: Callable[[TableId], TableSchema],
        stop: BinlogOffset | None = None,
        blocking: bool = False,
        heartbeat_seconds: float | None = None,
        session_time_zone: str = "+00:00",
        reconnects: int = 3,
        decode_rows: bool = True,
        watched: Collection[TableId] = (),
        watch_new: Callable[[TableId], bool] | None = None,
        events: Callable[[str, int], EventStream] | None = None,
    ) -> None:
        self._settings = dict(connection_settings)
        self._events = events or self._dump
        self._watched = frozenset(watched)
        self._watch_new = watch_new
        self._server_id = server_id
        self._server_ids = server_ids
        self._schemas = dict(schemas)
        self._keys = {t: t for t in self._schemas}  # each captured table's id as ``_schemas`` holds it
        self._table_of: dict[TableMap, TableId | None] = {}  # ``_captured``'s answers
        self._converters = {t: RowConverter(s, session_time_zone) for t, s in schemas.items()}
        self._time_zone = session_time_zone
        self._start = start
        self._reload_schema = reload_schema
        self._stop = stop
        self._blocking = blocking
        self._heartbeat = heartbeat_seconds
        self._reconnects = reconnects
        self._decoders = RowDecoders() if decode_rows else None
        self._legacy = LegacyRows(self._settings)  # the rows events the row decoder does not read
        self._described: dict[TableId, tuple[TableMap, TableMap]] = {}
        """The last table map checked per table, and the one its rows are decoded with: itself, or for a map
        without names the same completed from the schema (``completed``)."""
        self._names_logged: bool | None = None  # whether the last table map checked named its columns

    def track(self, schema: TableSchema) -> None:
        """Capture ``schema``'s table with these columns from the next event on (after a DDL)."""
        self._schemas[schema.id] = schema
        self._keys.setdefault(schema.id, schema.id)
        self._table_of.clear()
        self._converters[schema.id] = RowConverter(schema, self._time_zone)
        self._described.pop(schema.id, None)

    def untrack(self, table: TableId) -> None:
        """Capture ``table`` no more (dropped or renamed away); its DDL is still followed."""
        self._schemas.pop(table, None)
        self._keys.pop(table, None)
        self._table_of.clear()
        self._described.pop(table, None)
        self._watched = self._watched | {table}

    def __iter__(self) -> Iterator[Item]:
        """One record per row image. Reconnects from the last item's offset when the connection drops (a
        killed dump thread, a network blip, a server restart), up to ``reconnects`` times in a row."""
        return self._iterate(columnar=False)  # type: ignore[return-value]

    def rows(self) -> Iterator[RowsItem]:
        """One ``ChangeRows`` per rows event instead of a record per image (for Arrow), else as ``iter``."""
        return self._iterate(columnar=True)  # type: ignore[return-value]

    def _iterate(self, columnar: bool) -> Iterator[Item | RowsItem]:
        from pymysql.err import OperationalError

        resume, failures = self._start, 0
        while True:
            last: Item | RowsItem | None = None  # the last item yielded, which the next read resumes after
            try:
                for item in self._read_from(resume, columnar):
                    yield item
                    if not isinstance(item, SchemaChanged):
                        last = item
                    failures = 0
                return
            except OperationalError as exc:
                code = exc.args[0] if exc.args else None
                if code in _CONNECTION_LOST and failures < self._reconnects:
                    resume = last.offset if last is not None else resume
                    failures += 1
                    time.sleep(min(2.0**failures / 4, 10.0))
                    continue
                raise self._explain(exc) from exc

    def _read_from(self, resume: BinlogOffset, columnar: bool) -> Iterator[Item | RowsItem]:
        start = resume.at_transaction_start()
        if self._stop is not None and not start < self._stop:
            return
        dump = self._events(start.file, start.position)
        position = _Position(start)
        skip_events, skip_rows = resume.events_to_skip, resume.rows_to_skip
        table_of = self._table_of
        try:
            for event in dump:
                ts_ms = event.timestamp * 1000
                if isinstance(event, Rows):
                    table = table_of.get(event.table_map, _UNSEEN)
                    if table is _UNSEEN:
                        table = self._captured(event.table_map)
                    if table is None:
                        continue
                    index = position.row_events
                    position.row_events += 1
                    if skip_events:
                        skip_events -= 1
                        continue
                    record_base = _with_skips(position.boundary, index, 0)
                    if not event.full:
                        raise _partial_image(event, table, record_base, dump.log_file)
                    if (changed := self._follow_table_map(event, table, record_base)) is not None:
                        yield changed
                    if columnar:
                        yield self._rows(event, table, record_base, ts_ms, skip_rows, dump.format)
                    else:
                        yield from self._records(event, table, record_base, ts_ms, skip_rows, dump.format)
                    skip_rows = 0
                    continue
                if isinstance(event, Rotate):
                    if not position.in_transaction:
                        position.boundary = replace(position.boundary, file=event.next_binlog,
                                                    position=event.position)
                    continue
                if isinstance(event, HeartbeatEvent):
                    if not position.in_transaction:
                        yield Heartbeat(position.boundary)
                    continue
                if isinstance(event, Gtid):
                    if self._reached(position):  # the next transaction starts at or after the stop
                        return
                    position.in_transaction = True
                    position.pending_gtid = None if event.gtid.startswith(_NO_SOURCE) else event.gtid
                    continue
                query = event.query.strip().upper() if isinstance(event, Query) else ""
                if query == "BEGIN":
                    if not position.in_transaction and self._reached(position):
                        return
                    position.in_transaction = True
                    continue
                if isinstance(event, Query) and self._within_transaction(event, query, position, dump.log_file):
                    continue
                if isinstance(event, Query | Xid):
                    # Xid, the COMMIT of a non-transactional engine, or DDL (which commits implicitly)
                    if isinstance(event, Query) and (statement := self._statement(event, position, ts_ms)):
                        yield statement
                    yield from self._commit(position, dump.log_file, dump.log_pos, ts_ms)
                    if self._reached(position):
                        return
                    continue
                if isinstance(event, Undecoded):  # raises unless it can carry no rows
                    refuse_undecoded(event, dump.log_file, position.boundary)
        finally:
            dump.close()

    def _dump(self, file: str, position: int) -> EventStream:
        """The live server's events from ``file``:``position`` on (the default source)."""
        return BinlogDump(self._settings, self._server_id, file, position, self._blocking, self._heartbeat)

    def _captured(self, table_map: TableMap) -> TableId | None:
        """The captured table of ``table_map`` as ``_schemas`` holds its id, or None if it is not captured;
        remembered per table map (one object per definition: ``events.TableMaps``), so that a rows
        event costs no comparison of names, and the dictionaries find its table by that same object."""
        if len(self._table_of) >= TableMaps.MAX_ENTRIES:
            self._table_of.clear()
        table = self._table_of[table_map] = self._keys.get(table_map.table)
        return table

    def _within_transaction(self, event: Query, query: str, position: _Position, log_file: str) -> bool:
        """Whether the query event is a statement inside the open transaction, not its end: a savepoint, or
        a change logged as a statement (``row_statements``) of a table not captured; one of a captured
        table stops the reader."""
        if position.in_transaction and query.startswith(_SAVEPOINTS):
            return True
        written = parse_row_statement(event.query, event.schema.decode())
        if written is None:
            return False
        captured = written.writes(self._schemas.keys(), self._watch_new)
        if captured:
            raise IncompleteChangeError(
                f"{', '.join(map(str, captured))} changed at {position.boundary} (event ending at {log_file}:"
                f"{event.log_pos}) by a statement the binlog holds as text, not as rows: {_excerpt(event.query)}. "
                f"The session that ran it logged statements (SET SESSION binlog_format = 'STATEMENT' or 'MIXED'; "
                f"LOAD DATA under either), so the rows it changed are in no binlog event and the replica cannot "
                f"follow them; nothing past {position.boundary} is committed. Keep binlog_format = 'ROW' in every "
                f"session (SET GLOBAL binlog_format = 'ROW', and no writer with the privilege to change its "
                f"session's), then take these tables anew: {_TAKE_ANEW}"
            )
        return position.in_transaction and not query.startswith("CREATE")  # CREATE ... SELECT commits

    def _statement(self, event: Query, position: _Position, ts_ms: int) -> SchemaStatement | None:
        """The event's DDL if it names a captured or watched table."""
        database = event.schema.decode()
        ddl = parse_ddl(event.query, database)
        if ddl is None:
            return None
        mine = ddl.of(frozenset(self._schemas) | self._watched, self._watch_new)
        if not mine:
            return None
        return SchemaStatement(replace(ddl, changes=mine), position.boundary, ts_ms, self._names_logged)

    def _reached(self, position: _Position) -> bool:
        return self._stop is not None and not position.boundary < self._stop

    def _commit(self, position: _Position, log_file: str, log_pos: int, ts_ms: int) -> Iterator[Committed]:
        """The boundary after the transaction ending at ``log_file``:``log_pos``, its GTID added."""
        boundary, transaction_gtid = position.boundary, position.pending_gtid
        gtid = boundary.gtid
        if transaction_gtid and gtid is not None:
            gtid = position.advanced(gtid, transaction_gtid)
        position.boundary = _moved(boundary, log_file, log_pos, gtid)
        position.in_transaction, position.pending_gtid, position.row_events = False, None, 0
        yield Committed(position.boundary, ts_ms, transaction_gtid)

    def _follow_table_map(self, event: Rows, table: TableId, base: BinlogOffset) -> SchemaChanged | None:
        """The table's new schema if the event's table map is new and, naming its columns, does not describe the
        known one. A map without names is read by position: it must describe the known schema (the schema at
        this point of the binlog: the checkpoint's, followed through each DDL), else the reader stops; the
        server's schema of today is no answer, it may be ahead. The event then carries the map completed from
        the schema, for the row decoders (one object per map and schema, so their caches hold)."""
        table_map = event.table_map
        described = self._described.get(table)
        if described is not None and described[0] is table_map:
            event.table_map = described[1]
            return None
        columns, changed = table_map.columns, None
        self._names_logged = named(columns)
        if self._names_logged:
            decoded = table_map
            if not describes(columns, self._schemas[table]):
                changed = self._follow_schema(table, columns, base)
        else:
            schema = self._schemas[table]
            if not describes(columns, schema):
                raise SchemaChangeError(f"the binlog at {base} has rows of {table} that the schema the stream holds "
                                        f"for it there does not describe: {explain_mismatch(columns, schema)}; "
                                        f"nothing past {base} is committed.")
            decoded = TableMap(table_map.table_id, table_map.table, completed(columns, schema), table_map.packet)
        self._described[table] = (table_map, decoded)
        event.table_map = decoded
        return changed

    def _converted(self, event: Rows, table: TableId, fmt: Format) -> list[tuple[Any, ...]]:
        """The images as mysql-replication decodes them, converted to canonical values; never for a table map
        read by position (mysql-replication would decode it without the schema's signedness, character sets and
        members): ``_follow_table_map`` gave the event a completed map in place of its own."""
        if event.table_map is not self._described[table][0]:
            raise SchemaChangeError(
                f"the rows of {table} ending at binlog position {event.log_pos} have a column the row decoder does not "
                f"read, and their table map names no columns, so mysql-replication cannot read them exactly either: "
                f"SET GLOBAL binlog_row_metadata = 'FULL' (and in the server config), then take {table} anew: "
                f"{_TAKE_ANEW}")
        if len(event.kinds) == 2:
            keys: tuple[tuple[str, str], ...] = (
                ("before_values", "before_none_sources"), ("after_values", "after_none_sources")
            )
        else:
            keys = (("values", "none_sources"),)
        convert = self._converters[table]
        rows = self._legacy.rows(event, fmt)
        return [convert.from_binlog(row[values], row[nones]) for row in rows for values, nones in keys]

    def _rows(
        self, event: Rows, table: TableId, base: BinlogOffset, ts_ms: int, skip_rows: int, fmt: Format
    ) -> ChangeRows:
        ops = event.kinds
        images: Located | list[tuple[Any, ...]] | None = None
        if self._decoders is not None:
            images = self._decoders.locate(event, self._schemas[table])
            if images is None:  # a partial JSON update's images are read value by value
                images = self._decoders.row_images(event, self._schemas[table])
        if images is None:
            images = self._converted(event, table, fmt)
        count = images.count if isinstance(images, Located) else len(images)
        width = len(ops)
        skipped = min(skip_rows * width, count)
        keep = (False,) * skipped + (True,) * (count - skipped) if skipped else None
        return ChangeRows(ops, table, images, count, base, ts_ms, keep)

    def _records(
        self, event: Rows, table: TableId, base: BinlogOffset, ts_ms: int, skip_rows: int, fmt: Format
    ) -> Iterator[ChangeRecord]:
        images = self._decoders.row_images(event, self._schemas[table]) if self._decoders else None
        ops = event.kinds
        if images is None:
            images = self._converted(event, table, fmt)
        width = len(ops)
        offset = base
        for index in range(skip_rows * width, len(images)):
            row_index, image_index = divmod(index, width)
            if not image_index:
                offset = _with_rows_skipped(base, row_index + 1)
            yield ChangeRecord(ops[image_index], table, images[index], offset, ts_ms)

    def _follow_schema(self, table: TableId, columns: Sequence[Any], offset: BinlogOffset) -> SchemaChanged:
        current = self._reload_schema(table)
        if not describes(columns, current):
            raise SchemaChangeError(
                f"the binlog at {offset} has rows of {table} that its columns do not describe: "
                f"{explain_mismatch(columns, current)}; nothing past {offset} is committed."
            )
        self._schemas[table] = current
        self._converters[table] = RowConverter(current, self._time_zone)
        return SchemaChanged(current, offset)

    def _explain(self, exc: Exception) -> Exception:
        message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        clash = explain_server_id_clash(message, self._server_id, self._server_ids)
        if clash is not None:
            return clash
        if "could not find first log file" in message.lower() or "purged" in message.lower():
            return SourceConfigError(
                f"the binlog at {self._start} is no longer on the server ({message}): the changes since then are "
                f"lost to CDC. Re-snapshot the tables, and keep binlogs longer than the pipeline may stop."
            )
        return exc

