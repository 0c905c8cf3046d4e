"""Partial JSON updates (``binlog_row_value_options = PARTIAL_JSON``): a PARTIAL_UPDATE_ROWS_EVENT's diffs applied
to the before image's document, giving the full value MySQL's ``SELECT`` returns after the update.

With PARTIAL_JSON, an UPDATE that only sets, replaces or removes parts of a JSON column (``JSON_SET``,
``JSON_REPLACE``, ``JSON_REMOVE`` of the column itself) is logged as type 39 instead of UPDATE_ROWS: each row's
after image starts with its value options (a length-encoded integer; bit 0 = partial JSON) and, when that bit is
set, one bit per JSON column of the image (least significant first) saying whether the column holds diffs
instead of its value. Such a column's value is, after its usual length prefix, a list of diffs, each an
operation byte (0 REPLACE, 1 INSERT, 2 REMOVE), a path (a length-encoded length, then text such as
``$.a."b c"[2]``) and, unless REMOVE, a value (a length-encoded length, then binary JSON).

They are applied as MySQL's ``apply_json_diff`` applies them: REPLACE swaps the value at the path (which must
exist); INSERT adds a member absent from its object, or a value into an array at the index (past the end: at
the end); REMOVE drops the member or element (which must exist). A path names members and array cells only
(``[last]``, ``[last-N]`` counting from the end). A diff that does not apply means the before image is not the
document the server changed, and is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog import json_binary
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

REPLACE, INSERT, REMOVE = 0, 1, 2
_OPERATIONS = {REPLACE: "REPLACE", INSERT: "INSERT", REMOVE: "REMOVE"}
_MEMBER = re.compile(r'\s*\.\s*(?:"((?:[^"\\]|\\.)*)"|([^.\[\s*"]+))')  # quoted, or an identifier (no wildcard)
_CELL = re.compile(r"\s*\[\s*(?:(\d+)|last(?:\s*-\s*(\d+))?)\s*\]")


@dataclass(frozen=True)
class Cell:
    """An array cell of a path: ``index`` from the start, or from the end (``[last-index]``)."""

    index: int
    from_end: bool = False

    def position(self, size: int) -> int:
        """Where it is in an array of ``size`` (past the end: ``size``; ``[last-N]`` before the start: 0)."""
        if self.from_end:
            return size - self.index - 1 if self.index < size else 0
        return min(self.index, size)


Leg = str | Cell
"""A member name or an array cell."""


@dataclass(frozen=True)
class Diff:
    operation: int
    path: tuple[Leg, ...]
    value: Any  # the new value as ``json_binary.parse`` gives it (None for REMOVE, as for JSON null)


def packed_integer(data: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer of the replication protocol at ``at``, and where the bytes after it start."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise RowDecodeError(f"a length-encoded integer starts with {first:#04x}")
    return int.from_bytes(data[at + 1:at + 1 + size], "little"), at + 1 + size


def read_diffs(data: bytes) -> list[Diff]:
    """The diffs of one JSON column's partial value (without its length prefix)."""
    diffs, at = [], 0
    try:
        while at < len(data):
            operation = data[at]
            if operation not in _OPERATIONS:
                raise RowDecodeError(f"a partial JSON update holds the operation {operation}, which MySQL has not")
            length, at = packed_integer(data, at + 1)
            path = parse_path(data[at:at + length].decode("utf-8"))
            at += length
            value = None
            if operation != REMOVE:
                length, at = packed_integer(data, at)
                value = json_binary.parse(data[at:at + length])
                at += length
            diffs.append(Diff(operation, path, value))
    except IndexError as exc:
        raise RowDecodeError(f"a partial JSON update's diffs end early ({len(data)} bytes)") from exc
    if at != len(data):
        raise RowDecodeError(f"a partial JSON update's diffs end at byte {at}, not at its end {len(data)}")
    return diffs


