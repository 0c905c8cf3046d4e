"""MySQL's binary JSON (a JSON column's value in a row image) as the text MySQL's ``SELECT`` prints for it.

MySQL stores a JSON document in its own binary format, and the binlog carries those bytes: a type byte, then
the value. Objects and arrays come in a small form (2-byte counts, sizes and offsets) and a large one (4
bytes); each has a header of entries, an object's key entries (offset, length) before its value entries
(type, then the offset of the value or the value itself: literals, int16 and uint16 always, int32 and
uint32 in the large form), and offsets count from the container's first byte after its type byte. Scalars
are literals (null, true, false), little-endian [u]int16/32/64, doubles, utf8mb4 strings after a length in
7-bit groups (low group first, high bit set while more follow), and opaque values: a MySQL field type, such
a length and the value's bytes. MySQL sorts an object's keys by length, then bytes, when it stores them,
so the stored order is the order ``SELECT`` prints.

The text is ``Json_wrapper::to_string``'s: ``{"key": value, ...}`` and ``[a, b]`` with ", " and ": ";
strings quoted with ``"``, ``\\``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t`` escaped and the other control
characters as ``\\u00xx``, everything else as it is; doubles as ``my_gcvt`` writes them with the widest
field (the shortest digits that read back the same double, as Python finds them; plain notation for a
decimal exponent from -15 to 15, else ``1.5e300``/``1e-16``), with ".0" appended where that shows neither a
point nor an exponent. Opaque values of the temporal types print as quoted ``YYYY-MM-DD`` (DATE),
``YYYY-MM-DD hh:mm:ss.ffffff`` (DATETIME, TIMESTAMP) and ``hh:mm:ss.ffffff`` (TIME, signed, hours past 24),
DECIMAL as a number with its scale's digits, VAR_STRING as a string, and any other as
``"base64:typeNN:<base64>"`` (MySQL's base64: a newline after every 76 characters). An empty value is the
JSON null (MySQL reads it so: a NOT NULL JSON column given NULL in a non-strict mode stores it).

``parse`` gives a document as Python values (``partial_json`` applies diffs to it), ``render`` its text;
``to_text`` does both (the JSON column's binlog conversion in ``type_registry``).
"""

from __future__ import annotations

import base64
import decimal
import re
import struct
from collections.abc import Callable
from typing import Any

from airflow_provider_mysqlcdc.exceptions import RowDecodeError

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY = 0, 1, 2, 3
_LITERAL, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE = 4, 5, 6, 7, 8, 9, 10, 11
_STRING, _OPAQUE = 12, 15
_LITERALS = {0: None, 1: True, 2: False}
_SCALARS = {
    _INT16: struct.Struct("<h"), _UINT16: struct.Struct("<H"), _INT32: struct.Struct("<i"),
    _UINT32: struct.Struct("<I"), _INT64: struct.Struct("<q"), _UINT64: struct.Struct("<Q"),
    _DOUBLE: struct.Struct("<d"),
}
_INLINED_SMALL = frozenset({_LITERAL, _INT16, _UINT16})
_INLINED_LARGE = frozenset({_LITERAL, _INT16, _UINT16, _INT32, _UINT32})
# MySQL field types an opaque value may carry that print as more than base64
_TIMESTAMP, _DATE, _TIME, _DATETIME, _VAR_STRING, _NEWDECIMAL = 7, 10, 11, 12, 253, 246
_DECIMAL_GROUP_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a group of 0..9 decimal digits
_SPECIAL = re.compile(r'[\x00-\x1f"\\]')
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FRACTION = 1 << 24  # a packed temporal value's microseconds are its low 24 bits


class Text(str):
    """A scalar already in its JSON text (an opaque value: a DECIMAL number, a quoted date, base64)."""

    __slots__ = ()


