"""The stream's options, validated once, with their defaults in one place, and its progress.

Light on purpose (no pyarrow, no driver): the stream operator takes its argument defaults from
here at DAG-parse time. Templated values arrive as text or as native objects;
``StreamOptions.from_values`` reads them through ``engine.options.rendered`` and says what is wrong with a
value and what to set.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode, parse_file_position
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.engine.options.captured_lake import CapturedLake
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


class SchemaChangeBehavior(StrEnum):
    """What the stream does with a DDL of a captured table, as Flink CDC 3's ``schema.change.behavior``
    names it (the docs' "Schema changes" page has the table of every statement under each)."""

    EVOLVE = "evolve"
    """Apply every change to the lake at its offset, exactly; what cannot be is an error."""
    TRY_EVOLVE = "try_evolve"
    """Like ``evolve``, but a change that cannot be applied exactly is applied as ``lenient`` applies it,
    with a warning, instead of stopping."""
    LENIENT = "lenient"
    """Keep the lake readable without rewriting it: columns added (NULL in rows before), dropped columns
    kept (NULL after), a renamed column a new one, TRUNCATE only recorded; each logged at WARNING."""
    IGNORE = "ignore"
    """Keep the lake's columns as they were before the first DDL: a column the source adds is left out of
    the changes, one it drops or renames is NULL in rows written after, TRUNCATE only recorded; each DDL
    logged at WARNING and recorded in the changelog. A DDL that takes away the columns rows are told
    apart by is an error."""
    EXCEPTION = "exception"
    """Stop at the first DDL that changes a captured table's columns or rows, before committing past it."""

    @classmethod
    def parse(cls, value: Any) -> SchemaChangeBehavior:
        text = str(value).strip().lower()
        choices = ", ".join(repr(b.value) for b in cls)
        if text not in {b.value for b in cls}:
            raise InvalidOptionError(f"schema_change_behavior must be one of {choices}, not {value!r}")
        return cls(text)


class PositionLostBehavior(StrEnum):
    """What the stream does when the server purged the binlog between its checkpoint and the binlog the
    server still has (docs/troubleshooting.md, "The binlog position was purged")."""

    FAIL = "fail"
    """Stop with ``BinlogPositionLostError`` naming the lost range and each way back; the lake untouched."""
    RESNAPSHOT = "resnapshot"
    """Read every captured table again (chunked, lock-free) from the server's binlog position of now, replace
    each current table with the rows at their chunks' new high watermarks, and mark the lost range in each
    changelog with a ``!G`` record; as-of reads into the range are refused."""
    ARCHIVE = "archive"
    """Read the lost range from archived copies of the binlog files (``binlog_archive_uri``), then go on
    from the server: no re-read, the changelog complete."""

    @classmethod
    def parse(cls, value: Any) -> PositionLostBehavior:
        text = str(value).strip().lower()
        if text not in {b.value for b in cls}:
            choices = ", ".join(repr(b.value) for b in cls)
            raise InvalidOptionError(f"on_position_lost must be one of {choices}, not {value!r}")
        return cls(text)


@dataclass(frozen=True)
class CommitLimits:
    """When the stream commits (a ``StreamCommit``): at the first transaction boundary past any of these.
    The operator's options keep their names (``max_batch_events``, ...)."""

    max_events: int = 100_000
    max_seconds: float = 10.0
    max_bytes: int = 64 * 1024 * 1024
    spread_factor: int = 8
    """A batch touching N tables closes on ``max_events`` times ``min(N, spread_factor)`` events, not on
    ``max_events`` (``max_bytes`` and ``max_seconds`` still close it; a transaction is cut in parts on
    ``max_events`` times the tables it touched so far): each table's commit has a cost of its own (opening
    its changelog, its Arrow columns, its Parquet file and Delta commit: about 5.5 ms for a table's 3,000 images,
    single-threaded, in runs outside the benchmark reported in bench/RESULTS.md "Stream over many tables"),
    which a batch of a few events per table pays again every few events. A batch of one table closes on
    ``max_events`` as ever."""

    def __post_init__(self) -> None:
        for name in ("max_events", "max_seconds", "max_bytes"):
            if not getattr(self, name) > 0:
                raise InvalidOptionError(f"max_batch_{name[4:]} must be > 0, not {getattr(self, name)!r}")
        if not self.spread_factor >= 1:
            raise InvalidOptionError(f"spread_factor must be >= 1, not {self.spread_factor!r}")


@dataclass(frozen=True)
class StreamOptions(CapturedLake):
    """Everything that decides what the stream does, validated once (see the stream operator for each)."""

    base_uri: str
    tables: tuple[TableId, ...]
    startup_mode: StartupMode = StartupMode.INITIAL
    startup_offset: str | None = None
    startup_timestamp: Any = None
    stop_after_idle_seconds: float | None = None
    max_duration_seconds: float | None = None
    stop_at_offset: str | None = None
    limits: CommitLimits = field(default_factory=CommitLimits)
    poll_interval: float = 1.0
    defer_after_idle_seconds: float = 60.0
    merge_interval_seconds: float = 300.0
    """How often a running stream brings the current-state tables up to date by MERGE (it also merges
    when it stops or defers): how far behind a reader of the current state alone may be."""
    writer: str = field(default_factory=lambda: f"{socket.gethostname()} pid {os.getpid()}")
    """Who holds the lake's lease: a name that stays the same across retries of one task."""
    lease_seconds: float = 120.0
    """How long the lease outlives a writer that stops renewing it (a crash): then another may take over."""
    schema_change_behavior: SchemaChangeBehavior = SchemaChangeBehavior.EVOLVE
    schema_check_seconds: float = 60.0
    """How often at most the idle stream compares its tables' columns with information_schema
    (``engine.stream.schema_self_check``); there is no off: a difference would otherwise go unnoticed."""
    binlog_margin_seconds: float | None = 6 * 3600.0  # also from_values' default
    """Below this much time before the server may purge the binlog file of the checkpoint, the stream
    warns (``engine.stream.retention_watch``); None: never (the margin is still measured and sent). Six
    hours: time to react to an alert, and above the few minutes a stream deferred for a while is behind."""
    on_position_lost: PositionLostBehavior = PositionLostBehavior.FAIL
    binlog_archive_uri: str | None = None
    """Where archived copies of the server's binlog files are (a local folder or an object-store prefix, as
    ``mysqlbinlog --read-from-remote-server --raw`` writes them): read when ``on_position_lost`` is 'archive'."""
    include_databases: str | None = None
    include_tables: str | None = None
    exclude_tables: tuple[str, ...] = ()
    include_online_schema_change_tables: bool = False
    """Whether the patterns also take gh-ost's and pt-osc's helper tables, created or renamed while the stream
    runs too (``cdc.schema.discovery.ONLINE_SCHEMA_CHANGE_TABLE``)."""
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    """How the lake is reached (``lake.handle``; from the lake connection): secrets, never shown."""

    def __post_init__(self) -> None:
        self.check_lake_and_tables()
        if self.stop_at_offset:
            parse_file_position(self.stop_at_offset, "stop_at_offset")  # a bad value fails before any work
        if not self.lease_seconds > 0:
            raise InvalidOptionError(f"lease_seconds must be > 0, not {self.lease_seconds!r}")
        if not self.poll_interval > 0:
            raise InvalidOptionError(f"poll_interval must be > 0, not {self.poll_interval!r}")
        if not self.merge_interval_seconds > 0:
            raise InvalidOptionError(f"merge_interval_seconds must be > 0, not {self.merge_interval_seconds!r}")
        if not self.schema_check_seconds > 0:
            raise InvalidOptionError(f"schema_check_seconds must be > 0 (the self-check cannot be turned off; "
                                     f"a large value makes it rare), not {self.schema_check_seconds!r}")
        if self.binlog_margin_seconds is not None and not self.binlog_margin_seconds > 0:
            raise InvalidOptionError(f"binlog_margin_seconds must be > 0 (None: no warning), "
                                     f"not {self.binlog_margin_seconds!r}")
        if self.on_position_lost is PositionLostBehavior.ARCHIVE and not self.binlog_archive_uri:
            raise InvalidOptionError("on_position_lost is 'archive', but binlog_archive_uri is not set: set it to "
                                     "the folder or object-store prefix that holds the archived binlog files")

    @classmethod
    def from_values(
        cls, *, base_uri: Any, tables: Any, startup_mode: Any, startup_offset: Any, startup_timestamp: Any,
        stop_after_idle_seconds: Any, max_duration_seconds: Any, stop_at_offset: Any, max_batch_events: Any,
        max_batch_seconds: Any, max_batch_bytes: Any, poll_interval: Any, defer_after_idle_seconds: Any,
        merge_interval_seconds: Any, schema_check_seconds: Any, writer: str,
        schema_change_behavior: Any = SchemaChangeBehavior.EVOLVE, include_databases: Any = None,
        include_tables: Any = None, exclude_tables: Any = (), include_online_schema_change_tables: Any = False,
        storage_options: Mapping[str, str] | None = None,
        binlog_margin_seconds: Any = 6 * 3600.0, on_position_lost: Any = PositionLostBehavior.FAIL,
        binlog_archive_uri: Any = None,
    ) -> StreamOptions:
        """The options from rendered template values (text or native), each checked with a clear error."""
        defer_after = rendered.optional_seconds("defer_after_idle_seconds", defer_after_idle_seconds)
        return cls(
            base_uri=str(base_uri),
            tables=rendered.table_list(tables, required=False),
            startup_mode=StartupMode.parse(startup_mode),
            startup_offset=rendered.optional_text(startup_offset),
            startup_timestamp=None if rendered.is_none(startup_timestamp) else startup_timestamp,
            stop_after_idle_seconds=rendered.optional_seconds("stop_after_idle_seconds", stop_after_idle_seconds),
            max_duration_seconds=rendered.optional_seconds("max_duration_seconds", max_duration_seconds),
            stop_at_offset=rendered.optional_text(stop_at_offset),
            limits=CommitLimits(rendered.number("max_batch_events", max_batch_events, int),
                               rendered.number("max_batch_seconds", max_batch_seconds, float),
                               rendered.number("max_batch_bytes", max_batch_bytes, int)),
            poll_interval=rendered.number("poll_interval", poll_interval, float),
            defer_after_idle_seconds=0.0 if defer_after is None else defer_after,
            merge_interval_seconds=rendered.number("merge_interval_seconds", merge_interval_seconds, float),
            writer=writer,
            schema_check_seconds=rendered.number("schema_check_seconds", schema_check_seconds, float),
            schema_change_behavior=SchemaChangeBehavior.parse(schema_change_behavior),
            binlog_margin_seconds=rendered.optional_seconds("binlog_margin_seconds", binlog_margin_seconds),
            on_position_lost=PositionLostBehavior.parse(on_position_lost),
            binlog_archive_uri=rendered.optional_text(binlog_archive_uri),
            include_databases=rendered.optional_text(include_databases),
            include_tables=rendered.optional_text(include_tables),
            exclude_tables=rendered.text_list("exclude_tables", exclude_tables),
            include_online_schema_change_tables=rendered.flag("include_online_schema_change_tables",
                                                              include_online_schema_change_tables),
            storage_options=dict(storage_options or {}),
        )


@dataclass
class StreamProgress:
    """What one stream task has done so far; it travels through deferrals in the trigger's event."""

    started: float
    idle_since: float
    batches: int = 0
    rows: int = 0
    deferrals: int = 0
    merged_at: float | None = None
    """When the last MERGE round began (epoch seconds; None: none yet in this task, counted from ``started``):
    the next is due ``merge_interval_seconds`` later, also across deferrals."""

    @classmethod
    def start(cls) -> StreamProgress:
        now = time.time()
        return cls(started=now, idle_since=now)

    def merge_due_at(self, interval: float) -> float:
        return (self.merged_at if self.merged_at is not None else self.started) + interval

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamProgress:
        # merged_at: not in the event of a trigger deferred by a version before it
        return cls(**{k: d[k] for k in ("started", "idle_since", "batches", "rows", "deferrals")},
                   merged_at=d.get("merged_at"))


@dataclass(frozen=True)
class StreamSummary:
    """How a stream task ended: its progress, why it stopped, and the checkpoint it left (offset, seq).
    The task returns it to XCom as ``to_dict``: the progress's fields, ``stopped``, ``offset``, ``seq``."""

    progress: StreamProgress
    stopped: str
    offset: str
    seq: int

    @property
    def seq_before(self) -> int:
        """The checkpoint's ``seq`` before this task's first batch: it committed ``seq_before < seq <= seq``."""
        return self.seq - self.progress.batches

    def to_dict(self) -> dict[str, Any]:
        """The task's XCom: counts, why it stopped, the checkpoint, and when it started and ended as ISO 8601
        UTC times (the task log shows this value, so no epoch floats)."""
        p = self.progress
        return {"batches": p.batches, "rows": p.rows, "deferrals": p.deferrals, "stopped": self.stopped,
                "offset": self.offset, "seq": self.seq, "started": _iso(p.started), "ended": _iso(time.time())}

    def describe(self) -> str:
        """The summary as the sentence the task log ends with."""
        p = self.progress
        took = max(0.0, time.time() - p.started)
        batches = f"{p.batches:,} batch{'es' if p.batches != 1 else ''}"
        rows = f"{p.rows:,} change row{'s' if p.rows != 1 else ''}"
        deferrals = f", {p.deferrals} deferral{'s' if p.deferrals != 1 else ''}" if p.deferrals else ""
        return (f"The stream stops ({self.stopped}) after {took:,.1f} s: {batches} committed, {rows} written"
                f"{deferrals}; the checkpoint is batch {self.seq} at {self.offset}.")


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="seconds")