def parse_path(text: str) -> tuple[Leg, ...]:
    """A diff's path (``Json_path::to_string``'s form: ``$``, then ``.member``, ``."quoted member"``, ``[n]``,
    ``[last]``, ``[last-n]``) as its legs."""
    if not text.startswith("$"):
        raise RowDecodeError(f"the partial JSON update's path {text!r} does not start with $")
    legs: list[Leg] = []
    at = 1
    while at < len(text):
        if member := _MEMBER.match(text, at):
            quoted, plain = member.groups()
            legs.append(json.loads(f'"{quoted}"') if quoted is not None else plain)
            at = member.end()
        elif cell := _CELL.match(text, at):
            index, back = cell.groups()
            legs.append(Cell(int(index)) if index is not None else Cell(int(back or 0), from_end=True))
            at = cell.end()
        elif text[at:].isspace():
            break
        else:
            raise RowDecodeError(f"the partial JSON update's path {text!r} has a leg this reader does not know at "
                                 f"character {at}")
    if not legs:
        raise RowDecodeError(f"the partial JSON update's path {text!r} names no member or cell")
    return tuple(legs)


def apply(document: Any, diffs: list[Diff]) -> Any:
    """``document`` (``json_binary.parse``'s values, changed in place where it can be) with ``diffs`` applied."""
    for diff in diffs:
        parent = _seek(document, diff.path[:-1], diff)
        last = diff.path[-1]
        if isinstance(parent, dict) and isinstance(last, str):
            _apply_to_object(parent, last, diff)
        elif isinstance(parent, list) and isinstance(last, Cell):
            _apply_to_array(parent, last, diff)
        else:
            raise _rejected(diff, "its last leg does not fit the value it leads to")
    return document


def _apply_to_object(parent: dict[str, Any], key: str, diff: Diff) -> None:
    present = key in parent
    if diff.operation == INSERT:
        if present:
            raise _rejected(diff, "the member is there already")
        parent[key] = diff.value
        ordered = sorted(parent.items(), key=_stored_order)  # MySQL stores keys by length, then bytes
        parent.clear()
        parent.update(ordered)
        return
    if not present:
        raise _rejected(diff, "the member is not there")
    if diff.operation == REPLACE:
        parent[key] = diff.value
    else:
        del parent[key]


def _apply_to_array(parent: list[Any], cell: Cell, diff: Diff) -> None:
    position = cell.position(len(parent))
    if diff.operation == INSERT:
        parent.insert(position, diff.value)
        return
    if cell.index >= len(parent):
        raise _rejected(diff, f"the array has {len(parent)} elements")
    if diff.operation == REPLACE:
        parent[position] = diff.value
    else:
        del parent[position]


def _stored_order(item: tuple[str, Any]) -> tuple[int, bytes]:
    key = item[0].encode("utf-8")
    return len(key), key


def _seek(document: Any, legs: tuple[Leg, ...], diff: Diff) -> Any:
    """The value at ``legs`` (members and cells only, no auto-wrapping)."""
    value = document
    for leg in legs:
        if isinstance(value, dict) and isinstance(leg, str) and leg in value:
            value = value[leg]
        elif isinstance(value, list) and isinstance(leg, Cell) and leg.index < len(value):
            value = value[leg.position(len(value))]
        else:
            raise _rejected(diff, "its path leads nowhere in the before image")
    return value


def _rejected(diff: Diff, why: str) -> RowDecodeError:
    return RowDecodeError(
        f"a partial JSON update ({_OPERATIONS[diff.operation]} at {_path_text(diff.path)}) does not apply to the "
        f"row's before image: {why}. The before image is not the document the server changed (a binlog not written "
        f"with binlog_row_image = 'FULL'?)"
    )


def _path_text(path: tuple[Leg, ...]) -> str:
    return "$" + "".join(f".{json.dumps(leg)}" if isinstance(leg, str) else
                         f"[last-{leg.index}]" if leg.from_end else f"[{leg.index}]" for leg in path)


def updated_text(before: bytes | None, diffs: bytes) -> str:
    """The text MySQL's SELECT prints for the JSON column after a partial update: ``before`` (the before image's
    binary JSON; None: it was NULL) with the diffs of the after image's ``diffs`` applied."""
    if before is None:
        raise RowDecodeError("a partial JSON update of a JSON column that is NULL in the row's before image: the "
                             "before image is not the document the server changed")
    return json_binary.render(apply(json_binary.parse(before), read_diffs(diffs)))
