"""The split's options, validated once, with their defaults in one place.

Light on purpose (no pyarrow, no driver): the split operator and the pipeline helper take their
argument defaults from ``SplitOptions`` at DAG-parse time. Templated values arrive as text or as
native objects; ``SplitOptions.from_values`` reads them through ``engine.options.rendered`` and says what is
wrong with a value and what to set, before the task touches the source or the lake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.retention import RetentionCheck
from airflow_provider_mysqlcdc.cdc.split.splitter import (
    DEFAULT_CHUNK_MAX_BYTES,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DISTRIBUTION_FACTOR_LOWER,
    DEFAULT_DISTRIBUTION_FACTOR_UPPER,
    validate_split_options,
)
from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.engine.options.captured_lake import CapturedLake
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


@dataclass(frozen=True)
class SplitOptions(CapturedLake):
    """What decides the snapshot's plan and batches, validated once (the split operator documents each)."""

    base_uri: str
    tables: tuple[TableId, ...] = ()
    include_databases: str | None = None
    include_tables: str | None = None
    exclude_tables: tuple[str, ...] = ()
    include_online_schema_change_tables: bool = False
    """Whether ``include_databases`` / ``include_tables`` also take gh-ost's and pt-osc's helper tables
    (``cdc.schema.discovery.ONLINE_SCHEMA_CHANGE_TABLE``)."""
    chunk_key_columns: dict[str, str] = field(default_factory=dict)
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_max_bytes: int = DEFAULT_CHUNK_MAX_BYTES
    """At most about this many bytes a chunk (fewer rows than ``chunk_size`` for wide rows): what bounds a
    Spark executor's memory (``cdc.splitter.DEFAULT_CHUNK_MAX_BYTES``)."""
    distribution_factor_lower: float = DEFAULT_DISTRIBUTION_FACTOR_LOWER
    distribution_factor_upper: float = DEFAULT_DISTRIBUTION_FACTOR_UPPER
    rows_per_batch: int = 10_000_000
    """About how many rows one Spark job reads: it has to pay for Spark's start (~13 s here)."""
    max_batches: int = 64
    """At most this many batches (mapped tasks) per plan; batches grow instead."""
    readers_per_batch: int = 2
    """Spark tasks of one batch's job, each a chunk reader with a binlog server id of its own."""
    retention_check: RetentionCheck = RetentionCheck.ERROR
    unbounded_chunk_first: bool = True
    """Snapshot each table's last chunk ``[x, +inf)`` first: its batch first, and first in its batch's job.
    Rows inserted above the split's maximum key land there, so read late it can hold far more rows than
    ``chunk_size`` and run an executor out of memory (Flink CDC's ``unbounded-chunk-first``)."""
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    """How the lake is reached (``lake.handle``; from the lake connection): secrets, never shown."""

    def __post_init__(self) -> None:
        self.check_lake_and_tables()
        validate_split_options(self.chunk_size, self.distribution_factor_lower, self.distribution_factor_upper)
        for name in ("chunk_max_bytes", "rows_per_batch", "max_batches", "readers_per_batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidOptionError(f"{name} must be a whole number >= 1, not {value!r}")

    @classmethod
    def from_values(
        cls, *, base_uri: Any, tables: Any, include_databases: Any, include_tables: Any, exclude_tables: Any,
        chunk_key_columns: Any, chunk_size: Any, chunk_max_bytes: Any, distribution_factor_lower: Any,
        distribution_factor_upper: Any, rows_per_batch: Any, max_batches: Any, readers_per_batch: Any,
        retention_check: Any, unbounded_chunk_first: Any = True, include_online_schema_change_tables: Any = False,
        storage_options: Mapping[str, str] | None = None,
    ) -> SplitOptions:
        """The options from rendered template values (text or native), each checked with a clear error."""
        return cls(
            base_uri=str(base_uri or ""),
            tables=rendered.table_list(tables, required=False),
            include_databases=rendered.optional_text(include_databases),
            include_tables=rendered.optional_text(include_tables),
            exclude_tables=rendered.text_list("exclude_tables", exclude_tables),
            include_online_schema_change_tables=rendered.flag("include_online_schema_change_tables",
                                                              include_online_schema_change_tables),
            chunk_key_columns=rendered.text_mapping("chunk_key_columns", chunk_key_columns, "{'db.table': 'column'}"),
            chunk_size=chunk_size,
            chunk_max_bytes=rendered.whole_number("chunk_max_bytes", chunk_max_bytes),
            distribution_factor_lower=distribution_factor_lower,
            distribution_factor_upper=distribution_factor_upper,
            rows_per_batch=rendered.whole_number("rows_per_batch", rows_per_batch),
            max_batches=rendered.whole_number("max_batches", max_batches),
            readers_per_batch=rendered.whole_number("readers_per_batch", readers_per_batch),
            retention_check=RetentionCheck.parse(retention_check),
            unbounded_chunk_first=rendered.flag("unbounded_chunk_first", unbounded_chunk_first),
            storage_options=dict(storage_options or {}),
        )

    def selection(self) -> TableSelection:
        """Which tables the split plans."""
        return TableSelection(self.tables, self.include_databases, self.include_tables, self.exclude_tables,
                              self.include_online_schema_change_tables)
