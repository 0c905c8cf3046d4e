"""A change captured from the binlog, in the changelog vocabulary of Flink CDC.

An UPDATE becomes two records, the before image (``-U``) and the after image (``+U``), so that a
consumer that only keeps the last record per key gets deletes and key changes right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema import TableId

INSERT = "+I"
UPDATE_BEFORE = "-U"
UPDATE_AFTER = "+U"
DELETE = "-D"
# ops whose values are the row as it is afterwards; the other two remove the row they carry
UPSERT_OPS = frozenset({INSERT, UPDATE_AFTER})


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One row image. ``offset`` is where to resume *after* this record, which is also its position
    in the changelog's total order; ``values`` are canonical (``types``) in the table's column order."""

    op: str
    table: TableId
    values: tuple[Any, ...]
    offset: BinlogOffset
    ts_ms: int
