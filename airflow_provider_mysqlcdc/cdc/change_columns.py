"""The table's columns of many change images, as Arrow: the images of rows events read column by column
(``row_columns``, no Python object per value where the row decoder located them), or canonical value
tuples. The lake lays its metadata columns next to them (``lake.changelog``); decoding the binlog's wire
values stays here, in the core, with the decoder that knows their formats.
"""

from __future__ import annotations

from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.row_columns import located_columns
from airflow_provider_mysqlcdc.cdc.row_decoder import Located
from airflow_provider_mysqlcdc.cdc.schema import TableSchema
from airflow_provider_mysqlcdc.cdc.types import arrow_schema

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.binlog_reader import ChangeRows


def tuple_columns(values: list[tuple[Any, ...]], schema: TableSchema) -> list[pa.Array]:
    """Canonical value tuples as the table's Arrow columns, built column by column (a dict per row
    costs more than decoding it)."""
    types = arrow_schema(schema)
    columns = zip(*values, strict=True) if values else [()] * len(types)
    return [pa.array(column, field.type) for column, field in zip(columns, types, strict=True)]


def image_columns(events: list[ChangeRows], schema: TableSchema) -> tuple[list[pa.Array], np.ndarray | None]:
    """The table's columns of the images of rows events of one table (all with ``schema``'s columns), in
    order, and which images are taken (the events' ``keep`` in one array; None: all of them).

    Runs of events with the row decoder's layout are read by ``row_columns`` all at once."""
    counts = np.fromiter((e.count for e in events), np.int64, len(events))
    keep = None
    if any(e.keep is not None for e in events):
        keep = np.fromiter(chain.from_iterable(e.keep if e.keep is not None else repeat(True, e.count)
                                               for e in events), np.bool_, int(counts.sum()))
    parts: list[list[pa.Array]] = []
    done = 0
    for run in _runs(events):
        images = sum(e.count for e in run)
        run_keep = None if keep is None else keep[done:done + images]
        if isinstance(run[0].images, Located):
            parts.append(located_columns([e.images for e in run], run_keep, schema))  # type: ignore[misc]
        else:
            values = [v for e in run for v in e.images]  # type: ignore[union-attr]
            if run_keep is not None:
                values = [v for v, k in zip(values, run_keep.tolist(), strict=True) if k]
            parts.append(tuple_columns(values, schema))
        done += images
    columns = [pa.chunked_array([p[i] for p in parts], f.type).combine_chunks()
               for i, f in enumerate(arrow_schema(schema))] if parts else tuple_columns([], schema)
    return columns, keep


def _runs(events: list[ChangeRows]) -> list[list[ChangeRows]]:
    """Consecutive events read alike: located images of one layout, or value tuples."""
    runs: list[list[ChangeRows]] = []
    previous: Any = None
    for event in events:
        images = event.images
        key = images.layout if isinstance(images, Located) else None
        if runs and key is previous:
            runs[-1].append(event)
        else:
            runs.append([event])
        previous = key
    return runs
