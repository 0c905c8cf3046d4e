"""Rows shaped like a current table's and its changelog's, made with numpy without a server: ~100 B a row (a
key, five columns, the metadata columns, ``_batch``), for the benchmarks of the Delta tables themselves
(the MERGE's partitioning, maintenance under many commits)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def rows_table(ids: np.ndarray, rows_per_batch: int, rng: np.random.Generator, *, op: str = "+I",
               pos: int = 100) -> pa.Table:
    """~100 B a row: the key, five columns, the metadata columns and the batch."""
    n = len(ids)
    ops = op if isinstance(op, np.ndarray) else np.full(n, op)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "customer": pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
        "amount": pa.array(rng.random(n) * 1000, pa.float64()),
        "qty": pa.array(rng.integers(0, 100, n), pa.int32()),
        "status": pa.array(np.array(["new", "paid", "shipped", "returned"])[rng.integers(0, 4, n)], pa.string()),
        "note": pa.array(np.char.add("note-", rng.integers(0, 10**12, n).astype(str)), pa.string()),
        "_op": pa.array(ops, pa.string()),
        "_database": pa.array(np.full(n, "bench"), pa.string()),
        "_table": pa.array(np.full(n, "orders"), pa.string()),
        "_op_ts": pa.array(np.zeros(n, np.int64), pa.int64()),
        "_binlog_file": pa.array(np.ones(n, np.int32), pa.int32()),
        "_binlog_pos": pa.array(np.full(n, pos, np.int64), pa.int64()),
        "_row_seq": pa.array(np.arange(n, dtype=np.int64), pa.int64()),
        "_batch": pa.array((ids // rows_per_batch).astype(np.int32), pa.int32()),
    })


def change_set(rows: int, changes: int, rows_per_batch: int, ranges: list[tuple[int, int]], seed: int) -> pa.Table:
    """``changes`` changelog rows: 90% updates of keys in the ``ranges``, 5% deletes, 5% inserts of new keys."""
    rng = np.random.default_rng(seed)
    n_new = changes // 20
    pool = np.concatenate([np.arange(lo, hi) for lo, hi in ranges])
    existing = rng.choice(pool, changes - n_new, replace=False)
    ids = np.concatenate([existing, rows + np.arange(n_new)])
    ops = np.array(["+U"] * (changes - 2 * n_new) + ["-D"] * n_new + ["+I"] * n_new)
    table = rows_table(ids, rows_per_batch, rng, op=ops, pos=500)  # type: ignore[arg-type]
    batch = (np.minimum(ids, rows - 1) // rows_per_batch).astype(np.int32)  # inserts past the end: last batch
    return table.set_column(table.schema.get_field_index("_batch"), "_batch", pa.array(batch, pa.int32()))
