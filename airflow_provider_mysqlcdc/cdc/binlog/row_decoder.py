"""Decoding the rows of binlog row events straight into the canonical values of ``type_registry``.

mysql-replication reads every value through a chain of Python calls that dispatch on the column
type, builds two dicts per row image (values and "none sources"), and ``RowConverter.from_binlog``
then walks both again: about 8k row events/s on one core. Here a table map is turned, once, into a
generated function that reads all the images of an event: each run of NOT NULL fixed-width columns
is unpacked by one ``struct`` call, variable-length columns are sliced, nullable columns are tested
against the image's NULL bitmap, and only the columns that need a conversion get a call.

Its values are those of ``RowConverter.from_binlog`` (``test_type_matrix`` checks both decoders
against SELECT), with every quirk documented at the types' rows in ``type_registry`` (FLOAT as its
exact float32, BIT as int/bool, BINARY re-padded, SET as 'a,c' and '' for the empty set, zero dates
and the zero TIMESTAMP as NULL, GEOMETRY without its SRID, YEAR 0000 as 0). TIME(fsp) is
decoded right in the first place rather than repaired. A type's registry row lists the binlog column
types it may arrive as; how each binlog column type is read is here (``_WIRE_READERS``).

MySQL's binary JSON is rendered as the text MySQL's SELECT prints (``json_binary``), VECTOR as its floats.
A PARTIAL_UPDATE_ROWS event (``binlog_row_value_options = PARTIAL_JSON``) is read value by value by
``row_images``: its after images may hold, for JSON columns, diffs to the before image's document, which
``partial_json`` applies (``locate`` leaves such events to it).

``RowDecoder.for_table`` returns None for what it does not know (the pre-5.6 temporal formats, a table map
without FULL metadata, a column whose binlog type does not match the known schema), and ``row_images``
returns None for an event whose row images are not FULL; the reader then leaves it to mysql-replication's
decoding (``legacy_rows``). Both leave the event's packet untouched, so that fallback can still read it.

The stream does not want tuples: ``locate`` runs a second generated function that only finds where
each image's values are (``Located``), and ``row_columns`` reads them into Arrow, many at a time.
"""

from __future__ import annotations

import codecs
import datetime as dt
import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.events import PARTIAL_UPDATE_ROWS, Rows
from airflow_provider_mysqlcdc.cdc.binlog.json_binary import packed_decimal
from airflow_provider_mysqlcdc.cdc.binlog.partial_json import packed_integer, updated_text
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import BinlogType, Converter, MySqlType, type_of
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

ImagesReader = Callable[[bytes, int, int], list[tuple[Any, ...]]]

_ROWS_EVENTS = frozenset({23, 24, 25, 30, 31, 32})  # WRITE/UPDATE/DELETE_ROWS v1 and v2, not PARTIAL_UPDATE
_PARTIAL_JSON = 1  # PARTIAL_JSON_UPDATES in a partial update's value options
_NONE_PARTIAL: Mapping[int, bytes | None] = {}
_FRACTION_BYTES = (0, 1, 1, 2, 2, 3, 3)  # by fsp
_FRACTION_SCALE = (1, 10_000, 100, 1)  # microseconds per stored unit, by fraction bytes
_EPOCH = dt.datetime(1970, 1, 1)
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from


class _UnexpectedNull(Exception):
    """A column the schema calls NOT NULL is NULL in an image (its nullability changed since)."""


@dataclass(frozen=True)
class _Fixed:
    """A value of a fixed width: ``code`` is its ``struct`` code (little-endian, or ``Ns`` for bytes)."""

    code: str
    convert: Converter | None = None


@dataclass(frozen=True)
class _Sized:
    """A value after a little-endian length of ``length_size`` bytes, decoded if ``encoding``."""

    length_size: int
    encoding: str | None = None
    convert: Converter | None = None


_Reader = _Fixed | _Sized
WireReader = Callable[[Any, Column, MySqlType], _Reader | None]
"""How to read a binlog column type, given the table map's column, the schema's, and its registry row."""


# -- the conversions of single values ---------------------------------------------------------------


