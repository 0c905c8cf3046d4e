"""Will the binlog the stream starts from still be on the server when the snapshot is done?

The stream starts at the snapshot's lowest high watermark: for a snapshot that starts now, a binlog
position of about now. It reads that binlog only after the last snapshot batch has committed. If the
server purges binlog files older than its retention before then, the stream cannot start and the
whole snapshot has to be taken again, the longer one included. Every CDC tool's users hit this after
a long snapshot, so the split task checks before any batch runs (Debezium and Flink CDC leave it to
the user and fail at the stream's start).

What purges binlog files by age, by server:

- MariaDB 10.6+ and MySQL 8: ``binlog_expire_logs_seconds`` (0: never). On MariaDB it moves with
  ``expire_logs_days`` (days as a decimal); MySQL 8.0 uses ``expire_logs_days`` only while
  ``binlog_expire_logs_seconds`` is 0, and 8.4 has no ``expire_logs_days``.
- MariaDB before 10.6, MySQL 5.7: ``expire_logs_days`` (whole days, 0: never).
- MySQL 8.0.29+: ``binlog_expire_logs_auto_purge=OFF`` turns automatic purging off altogether.

A server purges when it rotates a binlog file (or restarts), and only files whose last write is older
than the retention, so a retention is at least what it says. MariaDB 11.4+ can also purge by size,
``max_binlog_total_size`` (alias ``binlog_space_limit``): how much binlog the snapshot's duration
writes depends on the load, which we cannot know, so a size limit is only ever a warning.

The estimate, deliberately simple and on the safe side:

- rows still to read: each pending batch's chunks times the table's rows per chunk: measured from its
  committed manifests, else the larger of the split's ``chunk_size`` (what the split aims a chunk at)
  and the server's row estimate over the plan's chunks;
- rate: rows per second of the batches already committed in the lake (their manifests' ``seconds``,
  the Spark job's reading and writing), once they hold at least ``MIN_MEASURED_ROWS`` rows (a few
  small batches are dominated by per-batch costs); otherwise ``DEFAULT_ROWS_PER_SECOND``;
- plus ``BATCH_OVERHEAD_SECONDS`` per Spark job (a mapped snapshot task, holding one or more batches):
  Spark's start, which the manifests do not include;
- jobs one after another (``parallelism`` 1): the split task cannot know how many mapped snapshot
  tasks the executor, pools and ``max_active_tis_per_dag`` will run at once;
- plus, for tables whose snapshot started in an earlier run, how long ago their oldest batch committed:
  the stream needs the binlog from that batch's high watermarks on.

``DEFAULT_ROWS_PER_SECOND`` is 50,000: ``bench/RESULTS.md`` measured the example DAG at 131k rows/s for
a whole 10M-row run (2 cores, ~160 B rows, Spark start included) and a batch's read and write alone at
about 300k rows/s; 50,000 (then 15 s per batch on top) leaves room for wider rows, a busier server and
shared cores. The first committed batches replace it with the real rate.

**A position's margin** (:func:`position_margin`): how long the binlog file of a stream's position has
left before the server may purge it, the one computation the running stream and the connection's
Test button share. A file is purged once its last write is older than the retention,
at a rotation; its last write is when the next file started (that file's FORMAT_DESCRIPTION
timestamp), so the file purges at ``next file's start + retention``; the newest file is not purged
before it is closed, so it has at least the whole retention. Under a size limit the files from the
position's on must fit in it: the room left, at the rate the server writes binlog (the files' sizes
over the oldest file's age), is the time left by size. Times are the server's (``UNIX_TIMESTAMP()``):
its binlog's timestamps are its clock. Reading it costs three short queries (~0.2 ms each on a local
server), and a file's start one non-blocking binlog dump (~30 ms, a connection of its own), which
never changes and is read once per file (``FileStarts``).

No Airflow or Spark here: the split operator gathers the lake's figures and calls these functions.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import BinlogRetentionError, InvalidOptionError

DEFAULT_ROWS_PER_SECOND = 50_000
BATCH_OVERHEAD_SECONDS = 15.0  # Spark's start per job, ~13 s (docs/design/figures.md), plus the task's own
MIN_MEASURED_ROWS = 100_000
WARN_FRACTION = 0.5  # warn once the estimate takes more than this share of the retention

_VARIABLES = (
    "binlog_expire_logs_seconds", "expire_logs_days", "binlog_expire_logs_auto_purge",
    "max_binlog_total_size", "binlog_space_limit",
)


class RetentionCheck(StrEnum):
    """What the split task does when the snapshot may outlast the binlog's retention. A ``StrEnum``: Airflow
    renders templated arguments with ``str()``, which must give the value (not ``RetentionCheck.ERROR``)."""

    ERROR = "error"  # refuse (BinlogRetentionError) when the estimate exceeds the retention; warn above half
    WARN = "warn"  # only warn
    OFF = "off"  # do not look

    @classmethod
    def parse(cls, value: Any) -> RetentionCheck:
        """From the operator argument: a member, or its name as text (a rendered template)."""
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower()
        for member in cls:
            if text == member.value:
                return member
        raise InvalidOptionError(
            f"retention_check must be one of {', '.join(repr(m.value) for m in cls)}, not {value!r}"
        )


@dataclass(frozen=True)
class BinlogRetention:
    """How long the server keeps binlog files, and the variable that decides it.

    ``seconds`` is None when nothing purges by age; ``setting``/``value`` name the variable as the
    server shows it (``value`` in its own unit). ``size_limit`` is a purge-by-size limit in bytes, 0
    when there is none."""

    seconds: float | None
    setting: str
    value: str
    size_limit: int = 0
    size_setting: str | None = None
    has_seconds_variable: bool = True  # False: MariaDB < 10.6, MySQL 5.7 (expire_logs_days only)


def retention_from_variables(variables: Mapping[str, str]) -> BinlogRetention:
    """The retention in effect, from ``SHOW GLOBAL VARIABLES`` (names lower case, values as text)."""
    v = {k.lower(): str(value) for k, value in variables.items()}
    size_setting = next((n for n in ("max_binlog_total_size", "binlog_space_limit") if _number(v.get(n)) > 0), None)
    size_limit = int(_number(v.get(size_setting))) if size_setting else 0
    if v.get("binlog_expire_logs_auto_purge", "ON").upper() in ("OFF", "0"):
        return BinlogRetention(None, "binlog_expire_logs_auto_purge", v["binlog_expire_logs_auto_purge"],
                               size_limit, size_setting)
    if "binlog_expire_logs_seconds" in v:
        seconds = _number(v["binlog_expire_logs_seconds"])
        if seconds > 0 or _number(v.get("expire_logs_days")) <= 0:
            return BinlogRetention(seconds or None, "binlog_expire_logs_seconds", v["binlog_expire_logs_seconds"],
                                   size_limit, size_setting)
        # MySQL 8.0 with binlog_expire_logs_seconds=0 falls back to expire_logs_days
        return BinlogRetention(_number(v["expire_logs_days"]) * 86_400, "expire_logs_days", v["expire_logs_days"],
                               size_limit, size_setting)
    days = _number(v.get("expire_logs_days"))
    return BinlogRetention(days * 86_400 or None, "expire_logs_days", v.get("expire_logs_days", "0"),
                           size_limit, size_setting, has_seconds_variable=False)


def read_retention(conn: Any) -> BinlogRetention:
    """The server's binlog retention (no privilege needed)."""
    marks = ", ".join(["%s"] * len(_VARIABLES))
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", _VARIABLES)  # noqa: S608 (marks)
        rows = cur.fetchall()
    return retention_from_variables({str(name): "" if value is None else str(value) for name, value in rows})


