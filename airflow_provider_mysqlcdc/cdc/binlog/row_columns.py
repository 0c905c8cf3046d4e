"""Arrow columns straight from the row images of many binlog events, without a Python object per value.

``row_decoder`` finds, with a few operations per image, where each image's values are in its event's
packet (``Located``). Here the packets of many events of one table map are joined into one buffer,
and each column is read for all their images at once with numpy: the fixed-width wire formats are
gathered into a matrix of bytes and turned into the column's canonical Arrow values by arithmetic on
whole arrays (integers, floats, YEAR, DECIMAL of up to 18 digits, DATE, DATETIME, TIMESTAMP), and
UTF-8 text and bytes become Arrow's offsets and data buffers directly. Every other column (TIME, BIT,
ENUM, SET, BINARY, GEOMETRY, wider DECIMALs, other character sets) is read value by value with the
row decoder's own readers, so its values are the record path's by construction; ``test_type_matrix``
checks both against SELECT. A run of a few images (a table in a batch spread over hundreds of tables) is
read value by value whole (``FEW_IMAGES``), and its text a while longer (``SIZED_VECTOR_FROM``): numpy's
fixed cost per column is more than its values then.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import _FRACTION_BYTES, _FRACTION_SCALE, Located, _Fixed, _Sized
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_type
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import BinlogType

# (bytes, positions of the values, which are present, the column's Arrow type) -> its Arrow array
Vector = Callable[[np.ndarray, np.ndarray, np.ndarray, pa.DataType], pa.Array]
_US_PER_DAY = 86_400_000_000
_PADDING = 12  # zero bytes after the joined packets: the inline part of a short value's view may read into them
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
_INTEGERS = {"b": "<i1", "B": "<u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4", "q": "<i8", "Q": "<u8",
             "f": "<f4", "d": "<f8"}


# -- reading many values at once ---------------------------------------------------------------------


def _gather(data: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each position, one row each (rows of a strided view: no index per byte)."""
    # the windows built directly: numpy's sliding_window_view checks its arguments for ~30 us a call, more
    # than the gather itself for the few images a table has in a batch of many tables
    windows = np.ndarray((len(data) - width + 1, width), np.uint8, data, 0, (data.strides[0],) * 2)
    rows: np.ndarray = windows[positions]
    return rows


def _unsigned(data: np.ndarray, positions: np.ndarray, width: int, big_endian: bool) -> np.ndarray:
    """The unsigned integers of ``width`` (1..8) bytes at each position, as uint64."""
    padded = np.zeros((len(positions), 8), np.uint8)
    if big_endian:
        padded[:, 8 - width:] = _gather(data, positions, width)
        return padded.view(">u8").ravel().astype(np.uint64)
    padded[:, :width] = _gather(data, positions, width)
    return padded.view("<u8").ravel()


def arrow_array(values: np.ndarray, arrow: pa.DataType, present: np.ndarray | None = None) -> pa.Array:
    """An Arrow array of a fixed-width type over ``values`` (of that width), null where not ``present``.

    Built from the buffers: ``pa.array`` on numpy would import pandas, a second the first time."""
    values = np.ascontiguousarray(values)
    validity = None if present is None else _validity(present)
    return pa.Array.from_buffers(arrow, len(values), [validity, pa.py_buffer(values)])


def _validity(present: np.ndarray) -> pa.Buffer | None:
    """Arrow's validity bitmap of ``present``: its bits, least significant first (None if all present)."""
    return None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))