def _decimal(precision: int, scale: int) -> _Fixed:
    """DECIMAL's packed format (``json_binary.packed_decimal``: a JSON document's opaque DECIMAL holds it too)."""
    size, read = packed_decimal(precision, scale)
    return _Fixed(f"{size}s", read)


def _fraction(fsp: int) -> tuple[int, int]:
    """Bits of the fraction after the integer part, and microseconds per unit stored there."""
    width = _FRACTION_BYTES[fsp]
    return width * 8, _FRACTION_SCALE[width]


def _datetime2(fsp: int) -> _Fixed:
    """5 big-endian bytes: 1 sign bit, year*13+month (17 bits), day, hour, minute, second; then the
    fraction. Zero and invalid dates become NULL."""
    bits, scale = _fraction(fsp)
    mask = (1 << bits) - 1

    def read(raw: bytes, from_bytes: Callable[..., int] = int.from_bytes,
             datetime: type[dt.datetime] = dt.datetime) -> dt.datetime | None:
        value = from_bytes(raw, "big")
        whole = (value >> bits) - 0x8000000000
        ymd, hms = whole >> 17, whole & 0x1FFFF
        year, month = divmod(ymd >> 5, 13)
        try:
            return datetime(year, month, ymd & 31, hms >> 12, hms >> 6 & 63, hms & 63, (value & mask) * scale)
        except ValueError:
            return None

    return _Fixed(f"{5 + bits // 8}s", read)


def _timestamp2(fsp: int) -> _Fixed:
    """4 big-endian bytes of seconds since the epoch (UTC), then the fraction. The zero TIMESTAMP is
    stored as epoch 0 and becomes NULL."""
    bits, scale = _fraction(fsp)
    mask = (1 << bits) - 1

    def read(raw: bytes, from_bytes: Callable[..., int] = int.from_bytes,
             timedelta: type[dt.timedelta] = dt.timedelta) -> dt.datetime | None:
        value = from_bytes(raw, "big")
        if not value:
            return None
        return _EPOCH + timedelta(0, value >> bits, (value & mask) * scale)

    return _Fixed(f"{4 + bits // 8}s", read)


def _time2(fsp: int) -> _Fixed:
    """3 big-endian bytes of sign, hour (10 bits), minute, second, offset by 0x800000; then the
    fraction. Integer part and fraction are one signed fixed-point number: -00:00:01.25 is stored as
    -2 s and +0.75 s, so the value is negated as a whole, never part by part."""
    bits, scale = _fraction(fsp)
    offset, mask = 0x800000 << bits, (1 << bits) - 1

    def read(raw: bytes) -> dt.timedelta:
        packed = int.from_bytes(raw, "big") - offset
        negative = packed < 0
        if negative:
            packed = -packed
        hms = packed >> bits
        value = dt.timedelta(0, (hms >> 12 & 0x3FF) * 3600 + (hms >> 6 & 63) * 60 + (hms & 63), (packed & mask) * scale)
        return -value if negative else value

    return _Fixed(f"{3 + bits // 8}s", read)


def _date(raw: bytes) -> dt.date | None:
    """3 little-endian bytes: day (5 bits), month (4 bits), year. Zero and invalid dates become NULL."""
    value = int.from_bytes(raw, "little")
    try:
        return dt.date(value >> 9, value >> 5 & 15, value & 31)
    except ValueError:
        return None


def _bit(bits: int, width: int) -> _Fixed:
    """Big-endian bytes; BIT(1) is a bool."""
    if width == 1:
        return _Fixed("1s", lambda raw: raw[0] & 1 == 1)
    mask = (1 << bits) - 1
    return _Fixed(f"{(bits + 7) // 8}s", lambda raw: int.from_bytes(raw, "big") & mask)


def _set(size: int, members: Sequence[str]) -> _Fixed:
    """A bitmask of members, joined in definition order; the empty set is ''."""

    @functools.lru_cache(maxsize=1024)
    def read(mask: int) -> str:
        return ",".join(m for i, m in enumerate(members) if mask >> i & 1)

    return _unsigned(size, read)


def _unsigned(size: int, convert: Converter | None) -> _Fixed:
    """A little-endian unsigned integer of 1..8 bytes."""
    code = {1: "B", 2: "H", 4: "I", 8: "Q"}.get(size)
    if code is not None:
        return _Fixed(code, convert)
    then = convert or (lambda v: v)
    return _Fixed(f"{size}s", lambda raw: then(int.from_bytes(raw, "little")))


