"""Keep a table's two Delta tables small: few data files, few unreferenced files, a short log.

Why it is needed: the stream commits a few rows every few seconds, one Parquet file per commit and one
JSON log entry; the MERGE rewrites the files of the partitions it touches. Left alone, the changelog
grows by a file a commit (every reader lists and opens them all), superseded files stay on disk forever
and the log grows by an entry a commit. Three Delta operations bound that:

* **compaction** (``optimize.compact``) rewrites a partition's small files into files of about
  ``target_file_bytes``; the data does not change, so readers and the stream's appends are not disturbed
  (an OPTIMIZE conflicts only with deletes of the same files, and one process writes a table);
* **vacuum** deletes the files no version of the last ``vacuum_retention_hours`` references any more. We run
  delta-rs's default *lite* vacuum, which takes the candidates from the log's remove actions instead of
  listing the table's folder (cheap on S3); files a crashed writer left unreferenced are only found by a
  full vacuum (:func:`vacuum` with ``full=True``), worth an occasional manual run;
* **checkpoints and log cleanup**: delta-rs writes a checkpoint every ``delta.checkpointInterval`` commits
  by itself (a post-commit hook), and so do the stream's appends of their own log entries (``lake.format.delta_log``);
  log entries older than ``delta.logRetentionDuration`` and before a
  checkpoint that is itself that old are deleted by ``cleanup_metadata``. Both are table properties: a
  table is made with the policy's (``DEFAULT_POLICY``, through the lake handle's places), and :func:`maintain`
  sets them where a table differs (made by an older version, or upkeep under another policy). Where that would
  raise the table's protocol (``TableVersion.set_properties``: a table with a DATETIME column on an object
  store) they are left as they are, and the report says so: Delta's defaults then keep the log and the
  tombstones longer, which costs storage, never a row.

Vacuum retention, default 24 hours: a reader that planned its read on an older version (a Spark job that
listed the files, a DuckDB query, a time-travel read) fails with "file not found" if the files vanish
under it, which is a far worse failure than keeping superseded files a while. 24 hours covers a daily
job and a day of looking back; what it costs is disk for a day of rewritten files (compaction output
plus MERGE rewrites), not reader time, since readers only open referenced files. Delta's own default is
7 days, enforced by a check that refuses shorter retentions; we pass ``enforce_retention_duration=False``
because the policy's value is the decision. The log retention defaults to the same 24 hours: a version
whose files may be vacuumed is not worth keeping in the log.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import Compaction, ReplicaTable, TableVersion

MIB = 1024 * 1024
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
DELETED_FILE_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
TOMBSTONE_MARGIN_HOURS = 168
"""How much longer than the vacuum retention a checkpoint keeps a removed file's tombstone: the lite vacuum
finds files to delete only through tombstones, so one dropped before a vacuum ran would leak its file."""


@dataclass(frozen=True)
class MaintenancePolicy:
    """When and how :func:`maintain` keeps a Delta table small. Every default is here.

    ``check_every_commits``: look at the table (load its log, count small files) once this many commits
    have been made since the last look; between looks :func:`maintain` costs nothing.
    ``max_small_files``: compact when the table holds more than this many *excess* small files (files under
    ``target_file_bytes``, beyond the one per partition compaction would leave anyway).
    ``target_file_bytes``: compaction's output file size (delta-rs's default is 100 MiB; 64 MiB keeps a
    MERGE's rewrite of one touched file short).
    ``vacuum_retention_hours``: how long a file no longer referenced stays on disk (module docstring).
    ``log_retention_hours``: ``delta.logRetentionDuration``; may be fractional.
    ``checkpoint_interval``: ``delta.checkpointInterval``, commits between two checkpoints.

    So between two looks at most ``check_every_commits`` commits add files, and a look leaves at most
    ``max_small_files`` excess small files: the changelog never holds more than about
    ``partitions + max_small_files + check_every_commits`` small files.
    """

    check_every_commits: int = 10
    max_small_files: int = 50
    target_file_bytes: int = 64 * MIB
    vacuum_retention_hours: int = 24
    log_retention_hours: float = 24.0
    checkpoint_interval: int = 100

    def __post_init__(self) -> None:
        minimum: dict[str, float] = {
            "check_every_commits": 1, "max_small_files": 1, "target_file_bytes": MIB,
            "vacuum_retention_hours": 0, "log_retention_hours": 0, "checkpoint_interval": 1,
        }
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum[f.name]:
                raise InvalidOptionError(
                    f"MaintenancePolicy.{f.name} must be a number >= {minimum[f.name]:g}, got {value!r}"
                )
        if not isinstance(self.vacuum_retention_hours, int):
            raise InvalidOptionError(
                f"MaintenancePolicy.vacuum_retention_hours must be whole hours (delta-rs's vacuum takes an "
                f"int), got {self.vacuum_retention_hours!r}"
            )

    def table_properties(self) -> dict[str, str]:
        """The Delta table properties this policy sets on a table."""
        seconds = round(self.log_retention_hours * 3600)
        return {
            CHECKPOINT_INTERVAL_PROPERTY: str(self.checkpoint_interval),
            LOG_RETENTION_PROPERTY: f"interval {seconds} seconds",
            DELETED_FILE_RETENTION_PROPERTY: f"interval {self.vacuum_retention_hours + TOMBSTONE_MARGIN_HOURS} hours",
        }


DEFAULT_POLICY = MaintenancePolicy()
"""The policy of the stream's upkeep, whose properties every table of the lake is made with."""