@dataclass(frozen=True)
class TableWork:
    """One table's snapshot as the lake has it: its plan, what is committed, what is left.

    ``committed_*`` sum the committed manifests (``seconds``: their Spark jobs' reading and writing);
    ``oldest_commit_age_seconds`` is how long ago the table's first committed batch took its high
    watermarks (0 when none is committed)."""

    table: TableId
    planned_chunks: int
    pending_batches: int
    pending_chunks: int
    approximate_rows: int = 0
    committed_batches: int = 0
    committed_rows: int = 0
    committed_chunks: int = 0
    committed_seconds: float = 0.0
    oldest_commit_age_seconds: float = 0.0

    def rows_per_chunk(self, chunk_size: int) -> float:
        if self.committed_chunks:
            return self.committed_rows / self.committed_chunks
        return max(float(chunk_size), self.approximate_rows / max(1, self.planned_chunks))


@dataclass(frozen=True)
class SnapshotEstimate:
    """How long until the stream reads the binlog of the snapshot's lowest high watermark."""

    seconds: float  # backlog_seconds + the snapshot still to run
    rows: int
    jobs: int  # Spark jobs (mapped snapshot tasks) still to run, each holding one or more batches
    rows_per_second: float
    measured_batches: int  # committed batches the rate comes from (0: the default rate)
    parallelism: int
    backlog_seconds: float  # age of the high watermarks committed in earlier runs, still needed

    def describe(self) -> str:
        rate = (f"{self.rows_per_second:,.0f} rows/s measured over {self.measured_batches} committed batches"
                if self.measured_batches else f"the default {self.rows_per_second:,.0f} rows/s (too little "
                f"committed in this lake to measure)")
        at_once = "one job at a time" if self.parallelism == 1 else f"{self.parallelism} jobs at a time"
        jobs = "1 Spark job" if self.jobs == 1 else f"{self.jobs} Spark jobs"
        text = (f"{jobs}, about {self.rows:,} rows, at {rate} plus {BATCH_OVERHEAD_SECONDS:.0f} s "
                f"of Spark start per job, {at_once}: {duration(self.seconds - self.backlog_seconds)}")
        if self.backlog_seconds:
            text += (f", plus {duration(self.backlog_seconds)} since the first batches of these tables committed "
                     f"(the stream starts at their high watermarks): {duration(self.seconds)} in all")
        return text


