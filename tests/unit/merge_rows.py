"""Rows of ``shop.orders`` as the MERGE gets them, for its tests: the current state as the snapshot writes
it (snapshot metadata, ``_batch`` = key // 10) and changelog rows as the stream writes them (with
``_stream_seq``) plus the ``_batch`` the runner computes from the plan."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS

SNAPSHOT_HW = (1, 100)  # binlog file index and position of the snapshot's high watermark


def batch_of(key: int) -> int:
    return key // 10


def snapshot_rows(keys: range, hw: tuple[int, int] = SNAPSHOT_HW, **columns: list[Any]) -> pa.Table:
    n = len(keys)
    data: dict[str, Any] = {
        "id": pa.array(list(keys), pa.int64()),
        "name": pa.array([f"n{k}" for k in keys], pa.string()),
        **columns,
        "_op": pa.array(["+I"] * n, pa.string()),
        "_database": pa.array(["shop"] * n, pa.string()),
        "_table": pa.array(["orders"] * n, pa.string()),
        "_op_ts": pa.array([0] * n, pa.int64()),
        "_binlog_file": pa.array([hw[0]] * n, pa.int32()),
        "_binlog_pos": pa.array([hw[1]] * n, pa.int64()),
        "_row_seq": pa.array([0] * n, pa.int64()),
        "_batch": pa.array([batch_of(k) for k in keys], pa.int32()),
    }
    return pa.table(data)


def change(op: str, key: int, name: str | None, pos: int, seq: int = 0, file: int = 1, stream_seq: int = 1,
           **extra: Any) -> dict[str, Any]:
    return {"id": key, "name": name, **extra, "_op": op, "_database": "shop", "_table": "orders", "_op_ts": 5,
            "_binlog_file": file, "_binlog_pos": pos, "_row_seq": seq, "_stream_seq": stream_seq,
            "_batch": batch_of(key)}


def changes(*rows: dict[str, Any], extra: dict[str, pa.DataType] | None = None) -> pa.Table:
    fields = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
    fields += [pa.field(name, kind) for name, kind in (extra or {}).items()]
    fields += [*METADATA_FIELDS, pa.field("_stream_seq", pa.int64()), pa.field("_batch", pa.int32())]
    return pa.Table.from_pylist(list(rows), schema=pa.schema(fields))
