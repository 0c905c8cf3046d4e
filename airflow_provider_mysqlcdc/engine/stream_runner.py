"""The stream runner: from the options to committed change batches, until a stop condition or a wait.

The stream operator, the tests and the benchmarks all run the stream through this class, so the
startup (the first checkpoint for each startup mode, and the tables added or removed since the last
run), the batch loop and the stop conditions exist once. No Airflow here: when the runner is idle
long enough it returns, and the operator hands the wait to the triggerer.
"""

from __future__ import annotations

import ast
import enum
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, check_offset_available
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.startup import parse_file_position, start_offset
from airflow_provider_mysqlcdc.engine.captured_tables import TableStart, reconcile_tables
from airflow_provider_mysqlcdc.engine.stream_batches import BatchLimits, stream_batches
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.lake.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore

_log = logging.getLogger(__name__)

DEFAULT_WAKE_SECONDS = 300.0


class StartupMode(str, enum.Enum):
    """Where a new stream starts (Flink CDC's ``scan.startup.mode``)."""

    INITIAL = "initial"  # from the snapshot's high watermarks
    SNAPSHOT = "snapshot"  # no stream at all
    LATEST = "latest-offset"
    EARLIEST = "earliest-offset"
    SPECIFIC = "specific-offset"
    TIMESTAMP = "timestamp"

    @classmethod
    def parse(cls, value: Any) -> StartupMode:
        try:
            return cls(value)
        except ValueError:
            raise InvalidOptionError(
                f"startup_mode must be one of {[m.value for m in cls]}, not {value!r}"
            ) from None


def _optional_seconds(value: Any, name: str) -> float | None:
    """A templated number of seconds: ``None``, a number, or its text (``"None"``/``""`` mean none)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{name} must be a number of seconds or None, not {value!r}") from None
    if math.isnan(seconds) or seconds < 0:
        raise InvalidOptionError(f"{name} must be >= 0, not {value!r}")
    return seconds


def parse_tables(value: Any) -> tuple[TableId, ...]:
    """``tables`` as given or rendered: a list of ``database.table``, its text, or a comma-separated string."""
    if isinstance(value, str):
        text = value.strip()
        value = ast.literal_eval(text) if text.startswith(("[", "(")) else [t for t in text.split(",") if t.strip()]
    if not isinstance(value, Sequence) or not value:
        raise InvalidOptionError(f"tables must be a non-empty list of 'database.table', not {value!r}")
    tables = tuple(TableId.parse(str(t).strip()) for t in value)
    if len(set(tables)) != len(tables):
        raise InvalidOptionError(f"tables names a table twice: {[str(t) for t in tables]}")
    return tables


@dataclass(frozen=True)
class StreamOptions:
    """Everything that decides what the stream does, validated once (see the stream operator for each)."""

    base_uri: str
    tables: tuple[TableId, ...]
    startup_mode: StartupMode = StartupMode.INITIAL
    startup_offset: str | None = None
    startup_timestamp: Any = None
    stop_after_idle_seconds: float | None = None
    max_duration_seconds: float | None = None
    stop_at_offset: str | None = None
    limits: BatchLimits = field(default_factory=BatchLimits)
    poll_interval: float = 1.0
    defer_after_idle_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not self.base_uri:
            raise InvalidOptionError("base_uri must name the lake (a local path or s3://bucket/prefix)")
        if self.stop_at_offset:
            parse_file_position(self.stop_at_offset, "stop_at_offset")  # a bad value fails before any work
        if not self.poll_interval > 0:
            raise InvalidOptionError(f"poll_interval must be > 0, not {self.poll_interval!r}")

    @classmethod
    def from_values(
        cls, *, base_uri: Any, tables: Any, startup_mode: Any = "initial", startup_offset: Any = None,
        startup_timestamp: Any = None, stop_after_idle_seconds: Any = None, max_duration_seconds: Any = None,
        stop_at_offset: Any = None, max_batch_events: Any = 100_000, max_batch_seconds: Any = 10.0,
        max_batch_bytes: Any = 64 * 1024 * 1024, poll_interval: Any = 1.0, defer_after_idle_seconds: Any = 60.0,
    ) -> StreamOptions:
        """The options from rendered template values (text or native), each checked with a clear error."""
        defer_after = _optional_seconds(defer_after_idle_seconds, "defer_after_idle_seconds")
        return cls(
            base_uri=str(base_uri),
            tables=parse_tables(tables),
            startup_mode=StartupMode.parse(startup_mode),
            startup_offset=startup_offset or None,
            startup_timestamp=startup_timestamp,
            stop_after_idle_seconds=_optional_seconds(stop_after_idle_seconds, "stop_after_idle_seconds"),
            max_duration_seconds=_optional_seconds(max_duration_seconds, "max_duration_seconds"),
            stop_at_offset=stop_at_offset or None,
            limits=BatchLimits(int(max_batch_events), float(max_batch_seconds), int(max_batch_bytes)),
            poll_interval=float(poll_interval),
            defer_after_idle_seconds=0.0 if defer_after is None else defer_after,
        )


@dataclass
class StreamProgress:
    """What one stream task has done so far; it travels through deferrals in the trigger's event."""

    started: float
    idle_since: float
    batches: int = 0
    rows: int = 0
    deferrals: int = 0

    @classmethod
    def start(cls) -> StreamProgress:
        now = time.time()
        return cls(started=now, idle_since=now)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamProgress:
        return cls(**{k: d[k] for k in ("started", "idle_since", "batches", "rows", "deferrals")})


