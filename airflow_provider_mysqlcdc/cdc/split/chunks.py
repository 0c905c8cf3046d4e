"""A chunk of a table and the one SQL predicate that selects it.

The splitter counts rows with ``chunk_where`` and the chunk reader selects with it, so chunks can
neither overlap nor leave gaps, whatever the key's type or collation. Chunks are half-open
``[start, end)``; ``None`` is unbounded, so the first chunk is ``(-inf, end)`` and the last
``[start, +inf)``, and rows inserted below the minimum or above the maximum during the snapshot
still land in a chunk. NULL chunk keys (possible only with a nullable ``chunk_key_column``) belong
to the first chunk.

Hundreds of thousands of chunks travel through XCom, so the JSON form is short: ints and strings
as themselves, other key types tagged.

``FinishedChunkInfo`` is a chunk as the binlog stream needs it once its snapshot is done (Flink CDC's
``FinishedSnapshotSplitInfo``): its key range and its high watermark, nothing else. It goes from the
snapshot's manifest into the stream's checkpoint and on to the emit filter as this one typed value;
only the checkpoint's JSON (``to_dict``/``from_dict``) encodes and decodes its keys.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import cached_property
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.key_order import STRING_TYPES, collated_parameter
from airflow_provider_mysqlcdc.cdc.split.key_range import KeyRange
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError, TableNotSupportedError

_WRITTEN_ELSEWHERE = (
    "the snapshot plan or chunk batch was written by another version of the provider; run the "
    "split task again with the same version the snapshot and stream tasks use"
)
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
# keys the server and Python order alike (numbers, temporal, bytes), plus strings via collation
SPLITTABLE_TYPES = INTEGER_TYPES | STRING_TYPES | frozenset(
    {"decimal", "float", "double", "year", "date", "datetime", "timestamp", "time", "binary", "varbinary"}
)


def check_chunk_key(schema: TableSchema) -> Column:
    column = schema.chunk_key_column
    if column.data_type not in SPLITTABLE_TYPES:
        raise TableNotSupportedError(
            f"cannot split {schema.id} on {column.name!r} of type {column.column_type}: chunk keys must be "
            f"numbers, strings, binary strings or dates/times; set chunk_key_column for {schema.id} to such a column"
        )
    return column


@dataclass(frozen=True)
class Chunk:
    table: TableId
    index: int
    start: Any
    end: Any

    @property
    def key_range(self) -> KeyRange:
        return KeyRange(self.start, self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"t": str(self.table), "i": self.index, "s": encode_key(self.start), "e": encode_key(self.end)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Chunk:
        return cls(TableId.parse(d["t"]), d["i"], decode_key(d["s"]), decode_key(d["e"]))


@dataclass(frozen=True)
class FinishedChunkInfo:
    """A chunk whose snapshot is done, as the stream needs it: its key range ``[start, end)`` (key
    values; ``None`` is unbounded) and the high watermark its rows are as of. An event for a key in
    the range is new only after ``high_watermark``."""

    start: Any
    end: Any
    high_watermark: BinlogOffset

    @classmethod
    def of(cls, chunk: Chunk, high_watermark: BinlogOffset) -> FinishedChunkInfo:
        return cls(chunk.start, chunk.end, high_watermark)

    @classmethod
    def unbounded(cls, high_watermark: BinlogOffset) -> FinishedChunkInfo:
        """The whole key space as one chunk: no event up to ``high_watermark`` is new."""
        return cls(None, None, high_watermark)

    def with_floor(self, floor: BinlogOffset) -> FinishedChunkInfo:
        """The same range with its HW raised to ``floor`` if it was lower (itself otherwise)."""
        raised = max(self.high_watermark, floor)
        return self if raised is self.high_watermark else replace(self, high_watermark=raised)

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint's JSON form ``{"s": start, "e": end, "hw": offset}``; computed once (the
        checkpoint is written at every batch, with up to hundreds of thousands of chunks), so treat
        it as read-only."""
        return self._saved

    @cached_property
    def _saved(self) -> dict[str, Any]:
        return {"s": encode_key(self.start), "e": encode_key(self.end), "hw": self.high_watermark.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FinishedChunkInfo:
        return cls(decode_key(d["s"]), decode_key(d["e"]), BinlogOffset.from_dict(d["hw"]))


def encode_key(value: Any) -> Any:
    """JSON for a key value that decodes to an equal value of the same Python type."""
    if value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, Decimal):
        return {"d": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"da": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"td": (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds}
    raise TableNotSupportedError(
        f"cannot save a chunk key of type {type(value).__name__} ({value!r}): set chunk_key_column to a "
        f"column of numbers, strings, binary strings or dates/times"
    )


def decode_key(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise SnapshotStateError(f"{data!r} is not a saved chunk key: {_WRITTEN_ELSEWHERE}")
    ((tag, raw),) = data.items()
    if tag == "f":
        return float.fromhex(raw)
    if tag == "d":
        return Decimal(raw)
    if tag == "b":
        return base64.b64decode(raw)
    if tag == "dt":
        return dt.datetime.fromisoformat(raw)
    if tag == "da":
        return dt.date.fromisoformat(raw)
    if tag == "td":
        return dt.timedelta(microseconds=raw)
    raise SnapshotStateError(f"unknown chunk key tag {tag!r} in {data!r}: {_WRITTEN_ELSEWHERE}")


def key_parameter(column: Column, placeholder: str = "%s") -> str:
    """The placeholder a key value is compared through: collated for strings, plain otherwise."""
    return collated_parameter(column, placeholder) if column.data_type in STRING_TYPES else placeholder


def chunk_where(chunk: Chunk, column: Column, inline: Callable[[Any], str] | None = None) -> tuple[str, list[Any]]:
    """The WHERE condition (and its parameters) that selects exactly the chunk's rows.

    With ``inline`` the bounds are written into the SQL as literals (for readers that take no
    parameters) and the parameter list is empty.
    """
    key = column.quoted
    conditions: list[str] = []
    params: list[Any] = []
    for op, bound in ((">=", chunk.start), ("<", chunk.end)):
        if bound is None:
            continue
        if inline is None:
            conditions.append(f"{key} {op} {key_parameter(column)}")
            params.append(bound)
        else:
            conditions.append(f"{key} {op} {key_parameter(column, inline(bound))}")
    if not conditions:
        return "TRUE", []
    sql = " AND ".join(conditions)
    if chunk.start is None and column.nullable:
        sql = f"({sql} OR {key} IS NULL)"
    return sql, params