def estimate_snapshot(
    work: Sequence[TableWork],
    chunk_size: int,
    parallelism: int = 1,
    default_rows_per_second: float = DEFAULT_ROWS_PER_SECOND,
    jobs: int | None = None,
) -> SnapshotEstimate:
    """Seconds from now until the stream can start, for the batches still to snapshot. ``jobs``: the Spark
    applications (mapped tasks) that read them, each paying Spark's start, when packed several batches to
    a job; else one a batch."""
    if parallelism < 1:
        raise InvalidOptionError(f"parallelism must be >= 1, not {parallelism!r}")
    measured_rows = sum(w.committed_rows for w in work if w.committed_seconds > 0)
    measured_seconds = sum(w.committed_seconds for w in work if w.committed_seconds > 0)
    measured_batches = 0
    rate = float(default_rows_per_second)
    if measured_rows >= MIN_MEASURED_ROWS and measured_seconds > 0:
        rate = measured_rows / measured_seconds
        measured_batches = sum(w.committed_batches for w in work if w.committed_seconds > 0)
    pending = [w for w in work if w.pending_batches]
    rows = round(sum(w.pending_chunks * w.rows_per_chunk(chunk_size) for w in pending))
    jobs = sum(w.pending_batches for w in pending) if jobs is None else jobs
    snapshot = (rows / rate + jobs * BATCH_OVERHEAD_SECONDS) / parallelism
    backlog = max((w.oldest_commit_age_seconds for w in pending), default=0.0)
    return SnapshotEstimate(snapshot + backlog, rows, jobs, rate, measured_batches, parallelism, backlog)


def check_retention(estimate: SnapshotEstimate, retention: BinlogRetention, mode: RetentionCheck) -> list[str]:
    """The warnings to log; raises ``BinlogRetentionError`` when ``mode`` is ERROR and the estimate
    exceeds the retention. Nothing when ``mode`` is OFF or nothing is left to snapshot."""
    if mode is RetentionCheck.OFF or not estimate.jobs:
        return []
    warnings = []
    if retention.size_limit:
        warnings.append(
            f"the server also purges binlog files by size: {retention.size_setting} = {retention.size_limit:,} "
            f"bytes. The stream needs all binlog written from the snapshot's start until it reads it, "
            f"{duration(estimate.seconds)} from now by the estimate ({estimate.describe()}); this check cannot "
            f"tell how much binlog the server writes in that time: make sure the limit holds it"
        )
    if retention.seconds is None:
        return warnings
    needed = estimate.seconds
    if needed <= WARN_FRACTION * retention.seconds:
        return warnings
    problem = (
        f"the snapshot may outlast the binlog: the stream starts from the binlog at the snapshot's lowest "
        f"high watermark and reads it about {duration(needed)} from now ({estimate.describe()}), and the "
        f"server purges binlog files older than {retention.setting} = {retention.value} "
        f"({duration(retention.seconds)})"
    )
    fix = _fix(needed, retention)
    if needed <= retention.seconds:
        warnings.append(f"{problem}: that is more than {WARN_FRACTION:.0%} of it, little margin if the snapshot "
                        f"runs slower than estimated. {fix}")
        return warnings
    if mode is RetentionCheck.WARN:
        warnings.append(f"{problem}: the binlog the stream needs may be purged before it starts "
                        f"(retention_check='warn', so the snapshot goes on). {fix}")
        return warnings
    raise BinlogRetentionError(
        f"{problem}: the binlog the stream needs would be purged before it starts, and the snapshot taken "
        f"again. {fix}; or, if the snapshot tasks run several batches at once or you know it is faster, set "
        f"retention_check='warn' on the split task (retention_check='off' skips this check)"
    )