@dataclass(frozen=True)
class MaintenanceReport:
    """What one :func:`maintain` call did. ``checked`` is False when it did not look at the table (too few
    commits since the last look, or no table yet): the caller then keeps counting commits; once it is
    True the caller starts counting from 0 again."""

    checked: bool = False
    version: int | None = None
    data_files: int = 0
    small_files: int = 0
    compacted: bool = False
    files_removed: int = 0
    files_added: int = 0
    vacuumed_files: int = 0
    log_cleaned: bool = False
    seconds: float = 0.0
    compaction_metrics: dict[str, Any] = field(default_factory=dict)
    properties_left: dict[str, str] = field(default_factory=dict)
    """The policy's properties the table differs in and that could not be set (``apply_properties``)."""


def excess_small_files(table: TableVersion, small_below: int) -> tuple[int, int]:
    """``(small, excess)``: the files under ``small_below`` bytes, and how many of them beyond one per
    partition (what compaction can remove)."""
    small = [f for f in table.files() if f.size < small_below]
    partitions = {tuple(sorted(f.partition.items())) for f in small}
    return len(small), len(small) - len(partitions)


def compact(location: ReplicaTable, target_file_bytes: int = MaintenancePolicy.target_file_bytes) -> Compaction:
    """Rewrite each partition's small files into files of about ``target_file_bytes``; the files removed and
    added, and the format's own metrics. The rows and their values do not change."""
    return _open(location).compact(target_file_bytes)


def vacuum(
    location: ReplicaTable, retention_hours: int = MaintenancePolicy.vacuum_retention_hours, *, full: bool = False
) -> list[str]:
    """Delete the files no version of the last ``retention_hours`` references; the files deleted. ``full``
    also lists the folder for files no version ever referenced (a crashed writer's)."""
    return _open(location).vacuum(retention_hours, full)


def checkpoint(location: ReplicaTable) -> None:
    """Write a checkpoint of the current version now, then delete the log entries the table's
    ``delta.logRetentionDuration`` lets go (e.g. when a stream stops)."""
    table = _open(location)
    table.checkpoint()
    table.cleanup_log()


def apply_properties(table: TableVersion, policy: MaintenancePolicy) -> dict[str, str]:
    """Set the policy's table properties where the table differs (one commit, the first time only); the
    properties left different where the table cannot take them without a protocol change (none if it took
    them)."""
    wanted = policy.table_properties()
    current = table.properties()
    differing = {key: value for key, value in wanted.items() if current.get(key) != value}
    if not differing or table.set_properties(wanted):
        return {}
    return differing


def maintain(location: ReplicaTable, policy: MaintenancePolicy, commits_since_last: int) -> MaintenanceReport:
    """Call after each commit to the table at ``location`` with the number of commits made since the last call
    that returned ``checked=True``. Every ``policy.check_every_commits`` commits it looks at the table:
    sets the policy's table properties and compacts when there are too many small files; about once per
    checkpoint interval (when the table's version crossed a multiple of it since the last look) it also
    vacuums and cleans the log. Not more often: a lite vacuum names the files of every tombstone past
    retention, already deleted or not, until a checkpoint drops the tombstones
    (``delta.deletedFileRetentionDuration``, the vacuum retention plus ``TOMBSTONE_MARGIN_HOURS``), and writes
    two commits each time.

    The counts in the report: ``vacuumed_files`` are the files the vacuum named (some may have been gone).
    """
    if commits_since_last < policy.check_every_commits:
        return MaintenanceReport()
    table = location.open()
    if table is None:
        return MaintenanceReport()
    started = time.perf_counter()
    properties_left = apply_properties(table, policy)
    small, excess = excess_small_files(table, policy.target_file_bytes)
    compaction = None
    if excess > policy.max_small_files:
        compaction = table.compact(policy.target_file_bytes)
    table.refresh()
    version = table.version()
    crossed = version // policy.checkpoint_interval != (version - commits_since_last) // policy.checkpoint_interval
    vacuumed: list[str] = []
    if crossed:
        vacuumed = vacuum(location, policy.vacuum_retention_hours)
        table.cleanup_log()
    return MaintenanceReport(
        checked=True, version=version, data_files=len(table.files()), small_files=small,
        compacted=compaction is not None and bool(compaction.metrics),
        files_removed=compaction.files_removed if compaction else 0,
        files_added=compaction.files_added if compaction else 0, vacuumed_files=len(vacuumed), log_cleaned=crossed,
        seconds=time.perf_counter() - started, compaction_metrics=dict(compaction.metrics) if compaction else {},
        properties_left=properties_left,
    )


def _open(location: ReplicaTable) -> TableVersion:
    table = location.open()
    if table is None:
        raise InvalidOptionError(f"no table at {location.uri}: maintain a table once its first commit is made")
    return table