def _int24(signed: bool) -> _Fixed:
    return _Fixed("3s", lambda raw: int.from_bytes(raw, "little", signed=signed))


# -- one reader per column ----------------------------------------------------------------------------


def _encoding(binlog: Any) -> str | None:
    """The Python codec mysql-replication decodes a text column with, if Python has it."""
    from pymysql.charset import charset_by_name

    name = binlog.character_set_name
    if name is None:
        return "utf-8"
    charset = charset_by_name(name)
    encoding = charset.encoding if charset else name
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return str(encoding)


def _integer(code: str) -> WireReader:
    """A little-endian integer: ``code`` is its signed ``struct`` code."""
    return lambda binlog, column, spec: _Fixed(code.upper() if binlog.unsigned else code)


def _bit_reader(binlog: Any, column: Column, spec: MySqlType) -> _Reader | None:
    width = column.precision or binlog.bits
    return _bit(binlog.bits, width) if width == binlog.bits else None


def _enum_reader(binlog: Any, column: Column, spec: MySqlType) -> _Reader | None:
    return _unsigned(binlog.size, tuple(binlog.enum_values).__getitem__) if binlog.enum_values else None


def _set_reader(binlog: Any, column: Column, spec: MySqlType) -> _Reader | None:
    return _set(binlog.size, tuple(binlog.set_values)) if binlog.set_values else None


def _string_reader(binlog: Any, column: Column, spec: MySqlType) -> _Reader | None:
    """A length-prefixed value: characters are decoded with the column's character set, and the
    type's binlog conversion applied (BINARY re-padded, GEOMETRY without its SRID, MySQL's binary JSON as
    its text, VECTOR as its floats)."""
    kind = binlog.type
    if kind in _LENGTH_IN_METADATA:
        length_size = binlog.length_size
    else:
        length_size = 2 if binlog.max_length > 255 else 1
    encoding = None
    if spec.text:
        encoding = _encoding(binlog)
        if encoding is None:
            return None
    return _Sized(length_size, encoding, spec.from_binlog(column))


_LENGTH_IN_METADATA = frozenset({BinlogType.BLOB, BinlogType.GEOMETRY, BinlogType.JSON, BinlogType.VECTOR})
"""Types whose table map metadata is the size of their values' length prefix."""

# how each binlog column type is read: the registry's rows say which schema types may arrive as which
_WIRE_READERS: dict[int, WireReader] = {
    BinlogType.TINY: _integer("b"),
    BinlogType.SHORT: _integer("h"),
    BinlogType.LONG: _integer("i"),
    BinlogType.LONGLONG: _integer("q"),
    BinlogType.INT24: lambda binlog, column, spec: _int24(not binlog.unsigned),
    BinlogType.FLOAT: lambda binlog, column, spec: _Fixed("f"),  # a float32 widened to a double is exact
    BinlogType.DOUBLE: lambda binlog, column, spec: _Fixed("d"),
    # the byte is years since 1900, 0 is YEAR 0000
    BinlogType.YEAR: lambda binlog, column, spec: _Fixed("B", lambda v: v + 1900 if v else 0),
    BinlogType.NEWDECIMAL: lambda binlog, column, spec: _decimal(binlog.precision, binlog.decimals),
    BinlogType.DATE: lambda binlog, column, spec: _Fixed("3s", _date),
    BinlogType.DATETIME2: lambda binlog, column, spec: _datetime2(binlog.fsp),
    BinlogType.TIMESTAMP2: lambda binlog, column, spec: _timestamp2(binlog.fsp),
    BinlogType.TIME2: lambda binlog, column, spec: _time2(binlog.fsp),
    BinlogType.BIT: _bit_reader,
    BinlogType.ENUM: _enum_reader,
    BinlogType.SET: _set_reader,
    BinlogType.VARCHAR: _string_reader,
    BinlogType.STRING: _string_reader,
    BinlogType.BLOB: _string_reader,
    BinlogType.GEOMETRY: _string_reader,
    BinlogType.JSON: _string_reader,
    BinlogType.VECTOR: _string_reader,
}