def _civil_days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Days since 1970-01-01 of each date, and whether it is a real date (Python's ``date`` accepts it);
    H. Hinnant's ``days_from_civil``."""
    valid = (year >= 1) & (year <= 9999) & (month >= 1) & (month <= 12) & (day >= 1)
    month = np.where(valid, month, 1)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    valid &= day <= _DAYS_IN_MONTH[month] + ((month == 2) & leap)
    y = np.where(valid, year, 1970) - (month <= 2)
    era = y // 400
    of_era = y - era * 400
    of_year = (153 * ((month + 9) % 12) + 2) // 5 + np.where(valid, day, 1) - 1
    return era * 146_097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719_468, valid


def _integer(code: str) -> Vector:
    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        values = _gather(data, at, struct.calcsize(code)).view(_INTEGERS[code]).ravel()
        return arrow_array(values, arrow, present)

    return read


def _int24(signed: bool) -> Vector:
    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        values = _unsigned(data, at, 3, big_endian=False).astype(np.int64)
        if signed:
            values -= (values & 0x800000) << 1
        return arrow_array(values.astype(np.int32 if signed else np.uint32), arrow, present)

    return read


def _year(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
    values = data[at].astype(np.int16)
    return arrow_array(np.where(values == 0, 0, values + 1900).astype(np.int16), arrow, present)


def _decimal(precision: int, scale: int) -> Vector | None:
    """DECIMAL's packed format (see ``row_decoder._decimal``) for up to 18 digits in up to 8 bytes."""
    integer, fraction = precision - scale, scale
    groups = [integer % 9] + [9] * (integer // 9) + [9] * (fraction // 9) + [fraction % 9]
    sizes = [(0, 1, 1, 2, 2, 3, 3, 4, 4, 4)[digits] for digits in groups]
    size = sum(sizes)
    if precision > 18 or size > 8:
        return None
    layout, shift = [], size * 8
    for digits, width in zip(groups, sizes, strict=True):
        shift -= width * 8
        if width:
            layout.append((shift, (1 << width * 8) - 1, 10**digits))
    sign = np.uint64(1 << (size * 8 - 1))

    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        value = _unsigned(data, at, size, big_endian=True)
        positive = (value & sign) != 0
        value = np.where(positive, value ^ sign, value ^ (sign - np.uint64(1)))
        unscaled = np.zeros(len(at), np.int64)
        for group_shift, mask, base in layout:
            unscaled = unscaled * base + ((value >> np.uint64(group_shift)) & np.uint64(mask)).astype(np.int64)
        unscaled = np.where(positive, unscaled, -unscaled)
        # decimal128: 16 bytes, little-endian two's complement
        words = np.empty((len(at), 2), np.int64)
        words[:, 0] = unscaled
        words[:, 1] = np.where(unscaled < 0, -1, 0)
        return pa.Array.from_buffers(arrow, len(at), [_validity(present), pa.py_buffer(words)])

    return read


def _date(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
    value = _unsigned(data, at, 3, big_endian=False).astype(np.int64)
    days, valid = _civil_days(value >> 9, value >> 5 & 15, value & 31)
    return arrow_array(days.astype(np.int32), arrow, present & valid)


def _datetime2(fsp: int) -> Vector:
    width = _FRACTION_BYTES[fsp]
    bits, scale = width * 8, _FRACTION_SCALE[width]

    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        value = _unsigned(data, at, 5 + width, big_endian=True)
        whole = ((value >> np.uint64(bits)).astype(np.int64)) - 0x8000000000
        ymd, hms = whole >> 17, whole & 0x1FFFF
        days, valid = _civil_days((ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31)
        hour, minute, second = hms >> 12, hms >> 6 & 63, hms & 63
        micro = (value & np.uint64((1 << bits) - 1)).astype(np.int64) * scale
        valid &= (hour < 24) & (minute < 60) & (second < 60) & (micro < 1_000_000)
        micros = days * _US_PER_DAY + (hour * 3600 + minute * 60 + second) * 1_000_000 + micro
        return arrow_array(np.where(valid, micros, 0), arrow, present & valid)

    return read


def _timestamp2(fsp: int) -> Vector:
    width = _FRACTION_BYTES[fsp]
    bits, scale = width * 8, _FRACTION_SCALE[width]

    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        value = _unsigned(data, at, 4 + width, big_endian=True)
        micros = (value >> np.uint64(bits)).astype(np.int64) * 1_000_000 + (
            value & np.uint64((1 << bits) - 1)).astype(np.int64) * scale
        return arrow_array(micros, arrow, present & (value != 0))

    return read


def _sized(length_size: int, text: bool) -> Vector:
    """Length-prefixed bytes, as Arrow views into the joined packets (16 bytes a value: the length and
    the first bytes, or the whole value if it has at most 12), which Arrow then copies into its
    offsets and data buffers; text is checked to be UTF-8."""
    view, flat = (pa.string_view(), pa.string()) if text else (pa.binary_view(), pa.binary())

    def read(data: np.ndarray, at: np.ndarray, present: np.ndarray, arrow: pa.DataType) -> pa.Array:
        lengths = np.where(present, _unsigned(data, at, length_size, big_endian=False), 0).astype(np.int32)
        starts = at + length_size
        if len(data) >= 2**31:
            raise _TooLarge
        views = np.zeros((len(at), 4), np.int32)
        views[:, 0] = lengths
        inline = _gather(data, starts, 12)  # ``data`` ends in 12 padding bytes: a value may end within them
        inline[np.arange(12) >= lengths[:, None]] = 0
        views.view(np.uint8)[:, 4:] = inline
        long = lengths > 12
        views[long, 2] = 0  # the buffer's index, then the value's offset in it
        views[long, 3] = starts[long]
        array = pa.Array.from_buffers(view, len(at), [_validity(present), pa.py_buffer(views),
                                                      pa.py_buffer(data)]).cast(flat)
        if text:
            array.validate(full=True)  # UTF-8, or pa.ArrowInvalid
        return array

    return read


class _TooLarge(Exception):
    """Joined packets of 2 GiB or more (beyond a view's offset): read value by value."""


def _vector(binlog: Any, reader: _Fixed | _Sized) -> Vector | None:
    """The column's reader of many values at once, or None: read it value by value."""
    kind = binlog.type
    if isinstance(reader, _Sized):
        if reader.convert is not None:
            return None
        if reader.encoding is None:
            return _sized(reader.length_size, text=False)
        return _sized(reader.length_size, text=True) if codecs.lookup(reader.encoding).name == "utf-8" else None
    if kind in (BinlogType.TINY, BinlogType.SHORT, BinlogType.LONG, BinlogType.LONGLONG, BinlogType.FLOAT,
                BinlogType.DOUBLE) and reader.convert is None:
        return _integer(reader.code)
    if kind == BinlogType.INT24:
        return _int24(not binlog.unsigned)
    if kind == BinlogType.YEAR:
        return _year
    if kind == BinlogType.NEWDECIMAL:
        return _decimal(binlog.precision, binlog.decimals)
    if kind == BinlogType.DATE:
        return _date
    if kind == BinlogType.DATETIME2:
        return _datetime2(binlog.fsp)
    if kind == BinlogType.TIMESTAMP2:
        return _timestamp2(binlog.fsp)
    return None


# -- reading one value at a time -----------------------------------------------------------------------


def _value_reader(reader: _Fixed | _Sized) -> Callable[[bytes, int], Any]:
    """Reads one value at a position, as the row decoder's generated code does."""
    convert = reader.convert
    if isinstance(reader, _Fixed):
        unpack = struct.Struct("<" + reader.code).unpack_from
        if convert is None:
            return lambda data, at: unpack(data, at)[0]
        return lambda data, at: convert(unpack(data, at)[0])
    size, encoding = reader.length_size, reader.encoding

    def read(data: bytes, at: int) -> Any:
        start = at + size
        value: Any = data[start:start + int.from_bytes(data[at:start], "little")]
        if encoding:
            value = value.decode(encoding)
        return convert(value) if convert else value

    return read


SIZED_VECTOR_FROM = 160
"""Images from which a text or bytes column is read with numpy (``_sized``); fewer are read value by value. Its
views into the joined packets and Arrow's copy of them into a string array cost 100-170 us before the first
value, the value reader about 1 us a value: 50 against 170 us for 70 images of bench.many_tables's ``sku``, 70
against 120 for its ``note``, about even at 140-210 (scratch, a loaded machine). Fixed-width columns cost numpy
20-100 us for 70 images and stay vectors from ``FEW_IMAGES`` on."""


class _Plan:
    """How to read each column of a decoder's images: many at once, or one by one (``sized`` columns below
    ``SIZED_VECTOR_FROM`` images too)."""

    def __init__(self, located: Located, schema: TableSchema) -> None:
        readers = located.layout.readers
        self.vectors = [_vector(b, r) for b, r in zip(located.decoder.binlog_columns, readers, strict=True)]
        self.sized = [isinstance(r, _Sized) for r in readers]
        self.values = [_value_reader(r) for r in readers]
        self.types = [arrow_type(c) for c in schema.columns]


def _plan(located: Located, schema: TableSchema) -> _Plan:
    decoder = located.decoder
    plan = decoder.columns_plan
    if not isinstance(plan, _Plan) or plan.types != [arrow_type(c) for c in schema.columns]:
        plan = decoder.columns_plan = _Plan(located, schema)
    return plan


def column_values(located: Located, index: int) -> list[Any]:
    """Column ``index`` of every image of one event, as canonical Python values (for key lookups)."""
    layout = located.layout
    segment, offset = layout.places[index]
    read = _value_reader(layout.readers[index])
    bit, data = 1 << index, located.data
    return [
        None if layout.nullable[index] and int.from_bytes(data[first:first + layout.null_bytes], "little") & bit
        else read(data, at + offset)
        for first, at in zip(located.starts[0], located.starts[segment], strict=True)
    ]


class LocatedImages:
    """The images of consecutive located events of one layout, gathered as they come: their packets, their
    image counts, and each segment's image starts in one list, without a Python object kept per event (a
    batch over many tables holds tens of thousands of small events, and the garbage collector's passes
    over them as objects cost more than reading them: bench/RESULTS.md "Stream over many tables").
    ``columns`` joins the packets and reads the images into Arrow at once."""

    __slots__ = ("first", "_packets", "_starts", "_counts")

    def __init__(self, first: Located) -> None:
        self.first = first  # its layout and decoder read every event of the run
        self._packets: list[bytes] = []
        self._starts: list[list[int]] = [[] for _ in range(first.layout.segments)]  # in each event's packet
        self._counts: list[int] = []

    def __len__(self) -> int:
        """Images held."""
        return len(self._starts[0])

    def add(self, located: Located) -> None:
        self._packets.append(located.data)
        self._counts.append(len(located.starts[0]))
        for joined, starts in zip(self._starts, located.starts, strict=True):
            joined.extend(starts)

    def columns(self, keep: np.ndarray | None, schema: TableSchema) -> list[pa.Array]:
        """The columns of the images ``keep`` selects (all if None), as the canonical Arrow arrays of ``schema``."""
        first, packets = self.first, self._packets
        layout, plan = first.layout, _plan(first, schema)
        if len(self) <= FEW_IMAGES:
            return _read_values(self._images(keep), layout, plan)
        buffer = b"".join([*packets, bytes(_PADDING)])
        data = np.frombuffer(buffer, np.uint8)
        sizes = np.fromiter(map(len, packets), np.int64, len(packets))
        bases = np.repeat(np.cumsum(sizes) - sizes, np.array(self._counts, np.int64))
        starts = [np.array(s, np.int64) + bases for s in self._starts]
        if keep is not None:
            starts = [s[keep] for s in starts]
        return _read_columns(buffer, data, starts, layout, plan)

    def _images(self, keep: np.ndarray | None) -> list[tuple[bytes, tuple[int, ...]]]:
        """Each image ``keep`` selects (all if None): its event's packet and its segments' starts in it."""
        packets = [packet for packet, count in zip(self._packets, self._counts, strict=True) for _ in range(count)]
        images = list(zip(packets, zip(*self._starts, strict=True), strict=True))
        return images if keep is None else [image for image, kept in zip(images, keep.tolist(), strict=True) if kept]


def located_columns(events: Sequence[Located], keep: np.ndarray | None, schema: TableSchema) -> list[pa.Array]:
    """The columns of the images of ``events`` (one layout, in order), of the images ``keep`` selects
    (all if None), as the canonical Arrow arrays of ``schema``."""
    images = LocatedImages(events[0])
    for event in events:
        images.add(event)
    return images.columns(keep, schema)


FEW_IMAGES = 48
"""Images up to which a run's columns are read value by value (``_read_values``): reading a column with numpy
costs 20-200 us before its first value (a dozen to fifty array operations and Arrow's buffers), and a table in a
stream batch spread over hundreds of tables has a few images. The seven columns of bench.many_tables's table
took 1.0 ms with numpy whatever the images up to 64, value by value 0.12 ms for 6 images, 0.55 ms for 32 and
0.96 ms for 64 (scratch, each the best of 5). Both ways give the same arrays (``test_type_matrix`` reads every
type both ways)."""


def _read_values(images: Sequence[tuple[bytes, Sequence[int]]], layout: Any, plan: _Plan) -> list[pa.Array]:
    """Each column of ``images`` (a packet and its segments' starts each), read value by value with the row
    decoder's readers (``plan.values``) and made Arrow as the record path makes its values."""
    width = layout.null_bytes
    nulls = [int.from_bytes(packet[starts[0]:starts[0] + width], "little") for packet, starts in images]
    columns = zip(layout.places, layout.nullable, plan.values, plan.types, strict=True)
    return [pa.array([None if nullable and bits >> index & 1 else read(packet, starts[segment] + offset)
                      for (packet, starts), bits in zip(images, nulls, strict=True)], kind)
            for index, ((segment, offset), nullable, read, kind) in enumerate(columns)]


def _read_columns(buffer: bytes, data: np.ndarray, starts: list[np.ndarray], layout: Any,
                  plan: _Plan) -> list[pa.Array]:
    """Each column of the images whose segments start at ``starts`` in ``data`` (``buffer``'s bytes)."""
    images = len(starts[0])
    nulls = _unsigned(data, starts[0], layout.null_bytes, big_endian=False) if layout.null_bytes <= 8 else None
    arrays = []
    for i, (segment, offset) in enumerate(layout.places):
        present = np.ones(images, np.bool_)
        if layout.nullable[i]:
            if nulls is not None:
                present = (nulls >> np.uint64(i) & np.uint64(1)) == 0
            else:
                byte = data[starts[0] + i // 8]
                present = (byte >> (i % 8) & 1) == 0
        at = np.where(present, starts[segment] + offset, 0)
        vector = plan.vectors[i]
        if vector is not None and (images >= SIZED_VECTOR_FROM or not plan.sized[i]):
            try:
                arrays.append(vector(data, at, present, plan.types[i]))
                continue
            except (_TooLarge, pa.ArrowInvalid):
                pass
        read = plan.values[i]
        arrays.append(pa.array([read(buffer, p) if ok else None
                                for p, ok in zip(at.tolist(), present.tolist(), strict=True)], plan.types[i]))
    return arrays
