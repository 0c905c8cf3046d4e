"""The table's columns of many change images, as Arrow: the images of rows events read column by column
(``row_columns``, no Python object per value where the row decoder located them), or canonical value
tuples. The lake lays its metadata columns next to them (``lake.changelog``); decoding the binlog's wire
values stays here, in the core, with the decoder that knows their formats.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.row_columns import LocatedImages
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import Located
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import file_index
from airflow_provider_mysqlcdc.cdc.schema.converters import arrow_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows


def tuple_columns(values: list[tuple[Any, ...]], schema: TableSchema) -> list[pa.Array]:
    """Canonical value tuples as the table's Arrow columns, built column by column (a dict per row
    costs more than decoding it)."""
    types = arrow_schema(schema)
    columns = zip(*values, strict=True) if values else [()] * len(types)
    return [pa.array(column, field.type) for column, field in zip(columns, types, strict=True)]


EVENT_FIELDS = 7
"""What ``ImageBuffer.events`` holds per event, in this order: its first image's kind (the index of a
``ChangeKind``), images per row (2 for an update), commit time (ms), binlog file index, position,
index in its transaction (``events_to_skip``), and its images taken or not."""
_EVENT = struct.Struct(f"={EVENT_FIELDS}q").pack  # as ``events`` holds them (array "q": int64, native order)
_KIND_INDEX = {kind: i for i, kind in enumerate(ChangeKind)}


class ImageBuffer:
    """The images of rows events of one table read with one schema, gathered as the events come: runs of
    events with the row decoder's layout join their packets and image places (``LocatedImages``), the
    others keep their value tuples, and each event leaves its offset, kind and time in ``events``. No
    Python object is kept per event: a batch spread over many tables holds tens of thousands of events of
    a few rows, and as objects the garbage collector's passes over them cost more than reading them
    (bench/RESULTS.md "Stream over many tables"). ``columns`` reads the images into Arrow at once."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.events = array("q")
        """``EVENT_FIELDS`` values per event."""
        self.images = 0
        """Images held, taken or not."""
        self.taken = 0
        self.last_ts = 0
        """The commit time (ms) of the last event added."""
        self._keep: bytearray | None = None  # per image, 1 if taken (None: all of them)
        self._runs: list[LocatedImages | list[tuple[Any, ...]]] = []
        self._layout: Any = None  # the last run's layout (None: value tuples, or no run yet)
        self._files: dict[str, int] = {}

    @classmethod
    def of(cls, schema: TableSchema, events: Iterable[ChangeRows]) -> ImageBuffer:
        buffer = cls(schema)
        for event in events:
            buffer.add(event)
        return buffer

    def add(self, rows: ChangeRows) -> None:
        images, count, base = rows.images, rows.count, rows.base
        if isinstance(images, Located):
            run = self._runs[-1] if self._runs and images.layout is self._layout else None
            if run is None:
                run = LocatedImages(images)
                self._runs.append(run)
                self._layout = images.layout
            run.add(images)  # type: ignore[union-attr]
        else:
            if not self._runs or isinstance(self._runs[-1], LocatedImages):
                self._runs.append([])
                self._layout = None
            self._runs[-1].extend(images)  # type: ignore[union-attr]
        if rows.keep is not None or self._keep is not None:
            if self._keep is None:
                self._keep = bytearray(b"\x01" * self.images)
            self._keep += bytes(rows.keep) if rows.keep is not None else b"\x01" * count
        file = self._files.get(base.file)
        if file is None:
            file = self._files[base.file] = file_index(base.file)
        kinds = rows.kinds
        self.events.frombytes(_EVENT(_KIND_INDEX[kinds[0]], len(kinds), rows.ts_ms, file, base.position,
                                     base.events_to_skip, count))
        self.images += count
        self.taken += rows.taken
        self.last_ts = rows.ts_ms

    def columns(self) -> tuple[list[pa.Array], np.ndarray | None]:
        """The table's columns of the images, in order, and which images are taken (None: all of them)."""
        keep = None if self._keep is None else np.frombuffer(bytes(self._keep), np.bool_)
        parts: list[list[pa.Array]] = []
        done = 0
        for run in self._runs:
            if isinstance(run, LocatedImages):
                images = len(run)
                parts.append(run.columns(None if keep is None else keep[done:done + images], self.schema))
            else:
                images = len(run)
                values = run
                if keep is not None:
                    values = [v for v, k in zip(run, keep[done:done + images].tolist(), strict=True) if k]
                parts.append(tuple_columns(values, self.schema))
            done += images
        if len(parts) == 1:
            return parts[0], keep
        columns = [pa.chunked_array([p[i] for p in parts], f.type).combine_chunks()
                   for i, f in enumerate(arrow_schema(self.schema))] if parts else tuple_columns([], self.schema)
        return columns, keep