def _column_reader(binlog: Any, column: Column) -> _Reader | None:
    """How to read one column, from its binlog type and metadata and its schema; None if unknown
    (a binlog type the column's registry row does not list: a schema gone stale, a format not decoded)."""
    spec = type_of(column)
    if binlog.type not in spec.binlog_types:
        return None
    return _WIRE_READERS[binlog.type](binlog, column, spec)


# -- the generated reader of an event's images ------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _code(source: str, kind: str) -> Any:
    """``source`` compiled, once per text: the code names no table (the readers are in the namespace it runs
    in), so the tables of a database that share a shape share it; compiling was most of a decoder's cost
    (0.4 of 0.47 s for 1,000 tables, at every start of the stream)."""
    return compile(source, f"<{kind}>", "exec")


def _compile(readers: Sequence[_Reader], nullable: Sequence[bool]) -> ImagesReader:
    """Generate the function that reads every image from ``data[pos:end]``.

    Only constants of this module and the readers' objects (passed by name in the namespace) go
    into the code, never a column name or a value.
    """
    env: dict[str, Any] = {"u16": _U16, "u32": _U32, "unexpected_null": _UnexpectedNull}
    null_bytes = (len(readers) + 7) // 8
    not_null = sum(1 << i for i, n in enumerate(nullable) if not n)
    body = [
        "def images(data, pos, end):",
        "    out = []",
        "    append = out.append",
        "    while pos < end:",
        "        nulls = data[pos]" if null_bytes == 1 else
        f"        nulls = int.from_bytes(data[pos:pos + {null_bytes}], 'little')",
        f"        pos += {null_bytes}",
    ]
    if not_null:
        body.append(f"        if nulls & {not_null}: raise unexpected_null")
    values: list[str] = []
    run: list[tuple[int, _Fixed]] = []  # NOT NULL fixed-width columns in a row, read by one struct

    def flush() -> None:
        if not run:
            return
        first, fmt = run[0][0], "<" + "".join(r.code for _, r in run)
        env[f"s{first}"] = struct.Struct(fmt).unpack_from
        body.append(f"        {''.join(f'v{i}, ' for i, _ in run)}= s{first}(data, pos)")
        body.append(f"        pos += {struct.calcsize(fmt)}")
        run.clear()

    for i, reader in enumerate(readers):
        if reader.convert is not None:
            env[f"c{i}"] = reader.convert
        if isinstance(reader, _Fixed) and not nullable[i]:
            run.append((i, reader))
            values.append(f"c{i}(v{i})" if reader.convert else f"v{i}")
            continue
        flush()
        if isinstance(reader, _Fixed):
            read = f"s{i}(data, pos)[0]"
            env[f"s{i}"] = struct.Struct("<" + reader.code).unpack_from
            lines = [f"v{i} = {f'c{i}({read})' if reader.convert else read}",
                     f"pos += {struct.calcsize('<' + reader.code)}"]
        else:
            lines = _sized_lines(i, reader, env)
        if nullable[i]:
            body.append(f"        if nulls & {1 << i}:")
            body.append(f"            v{i} = None")
            body.append("        else:")
            body.extend(f"            {line}" for line in lines)
        else:
            body.extend(f"        {line}" for line in lines)
        values.append(f"v{i}")
    flush()
    body.append(f"        append(({', '.join(values)},))")
    body.append("    if pos != end:")
    body.append("        raise misaligned(pos, end)")
    body.append("    return out")
    env["misaligned"] = _misaligned
    exec(_code("\n".join(body), "row images"), env)  # noqa: S102
    images: ImagesReader = env["images"]
    return images


def _sized_lines(i: int, reader: _Sized, env: dict[str, Any]) -> list[str]:
    length = {
        1: "data[pos]",
        2: "u16(data, pos)[0]",
        3: "int.from_bytes(data[pos:pos + 3], 'little')",
        4: "u32(data, pos)[0]",
    }[reader.length_size]
    value = "data[pos:pos + n]"
    if reader.encoding:
        env[f"e{i}"] = reader.encoding
        value += f".decode(e{i})"
    if reader.convert:
        value = f"c{i}({value})"
    return [f"n = {length}", f"pos += {reader.length_size}", f"v{i} = {value}", "pos += n"]


