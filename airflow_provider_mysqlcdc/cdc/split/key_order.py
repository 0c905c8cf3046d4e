"""Sort keys that order chunk-key values exactly as the server does, for comparisons made in Python.

The splitter and the chunk reader compare keys in SQL. The emit filter and the normalization must
compare a binlog row's key with chunk bounds in Python, thousands of times a second, and must agree
with that SQL, or a row lands in two chunks or in none. Numbers, dates and bytes order the same in
Python. Strings do not: under ``utf8mb4_general_ci`` 'a' = 'A' = 'á' and every emoji is equal to
every other, and PAD SPACE collations compare as if the shorter string were padded with spaces
('a' = 'a ' and 'a\\t' < 'a'). Flink CDC compares with Java's ``String.compareTo`` here and puts rows
into the wrong chunk.

So a string's sort key is the server's own collation weight (``WEIGHT_STRING``), fetched in
batches; for PAD SPACE collations it is the weight of the value without trailing spaces, and two
weights compare with the shorter padded by the weight of a space.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import total_ordering
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import Column
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError

STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# parameters per WEIGHT_STRING query: one row of this many columns keeps the packet small
_BATCH = 500


def collated_parameter(column: Column, placeholder: str = "%s") -> str:
    """A placeholder (``%s``, or a literal) that compares under the column's charset and collation.

    The connection charset (utf8mb4) may differ from the column's; without the CONVERT the server
    would compare under the connection collation or refuse to mix collations.
    """
    charset, collation = column.charset, column.collation
    if not charset or not collation or not _NAME.match(charset) or not _NAME.match(collation):
        raise TableNotSupportedError(
            f"string column {column.name!r} has no usable charset/collation ({charset!r}, {collation!r}), so its "
            f"keys cannot be compared as the server does: set chunk_key_column to another column of the table"
        )
    return f"CONVERT({placeholder} USING {charset}) COLLATE {collation}"


def pads_spaces(collation: str) -> bool:
    """MariaDB's ``*_nopad_*`` and MySQL 8's ``*_0900_*`` collations are NO PAD; the rest PAD SPACE."""
    return "_nopad_" not in collation and "_0900_" not in collation


@total_ordering
class Weight:
    """A collation weight; with ``pad`` set, a shorter weight compares as if padded with spaces."""

    __slots__ = ("pad", "value")

    def __init__(self, value: bytes, pad: bytes) -> None:
        self.value = value
        self.pad = pad

    def _padded(self, length: int) -> bytes:
        missing = length - len(self.value)
        if missing <= 0 or not self.pad:
            return self.value
        return self.value + self.pad * (missing // len(self.pad))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Weight):
            return NotImplemented
        length = max(len(self.value), len(other.value))
        return self._padded(length) == other._padded(length)

    def __lt__(self, other: Weight) -> bool:
        length = max(len(self.value), len(other.value))
        return self._padded(length) < other._padded(length)

    def __hash__(self) -> int:
        return hash(self.value.rstrip(self.pad) if self.pad else self.value)  # equal weights hash alike

    def __repr__(self) -> str:
        return f"Weight({self.value.hex()})"


class KeyOrder:
    """Turns values of one chunk-key column into sort keys; ``None`` (NULL) stays ``None``.

    Build it once per table with :meth:`for_column`; it asks the server only for string columns.
    """

    def __init__(self, column: Column, to_key: Callable[[Sequence[Any]], list[Any]]) -> None:
        self.column = column
        self._to_key = to_key

    def sort_keys(self, values: Sequence[Any]) -> list[Any]:
        present = [v for v in values if v is not None]
        keys = iter(self._to_key(present) if present else [])
        return [None if v is None else next(keys) for v in values]

    def sort_key(self, value: Any) -> Any:
        return self.sort_keys([value])[0]

    @classmethod
    def for_column(cls, conn: Any, column: Column) -> KeyOrder:
        """``conn`` is a pymysql connection, used for string columns only (one query per 500 values)."""
        if column.data_type in STRING_TYPES:
            return cls(column, _string_weights(conn, column))
        return cls(column, list)


def _string_weights(conn: Any, column: Column) -> Callable[[Sequence[Any]], list[Any]]:
    param = collated_parameter(column)
    pad = b""
    weight_sql = f"WEIGHT_STRING({param})"
    if column.collation and pads_spaces(column.collation):
        with conn.cursor() as cur:
            cur.execute(f"SELECT WEIGHT_STRING({param})", (" ",))
            pad = bytes(cur.fetchone()[0])
        weight_sql = f"WEIGHT_STRING(TRIM(TRAILING ' ' FROM {param}))"

    def weights(values: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        with conn.cursor() as cur:
            for start in range(0, len(values), _BATCH):
                batch = values[start : start + _BATCH]
                cur.execute("SELECT " + ", ".join([weight_sql] * len(batch)), list(batch))
                out.extend(Weight(bytes(w), pad) for w in cur.fetchone())
        return out

    return weights