def _fix(needed: float, retention: BinlogRetention) -> str:
    """What to set: a retention that keeps the estimate within the warning fraction."""
    target = math.ceil(needed / WARN_FRACTION)
    if retention.has_seconds_variable:  # on MySQL 8.0 it also takes over from expire_logs_days
        return (f"Raise binlog_expire_logs_seconds to at least {target} ({duration(target)}): SET GLOBAL "
                f"binlog_expire_logs_seconds = {target}, and in the server's configuration so that it survives a "
                f"restart; or snapshot fewer tables per run")
    days = math.ceil(target / 86_400)
    return (f"Raise expire_logs_days to at least {days}: SET GLOBAL expire_logs_days = {days}, and in the server's "
            f"configuration so that it survives a restart; or snapshot fewer tables per run")


@dataclass(frozen=True)
class BinlogFile:
    """One binlog file the server still has (``SHOW BINARY LOGS``)."""

    name: str
    size: int


class MarginLimit(StrEnum):
    """What gives a position's margin: the retention by age, the size limit, nothing (never purged), or the
    file is gone already. Its value is what the lake's margin document and the page say."""

    AGE = "age"
    SIZE = "size"
    NONE = "none"
    PURGED = "purged"


@dataclass(frozen=True)
class PositionMargin:
    """How long the binlog file of a position has left on the server, and how far behind the end it is.

    ``seconds`` is None when nothing purges the file (no retention by age or size); ``purge_at`` the
    server time (epoch seconds) it may go; ``behind_bytes``/``behind_files`` what the server wrote after
    the position; ``decided_by`` says which setting and fact give the margin, for messages, and
    ``limited_by`` which kind of limit that is."""

    file: str
    position: int
    seconds: float | None
    purge_at: float | None
    behind_bytes: int
    behind_files: int
    decided_by: str
    retention: BinlogRetention
    limited_by: MarginLimit

    def below(self, margin_seconds: float) -> bool:
        return self.seconds is not None and self.seconds < margin_seconds

    def warning(self, margin_seconds: float | None) -> str | None:
        """The WARNING about the stream's position (its own watch's, and the split's from outside the stream):
        its file already purged, or a margin below ``margin_seconds`` (None: only the purged file); None when
        there is nothing to warn about."""
        if self.limited_by is MarginLimit.PURGED:
            return (f"the stream's position {self.file}:{self.position} is lost already: the server has purged binlog "
                    f"file {self.file}. Unless no transaction followed it on the server (the stream then goes on from "
                    f"the same point), the stream's next start fails with BinlogPositionLostError, or recovers as its "
                    f"on_position_lost says ('resnapshot', 'archive'). Keep binlogs longer than the stream may stay "
                    f"stopped (binlog_expire_logs_seconds, expire_logs_days)")
        if margin_seconds is None or not self.below(margin_seconds):
            return None
        return (f"the stream's position may be lost soon: {self.describe()}, less than binlog_margin_seconds = "
                f"{margin_seconds:g}. {self.advice()}")

    def describe(self) -> str:
        """``file:position`` and when it may be purged: for the stream's warning, the split's and the Test button."""
        behind = (f"the server has written {self.behind_bytes:,} bytes of binlog after it"
                  f"{f' ({self.behind_files} newer files)' if self.behind_files else ''}")
        if self.seconds is None or self.purge_at is None:
            return f"binlog position {self.file}:{self.position} is not purged by age or size ({behind})"
        at = dt.datetime.fromtimestamp(self.purge_at, dt.UTC).isoformat(timespec="seconds")
        when = f"in {duration(self.seconds)}" if self.seconds > 0 else f"already ({duration(-self.seconds)} ago)"
        return (f"binlog file {self.file} (position {self.file}:{self.position}) may be purged {when}, at {at} "
                f"server time ({self.decided_by}); {behind}")

    def advice(self) -> str:
        """What to do before the position is lost."""
        keep = ("keep binlogs longer (SET GLOBAL binlog_expire_logs_seconds, and in the server's configuration)"
                if self.retention.has_seconds_variable else
                "keep binlogs longer (SET GLOBAL expire_logs_days, and in the server's configuration)")
        if self.retention.size_limit:
            keep += f" or raise {self.retention.size_setting}"
        return (f"Let the stream read past it before then (a stopped or paused stream: run it; a slow one: fewer "
                f"tables per stream, larger commits), or {keep}; once it is purged the stream fails with "
                f"BinlogPositionLostError and the tables must be taken anew")