def _compile_locate(readers: Sequence[_Reader], nullable: Sequence[bool]) -> tuple[Locator, Layout]:
    """Generate the function that finds where each image's values are, without reading them.

    A row image is cut into *segments*: the first starts at the image (its NULL bitmap), and a new one
    after every column whose width varies (a length-prefixed or a nullable column). The function
    appends each image's segment starts to one list per segment; every column is then at a constant
    offset from its segment's start, so ``row_columns`` gathers a column of all images at once.
    That leaves a few operations per image in Python: the NULL bitmap and the varying widths.
    """
    env: dict[str, Any] = {"u16": _U16, "u32": _U32, "unexpected_null": _UnexpectedNull, "misaligned": _misaligned}
    null_bytes = (len(readers) + 7) // 8
    not_null = sum(1 << i for i, n in enumerate(nullable) if not n)
    varying = [isinstance(r, _Sized) or n for r, n in zip(readers, nullable, strict=True)]
    segments = 1 + sum(varying[:-1])
    starts = ", ".join(f"s{k}" for k in range(segments))
    body = ["def locate(data, pos, end):", *(f"    s{k} = []; m{k} = s{k}.append" for k in range(segments)),
            "    while pos < end:", "        m0(pos)"]
    if any(nullable) or not_null:
        body.append("        nulls = data[pos]" if null_bytes == 1 else
                    f"        nulls = int.from_bytes(data[pos:pos + {null_bytes}], 'little')")
    if not_null:
        body.append(f"        if nulls & {not_null}: raise unexpected_null")
    places: list[tuple[int, int]] = []
    segment, offset = 0, null_bytes
    for i, reader in enumerate(readers):
        places.append((segment, offset))
        if not varying[i]:
            offset += struct.calcsize("<" + reader.code) if isinstance(reader, _Fixed) else 0
            continue
        lines = [f"pos += {offset}"] if offset else []
        if isinstance(reader, _Fixed):
            step = [f"pos += {struct.calcsize('<' + reader.code)}"]
        else:
            step = [f"pos += {reader.length_size} + {_LENGTHS[reader.length_size]}"]
        body.extend(f"        {line}" for line in lines)
        if nullable[i]:
            body.append(f"        if not nulls & {1 << i}:")
            body.extend(f"            {line}" for line in step)
        else:
            body.extend(f"        {line}" for line in step)
        offset = 0
        if i < len(readers) - 1:
            segment += 1
            body.append(f"        m{segment}(pos)")
    if offset:
        body.append(f"        pos += {offset}")
    body += ["    if pos != end:", "        raise misaligned(pos, end)", f"    return ({starts},)"]
    exec(_code("\n".join(body), "row image places"), env)  # noqa: S102
    locate: Locator = env["locate"]
    return locate, Layout(tuple(readers), tuple(nullable), null_bytes, segments, tuple(places))


_LENGTHS = {  # a length prefix at ``pos``, by its size
    1: "data[pos]",
    2: "u16(data, pos)[0]",
    3: "int.from_bytes(data[pos:pos + 3], 'little')",
    4: "u32(data, pos)[0]",
}

Locator = Callable[[bytes, int, int], tuple[list[int], ...]]


@dataclass(frozen=True, eq=False)
class Layout:
    """Where the values of an image are: column ``i`` at ``places[i] = (segment, offset)``, ``offset``
    bytes after that segment's start; the NULL bitmap (``null_bytes``) at the start of segment 0. A
    nullable column is tested against the bitmap, the others only if ``nullable`` says so."""

    readers: tuple[_Reader, ...]
    nullable: tuple[bool, ...]
    null_bytes: int
    segments: int
    places: tuple[tuple[int, int], ...]


@dataclass(frozen=True, eq=False)
class Located:
    """The images of one rows event as bytes and places: ``starts[k]`` holds segment ``k``'s start in
    ``data`` for every image, in order; ``decoder`` made it (``row_columns`` turns it into Arrow)."""

    decoder: RowDecoder
    layout: Layout
    data: bytes
    starts: tuple[list[int], ...]

    @property
    def count(self) -> int:
        return len(self.starts[0])