class StreamRunner:
    """Runs the stream of ``options`` against one server; ``open`` first, then ``run``."""

    def __init__(self, options: StreamOptions, config: ConnectionConfig) -> None:
        self.options = options
        self.config = config
        self.store = StreamStore(options.base_uri)
        # chunk readers take server ids from the start of the range, the stream the last one
        self.server_id = config.server_id.allocate(len(config.server_id) - 1)

    def open(self, control: Any) -> Checkpoint:
        """The checkpoint to continue from: the lake's, brought in line with ``tables``, or a first one."""
        checkpoint = self.store.read_checkpoint()
        if checkpoint is not None and (stale := self.store.discard_uncommitted(checkpoint)):
            _log.info("discarded %d change files of an interrupted run past batch %d", stale, checkpoint.seq)
        if checkpoint is None:
            checkpoint = self._first_checkpoint(control)
            _log.info("stream starts at %s (startup_mode %s)", checkpoint.offset, self.options.startup_mode.value)
        else:
            notes = reconcile_tables(checkpoint, self.options.tables, self._snapshot_start,
                                     lambda table: load_table_schema(control, table))
            if not notes:
                return checkpoint
            for note in notes:
                _log.warning("%s", note)
        self.store.commit(checkpoint, {})
        return checkpoint

    def run(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress, may_wait: bool) -> str | None:
        """Commit batches until a stop condition holds (returns it), or, with ``may_wait``, until idle for
        ``defer_after_idle_seconds`` (returns None: time to wait elsewhere). Polls every ``poll_interval``."""
        while True:
            self.catch_up(control, checkpoint, progress)
            stopped = self.stop_reason(progress, checkpoint.offset)
            if stopped:
                _log.info("stream stops (%s): %s", stopped, self.summary(progress, checkpoint, stopped))
                return stopped
            if may_wait and time.time() - progress.idle_since >= self.options.defer_after_idle_seconds:
                return None
            time.sleep(self.options.poll_interval)

    def catch_up(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress) -> None:
        """Commit batches until the stream has caught up with the server."""
        check_offset_available(control, checkpoint.offset)
        for report in stream_batches(self.config, self.server_id, self.store, checkpoint, control,
                                     lambda table: load_table_schema(control, table), self.options.limits):
            written = sum(report.rows.values())
            progress.batches += 1
            progress.rows += written
            if written:
                progress.idle_since = time.time()
            lag = f"{time.time() - report.last_ts_ms / 1000:.1f} s" if report.last_ts_ms else "n/a"
            _log.info("batch %d: %d events read, rows written %s, offset %s, lag %s",
                      report.seq, report.events_read, report.rows, report.offset, lag)

    def stop_reason(self, progress: StreamProgress, offset: BinlogOffset) -> str | None:
        options, now = self.options, time.time()
        if options.stop_at_offset:
            if not offset < parse_file_position(options.stop_at_offset, "stop_at_offset", offset.flavor):
                return f"reached {options.stop_at_offset}"
        if options.max_duration_seconds is not None and now - progress.started >= options.max_duration_seconds:
            return f"ran {options.max_duration_seconds:g} s"
        idle = options.stop_after_idle_seconds
        if idle is not None and now - progress.idle_since >= idle:
            return f"idle for {idle:g} s"
        return None

    def wake_at(self, progress: StreamProgress) -> float:
        """When a wait must end at the latest, so that the stop conditions are checked in time."""
        deadlines = [time.time() + DEFAULT_WAKE_SECONDS]
        if self.options.stop_after_idle_seconds is not None:
            deadlines.append(progress.idle_since + self.options.stop_after_idle_seconds)
        if self.options.max_duration_seconds is not None:
            deadlines.append(progress.started + self.options.max_duration_seconds)
        return min(deadlines)

    @staticmethod
    def summary(progress: StreamProgress, checkpoint: Checkpoint, stopped: str) -> dict[str, Any]:
        return {**progress.to_dict(), "stopped": stopped, "offset": str(checkpoint.offset), "seq": checkpoint.seq}

    def _first_checkpoint(self, control: Any) -> Checkpoint:
        options = self.options
        if options.startup_mode is StartupMode.INITIAL:
            starts = {table: self._snapshot_start(table) for table in options.tables}
            offsets = [hw for s in starts.values() if s is not None and (hw := s.lowest_high_watermark) is not None]
            return Checkpoint(0, min(offsets), {t: s.schema for t, s in starts.items() if s is not None},
                              {t: s.chunks for t, s in starts.items() if s is not None})
        server = ServerInfo.read(control)
        offset = start_offset(options.startup_mode.value, control, server, self.config, self.server_id,
                              options.startup_offset, options.startup_timestamp)
        return Checkpoint(0, offset, {t: load_table_schema(control, t) for t in options.tables})

    def _snapshot_start(self, table: TableId) -> TableStart | None:
        """The table's finished snapshot as a capture start; required in ``initial`` mode, unused otherwise."""
        if self.options.startup_mode is not StartupMode.INITIAL:
            return None
        snapshots = SnapshotStore(self.options.base_uri)
        plan = snapshots.read_plan(table)
        manifests = [snapshots.read_manifest(b) for b in plan.batches] if plan else []
        if plan is None or any(m is None for m in manifests):
            raise InvalidOptionError(
                f"startup_mode 'initial' needs the finished snapshot of {table} in {self.options.base_uri}; "
                f"run the snapshot tasks first (or choose another startup_mode)"
            )
        chunks = [[r["chunk"]["s"], r["chunk"]["e"], r["high_watermark"]]
                  for m in manifests if m is not None for r in m["chunks"]]
        return TableStart(plan.schema, chunks)