def position_margin(
    retention: BinlogRetention, files: Sequence[BinlogFile], file: str, position: int, now: float,
    started: Callable[[str], float],
) -> PositionMargin:
    """The margin of ``file:position`` (see the module's docstring). ``files`` oldest first, as the server
    lists them; ``now`` the server's time; ``started(name)`` a file's first event's time, asked only for
    the file after ``file`` (by age) and the oldest (by size). A file the server no longer has: 0 left."""
    names = [f.name for f in files]
    if file not in names:
        return PositionMargin(file, position, 0.0, now, 0, 0, "the server no longer has it", retention,
                              MarginLimit.PURGED)
    index = names.index(file)
    newer = files[index + 1:]
    behind = max(0, files[index].size - position) + sum(f.size for f in newer)
    limits: list[tuple[float, str, MarginLimit]] = []
    if retention.seconds is not None:
        if newer:
            closed = started(newer[0].name)
            limits.append((closed + retention.seconds - now,
                           f"{retention.setting} = {retention.value} after it was closed "
                           f"{duration(now - closed)} ago", MarginLimit.AGE))
        else:
            limits.append((retention.seconds, f"the newest file: at least {retention.setting} = {retention.value} "
                                              f"once closed", MarginLimit.AGE))
    if retention.size_limit:
        age = now - started(names[0])
        total = sum(f.size for f in files)
        room = retention.size_limit - sum(f.size for f in files[index:])
        if age > 0 and total > 0:
            rate = total / age
            limits.append((room / rate, f"{retention.size_setting} = {retention.size_limit:,} bytes at the "
                                        f"{rate:,.0f} bytes/s the server writes binlog", MarginLimit.SIZE))
    if not limits:
        return PositionMargin(file, position, None, None, behind, len(newer), "no retention", retention,
                              MarginLimit.NONE)
    seconds, decided_by, limit = min(limits)
    return PositionMargin(file, position, seconds, now + seconds, behind, len(newer), decided_by, retention, limit)


def read_binlog_files(conn: Any) -> tuple[list[BinlogFile], float]:
    """The server's binlog files, oldest first, and its time (epoch seconds)."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [BinlogFile(str(row[0]), int(row[1])) for row in cur.fetchall()]
        cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
        (now,) = cur.fetchone()
    return files, float(now)


class FileStarts:
    """When each binlog file started: its FORMAT_DESCRIPTION's timestamp, read once per file over a
    non-blocking binlog dump under server id 0 (neither MariaDB nor MySQL then drops another replica
    with that id: a running stream's connection stays), kept since it never changes."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self._known: dict[str, float] = {}

    def __call__(self, file: str) -> float:
        # imported here: the split operator imports this module's RetentionCheck at DAG-parse time
        from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump
        from airflow_provider_mysqlcdc.cdc.binlog.events import FormatDescription

        if file not in self._known:
            dump = BinlogDump(self.settings, 0, file, 4)
            try:
                started = next(e.timestamp for e in dump if isinstance(e, FormatDescription))
            finally:
                dump.close()
            self._known[file] = float(started)
        return self._known[file]


def read_position_margin(conn: Any, starts: FileStarts, file: str, position: int) -> PositionMargin:
    """``position_margin`` of ``file:position`` as the server ``conn`` reaches says it now."""
    retention = read_retention(conn)
    files, now = read_binlog_files(conn)
    return position_margin(retention, files, file, position, now, starts)


def stopped_stream_allowance(conn: Any, settings: Mapping[str, Any]) -> str:
    """How long a stream caught up now may stay stopped before its position is purged: the margin of the
    binlog's end (``position_margin``), as a sentence for the connection's Test button."""
    files, _ = read_binlog_files(conn)
    if not files:
        return "the server lists no binlog files"
    newest = files[-1]
    margin = read_position_margin(conn, FileStarts(settings), newest.name, newest.size)
    if margin.seconds is None:
        return ("the server purges no binlog by age or size: a stopped stream keeps its position (watch the "
                "binlog's disk)")
    return (f"a stream caught up now keeps its binlog position for about {duration(margin.seconds)} while stopped "
            f"or behind ({margin.decided_by}); longer, and it fails with BinlogPositionLostError")


def duration(seconds: float) -> str:
    """``45 s``, ``12 min 5 s``, ``3 h 20 min``, ``2 d 4 h``: short, for messages."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86_400:
        return f"{s // 3600} h {s % 3600 // 60} min" if s % 3600 // 60 else f"{s // 3600} h"
    return f"{s // 86_400} d {s % 86_400 // 3600} h" if s % 86_400 // 3600 else f"{s // 86_400} d"


def _number(text: str | None) -> float:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0