def _misaligned(pos: int, end: int) -> RowDecodeError:
    return RowDecodeError(f"a row event's images end at byte {pos}, not at its end {end}: the table map does "
                         f"not describe the rows (a bug in the row decoder)")


class RowDecoder:
    """Reads the row images of one table map's events; built once per table map by ``for_table``."""

    def __init__(self, readers: Sequence[_Reader], nullable: Sequence[bool]) -> None:
        self._readers = list(readers)
        self._columns = len(readers)
        self._images = _compile(self._readers, nullable)
        self._locate, self.layout = _compile_locate(self._readers, nullable)
        self.binlog_columns: Sequence[Any] = ()
        """The table map's columns it was built for (``row_columns`` reads their metadata)."""
        self.columns_plan: Any = None
        """What ``row_columns`` derives from this decoder, kept with it."""

    @classmethod
    def for_table(cls, schema: TableSchema, binlog_columns: Sequence[Any]) -> RowDecoder | None:
        """A decoder for the table map's columns (``events.BinlogColumn``), or None if
        one of them is of a type or in a form it does not decode."""
        if len(binlog_columns) != len(schema.columns):
            return None
        readers = [_column_reader(b, c) for b, c in zip(binlog_columns, schema.columns, strict=True)]
        if any(r is None for r in readers):
            return None
        decoder = cls([r for r in readers if r is not None], [c.nullable for c in schema.columns])
        decoder.binlog_columns = binlog_columns
        return decoder

    def _span(self, event: Rows) -> tuple[bytes, int, int] | None:
        """The event's packet and where its images are in it, or None if this decoder cannot read it."""
        if (
            event.type_code not in _ROWS_EVENTS
            or event.column_count != self._columns
            or not event.full
        ):
            return None
        return event.data, event.start, event.end

    def _all_nullable(self) -> None:
        """A NOT NULL column was NULL (it became nullable): from now on test every column's NULL bit."""
        every = [True] * self._columns
        self._images = _compile(self._readers, every)
        self._locate, self.layout = _compile_locate(self._readers, every)

    def row_images(self, event: Rows) -> list[tuple[Any, ...]] | None:
        """The event's row images in canonical values, in order (an update's before and after image
        in turn), or None if this decoder cannot read this event."""
        if event.type_code == PARTIAL_UPDATE_ROWS:
            return self._partial_images(event) if event.full and event.column_count == self._columns else None
        span = self._span(event)
        if span is None:
            return None
        try:
            return self._images(*span)
        except _UnexpectedNull:
            self._all_nullable()
            return self._images(*span)

    def _partial_images(self, event: Rows) -> list[tuple[Any, ...]]:
        """A PARTIAL_UPDATE_ROWS event's images, value by value (``partial_json``): each row's before image, its
        value options, then (partial JSON) a bit per JSON column saying which hold diffs, and its after image,
        those columns being the before image's documents with the diffs applied."""
        data, pos, end = event.data, event.start, event.end
        documents = [i for i, b in enumerate(self.binlog_columns) if b.type == BinlogType.JSON]
        images: list[tuple[Any, ...]] = []
        while pos < end:
            before, pos = self._image(data, pos)
            options, pos = packed_integer(data, pos)
            partial: dict[int, bytes | None] = {}
            if options & _PARTIAL_JSON:
                bits = int.from_bytes(data[pos:pos + (len(documents) + 7) // 8], "little")
                pos += (len(documents) + 7) // 8
                partial = {c: before[1].get(c) for k, c in enumerate(documents) if bits >> k & 1}
            after, pos = self._image(data, pos, partial)
            images += (before[0], after[0])
        if pos != end:
            raise _misaligned(pos, end)
        return images

    def _image(self, data: bytes, pos: int, partial: Mapping[int, bytes | None] = _NONE_PARTIAL,
               ) -> tuple[tuple[tuple[Any, ...], dict[int, bytes]], int]:
        """The image at ``pos`` read value by value, its JSON columns' binary documents, and where it ends; the
        columns of ``partial`` hold diffs to their documents there (``partial_json``)."""
        nulls = int.from_bytes(data[pos:pos + (self._columns + 7) // 8], "little")
        pos += (self._columns + 7) // 8
        values: list[Any] = []
        documents: dict[int, bytes] = {}
        for i, reader in enumerate(self._readers):
            if nulls >> i & 1:
                values.append(None)
                continue
            if isinstance(reader, _Fixed):
                value = struct.unpack_from("<" + reader.code, data, pos)[0]
                pos += struct.calcsize("<" + reader.code)
            else:
                start = pos + reader.length_size
                pos = start + int.from_bytes(data[pos:start], "little")
                value = documents[i] = data[start:pos]
                if i in partial:
                    values.append(updated_text(partial[i], value))
                    continue
                if reader.encoding:
                    value = value.decode(reader.encoding)
            values.append(reader.convert(value) if reader.convert else value)
        return (tuple(values), documents), pos

    def locate(self, event: Rows) -> Located | None:
        """The event's images as places in its packet (``row_columns`` reads the values), or None if
        this decoder cannot read this event."""
        span = self._span(event)
        if span is None:
            return None
        while True:
            layout = self.layout
            try:
                starts = self._locate(*span)
            except _UnexpectedNull:
                self._all_nullable()
                continue
            return Located(self, layout, span[0], starts)


# the table map's column attributes a decoder depends on
_METADATA = (
    "type", "name", "unsigned", "max_length", "length_size", "precision", "decimals", "fsp", "bits", "size",
    "character_set_name", "enum_values", "set_values",
)


def _signature(binlog_columns: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(
        tuple(tuple(v) if isinstance(v := getattr(c, a, None), list) else v for a in _METADATA)
        for c in binlog_columns
    )


_LAYOUTS_KEPT = 4096
"""Decoders of distinct layouts kept at most (``RowDecoders``); past them all are built anew as needed."""


@dataclass
class _Built:
    columns: Sequence[Any]
    signature: tuple[Any, ...]
    schema: TableSchema
    decoder: RowDecoder | None


class RowDecoders:
    """The decoder of each table, rebuilt when its table map or schema changes.

    Every transaction repeats the table map: the same parse (``events.TableMaps``) is recognised
    by identity, an equal one by its metadata, and only a changed one costs a new decoder. Tables of one
    layout (a database per tenant, a table per month) share a decoder, and what ``row_columns`` derives from
    it: building both took 0.18 ms for bench.many_tables's table (0.13 ms the decoder, 0.05 ms the plan, timed
    in a loop), paid by each table of a whole database in the stream's first batch. (A shared decoder that
    meets a NULL in a NOT NULL column tests every NULL bit from then on, for each table sharing it: still
    exact, a little slower.)
    """

    def __init__(self) -> None:
        self._built: dict[Any, _Built] = {}
        self._by_layout: dict[tuple[Any, ...], RowDecoder | None] = {}
        """Decoders by table map metadata and columns (``None``: no decoder reads that layout)."""

    def row_images(self, event: Rows, schema: TableSchema) -> list[tuple[Any, ...]] | None:
        """The event's images (see ``RowDecoder.row_images``), or None to leave it to mysql-replication."""
        decoder = self.decoder(event, schema)
        return decoder.row_images(event) if decoder is not None else None

    def decoder(self, event: Rows, schema: TableSchema) -> RowDecoder | None:
        """The decoder of the event's table map and ``schema``, or None if there is none for them."""
        built, columns = self._built.get(schema.id), event.table_map.columns
        if built is None or built.columns is not columns or built.schema is not schema:
            signature = _signature(columns)
            if built is None or built.signature != signature or built.schema is not schema:
                layout = (signature, schema.columns)
                if layout not in self._by_layout:
                    if len(self._by_layout) >= _LAYOUTS_KEPT:
                        self._by_layout.clear()
                    self._by_layout[layout] = RowDecoder.for_table(schema, columns)
                built = _Built(columns, signature, schema, self._by_layout[layout])
                self._built[schema.id] = built
            built.columns = columns
        return built.decoder

    def locate(self, event: Rows, schema: TableSchema) -> Located | None:
        """The event's images as places (see ``RowDecoder.locate``), or None to leave it to mysql-replication."""
        decoder = self.decoder(event, schema)
        return decoder.locate(event) if decoder is not None else None