def packed_decimal(precision: int, scale: int) -> tuple[int, Callable[[bytes], decimal.Decimal]]:
    """The size and reader of MySQL's packed DECIMAL(precision, scale) (a DECIMAL column's binlog value and a
    JSON document's opaque DECIMAL alike): groups of 9 digits in 4 big-endian bytes, a shorter leading group of
    integer digits and trailing group of fraction digits, the sign bit flipped on, and all bits inverted for a
    negative value. The value keeps ``scale`` fraction digits."""
    integer, fraction = precision - scale, scale
    groups = [integer % 9] + [9] * (integer // 9) + [9] * (fraction // 9) + [fraction % 9]
    sizes = [_DECIMAL_GROUP_BYTES[digits] for digits in groups]
    size = sum(sizes)
    layout, shift = [], size * 8
    for digits, width in zip(groups, sizes, strict=True):
        shift -= width * 8
        if width:
            layout.append((shift, (1 << width * 8) - 1, 10**digits))
    sign = 1 << (size * 8 - 1)
    positive, negative = "%d" + f"E-{scale}", "-%d" + f"E-{scale}"

    def read(raw: bytes, from_bytes: Callable[..., int] = int.from_bytes) -> decimal.Decimal:
        value = from_bytes(raw, "big")
        if value & sign:
            value ^= sign
            text = positive
        else:
            value ^= sign - 1
            text = negative
        unscaled = 0
        for at, mask, base in layout:
            unscaled = unscaled * base + (value >> at & mask)
        return decimal.Decimal(text % unscaled)

    return size, read


# -- bytes to Python values ---------------------------------------------------------------------------


def to_text(value: bytes) -> str:
    """The text MySQL's SELECT prints for a JSON column holding ``value`` (its binary JSON)."""
    return render(parse(value))


def parse(value: bytes) -> Any:
    """A binary JSON document as Python values: dict (in stored key order), list, str, int, float, True,
    False, None, and ``Text`` for opaque values."""
    if not isinstance(value, bytes):
        raise RowDecodeError(f"MySQL's binary JSON arrived as {type(value).__name__}, not as its bytes: only the row "
                             f"decoder reads it exactly (mysql-replication's decoding of it is not MySQL's text)")
    if not value:
        return None
    try:
        return _value(value[0], value, 1, len(value))
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise RowDecodeError(f"a JSON value of {len(value)} bytes is not MySQL's binary JSON ({exc})") from exc


def _value(kind: int, data: bytes, at: int, end: int) -> Any:
    """The value of type ``kind`` whose bytes start at ``at`` (a container's after its type byte)."""
    if kind <= _LARGE_ARRAY:
        return _container(kind, data, at, end)
    if kind == _STRING:
        length, at = _length(data, at)
        return data[at:at + length].decode("utf-8")
    if kind == _LITERAL:
        return _literal(data[at])
    if kind == _OPAQUE:
        field_type = data[at]
        length, at = _length(data, at + 1)
        return _opaque(field_type, data[at:at + length])
    scalar = _SCALARS.get(kind)
    if scalar is None:
        raise RowDecodeError(f"binary JSON holds a value of type {kind:#04x}, which MySQL's format has not")
    return scalar.unpack_from(data, at)[0]


def _literal(code: int) -> Any:
    if code not in _LITERALS:
        raise RowDecodeError(f"binary JSON holds the literal {code:#04x}, which MySQL's format has not")
    return _LITERALS[code]


def _length(data: bytes, at: int) -> tuple[int, int]:
    """A length in 7-bit groups, low group first, and where the bytes after it start."""
    length = shift = 0
    while True:
        byte = data[at]
        at += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length, at
        shift += 7


def _container(kind: int, data: bytes, base: int, end: int) -> dict[str, Any] | list[Any]:
    large = kind in (_LARGE_OBJECT, _LARGE_ARRAY)
    offset = struct.Struct("<I" if large else "<H").unpack_from
    width = 4 if large else 2
    count, size = offset(data, base)[0], offset(data, base + width)[0]
    if base + size > end:
        raise RowDecodeError(f"a binary JSON container of {size} bytes overruns its value ({end - base} left)")
    inlined = _INLINED_LARGE if large else _INLINED_SMALL
    entries = base + 2 * width
    keys: list[str] = []
    if kind in (_SMALL_OBJECT, _LARGE_OBJECT):
        for _ in range(count):
            key_at, key_length = offset(data, entries)[0], int.from_bytes(data[entries + width:entries + width + 2],
                                                                         "little")
            keys.append(data[base + key_at:base + key_at + key_length].decode("utf-8"))
            entries += width + 2
    values = []
    for _ in range(count):
        value_kind = data[entries]
        if value_kind in inlined:
            value = _literal(data[entries + 1]) if value_kind == _LITERAL else _SCALARS[value_kind].unpack_from(
                data, entries + 1)[0]
        else:
            value = _value(value_kind, data, base + offset(data, entries + 1)[0], base + size)
        values.append(value)
        entries += 1 + width
    return dict(zip(keys, values, strict=True)) if kind in (_SMALL_OBJECT, _LARGE_OBJECT) else values


def _opaque(field_type: int, raw: bytes) -> Any:
    """An opaque value as ``Json_wrapper`` prints it: temporal types as their quoted text, DECIMAL as a number,
    VAR_STRING as a string, any other as MySQL's base64 of its bytes with the type's number."""
    if field_type in (_DATE, _DATETIME, _TIMESTAMP, _TIME) and len(raw) >= 8:
        return Text(f'"{_temporal(field_type, int.from_bytes(raw[:8], "little", signed=True))}"')
    if field_type == _NEWDECIMAL and len(raw) >= 2:
        read = packed_decimal(raw[0], raw[1])[1]
        return Text(format(read(raw[2:]), "f"))
    if field_type == _VAR_STRING:
        return raw.decode("utf-8", errors="replace")
    encoded = base64.b64encode(raw).decode("ascii")
    lines = "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    return Text(_quoted(f"base64:type{field_type}:{lines}"))


def _temporal(field_type: int, packed: int) -> str:
    """MySQL's packed temporal value (a signed int64: the date and time fields, then 24 bits of microseconds)
    as ``my_TIME_to_str`` writes it with 6 fraction digits (a DATE without time)."""
    sign = "-" if packed < 0 else ""
    packed = abs(packed)
    micros, whole = packed % _FRACTION, packed // _FRACTION
    if field_type == _TIME:
        hms = whole
        return f"{sign}{hms >> 12 & 0x3FF:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{micros:06d}"
    ymd, hms = whole >> 17, whole & 0x1FFFF
    year, month = divmod(ymd >> 5, 13)
    date = f"{sign}{year:04d}-{month:02d}-{ymd & 31:02d}"
    if field_type == _DATE:
        return date
    return f"{date} {hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{micros:06d}"


# -- Python values to MySQL's text -------------------------------------------------------------------------


def render(value: Any) -> str:
    """The text of a document ``parse`` gave (see the module's docstring)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    kind = type(value)
    if kind is Text:
        return str(value)
    if kind is str:
        return _quoted(value)
    if kind is int:
        return str(value)
    if kind is float:
        return _double(value)
    if kind is dict:
        return "{" + ", ".join(f"{_quoted(k)}: {render(v)}" for k, v in value.items()) + "}"
    if kind is list:
        return "[" + ", ".join(map(render, value)) + "]"
    raise TypeError(f"not a JSON document's value: {kind.__name__}")


def _quoted(text: str) -> str:
    if _SPECIAL.search(text) is None:
        return f'"{text}"'
    return '"' + _SPECIAL.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _double(value: float) -> str:
    """``my_gcvt(value, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH)`` and JSON's ".0": the shortest digits that
    read back as ``value``, in plain notation if the decimal point falls within 15 places left of the first digit
    and 15 right of it (or inside the digits), else as digit, point, digits, "e", exponent."""
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exponent)  # where the decimal point is, after how many of the digits
    if text == "0":
        point = 1
    minus = "-" if sign else ""
    if -14 <= point and (point <= 15 or len(text) > point):
        if point <= 0:
            plain = "0." + "0" * -point + text
        elif point < len(text):
            plain = text[:point] + "." + text[point:]
        else:
            plain = text + "0" * (point - len(text)) + ".0"
        return minus + plain
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{minus}{mantissa}e{point - 1}"
