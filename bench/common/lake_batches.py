"""Stream batches committed into a lake without a server, as the stream commits them: captured tables of
``COLUMNS`` columns, their change rows (``lake.changelog.changes_table``) and ``StreamStore.commit`` timed.
The benchmarks of the stream's commits run these in child processes importing one commit's package, so
every import of the package is inside a function."""

from __future__ import annotations

import time
from typing import Any

COLUMNS = 8


def captured_schemas(count: int) -> dict[Any, Any]:
    """``count`` tables ``many.t0000`` ... of an integer key and ``COLUMNS - 1`` VARCHARs, by table id."""
    from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema

    columns = (Column("id", "int", "int(11)", nullable=False),
               *(Column(f"c{i}", "varchar", "varchar(40)", charset="utf8mb4", collation="utf8mb4_general_ci")
                 for i in range(1, COLUMNS)))
    return {(t := TableId("many", f"t{i:04d}")): TableSchema(t, columns, ("id",)) for i in range(count)}


def offset_at(seq: int) -> Any:
    """The binlog offset of batch ``seq``."""
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset

    return BinlogOffset("mysql-bin.000001", 4 + 1000 * seq)


def insert_changes(schemas: dict[Any, Any], tables: list[Any], rows: int, seq: int) -> dict[Any, list[Any]]:
    """``rows`` inserts spread evenly over ``tables``, keys new in every batch."""
    from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
    from airflow_provider_mysqlcdc.lake.changelog import changes_table

    each = max(1, rows // len(tables))
    offset, ts = offset_at(seq), int(time.time() * 1000)
    return {t: [changes_table([ChangeRecord(ChangeKind.INSERT, t, (seq * each + k, *[f"value {k}"] * (COLUMNS - 1)),
                                            offset, ts) for k in range(each)], schemas[t])] for t in tables}


def timed_commit(store: Any, checkpoint: Any, changes: dict[Any, list[Any]]) -> float:
    """The checkpoint advanced to the next batch, then the seconds of ``store.commit`` of ``changes``."""
    checkpoint.advance(checkpoint.seq + 1, offset_at(checkpoint.seq + 1))
    started = time.perf_counter()
    store.commit(checkpoint, changes)
    return time.perf_counter() - started
