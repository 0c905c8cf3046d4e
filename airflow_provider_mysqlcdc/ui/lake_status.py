"""What one lake says about its replica, for the page and its JSON: per table its snapshot chunks, Delta
tables, verification and table events; the stream's position, lease and commit history.

Read only, and only through the lake's readers (``SnapshotStore``, ``StreamStore``, the table format
seam ``lake.format.table_format``, ``VerifyStore``'s reports, the last binlog margin check
``lake.documents.binlog_margin``): the page never writes. The snapshot's chunks are
done when their batch has a manifest; a batch without one is pending unless Airflow says its task runs
or failed (``batch_states``, given by ``ui.runs``: this module knows no Airflow). Figures of the tables
come from their logs (file sizes and row counts, no data read); the stream's lag at each commit from
its changelogs: the commit's time (its history) minus the newest source commit time (``_op_ts``) of its
rows.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
import pyarrow.fs as pafs

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.split.chunks import encode_key
from airflow_provider_mysqlcdc.engine.verification.verify import VerifyReport
from airflow_provider_mysqlcdc.lake.changelog import DDL_COLUMN
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import read_margin_check
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest, Plan, SnapshotStore
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.parallel import each
from airflow_provider_mysqlcdc.lake.read.committed import TABLE_EVENT_OPS
from airflow_provider_mysqlcdc.lake.read.stream_commits import StreamAppend, appends_of
from airflow_provider_mysqlcdc.lake.write.lease import Lease
from airflow_provider_mysqlcdc.lake.write.merge import merged_through
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import StoredFile, TableVersion

HISTORY_COMMITS = 2_000
"""Changelog commits read per table for the history: about a day of a stream committing every minute."""
HISTORY_HOURS = 6.0
"""The hours of stream history the page draws."""
RATE_WINDOW_SECONDS = 300
"""The stream's rows/s is the rows its commits wrote in this many seconds before now."""
DONE, RUNNING, FAILED, PENDING = "done", "running", "failed", "pending"
CHUNK_STATES = (DONE, RUNNING, FAILED, PENDING)


@dataclass(frozen=True)
class ChunkView:
    """One chunk of a table's snapshot: its key range ``[start, end)`` as text (None: unbounded), its batch
    and that batch's state; rows and high watermark once its batch committed."""

    index: int
    start: str | None
    end: str | None
    batch: int
    state: str
    rows: int | None = None
    high_watermark: str | None = None


@dataclass(frozen=True)
class DeltaFacts:
    """A Delta table of the replica, from its log: version, data files, their bytes and rows."""

    version: int
    files: int
    bytes: int
    rows: int


@dataclass(frozen=True)
class VerificationView:
    """The table's latest verification report: equal, or the chunks that differ and how."""

    run: str
    written_at: str
    equal: bool
    chunks: int
    rows: int
    differing_chunks: list[int]
    missing: int
    extra: int
    different: int


@dataclass(frozen=True)
class TableEvent:
    """A table event in the changelog (a TRUNCATE or a schema change the stream applied), or the DDL that
    stopped the table, at its binlog offset."""

    kind: str
    statement: str
    at: str
    source_time: str | None = None


@dataclass(frozen=True)
class TableView:
    """One table of the lake. ``state``: ``streaming`` (the stream captures it), ``snapshot`` (batches still
    to commit), ``stopped`` (no longer captured: ``stopped_by`` says by which DDL, empty when taken out of
    the tables) or ``snapshotted`` (snapshot done, the stream has not taken it yet)."""

    table: str
    state: str
    chunks: list[ChunkView]
    batches: int
    batches_done: int
    snapshot_rows: int
    current: DeltaFacts | None
    changelog: DeltaFacts | None
    merged_through: int | None
    verification: VerificationView | None
    events: list[TableEvent]
    stopped_by: str | None = None

    def chunk_counts(self) -> dict[str, int]:
        return {state: sum(c.state == state for c in self.chunks) for state in CHUNK_STATES}


@dataclass(frozen=True)
class CommitPoint:
    """One stream batch: when it was committed, the rows it wrote and its lag (commit time minus the newest
    source commit among its rows; None for a batch of table events only)."""

    seq: int
    committed_at: str
    rows: int
    lag_seconds: float | None


@dataclass(frozen=True)
class MarginView:
    """The last check of the checkpoint's binlog margin (``lake.documents.binlog_margin``): the seconds its
    binlog file had left when measured (None: the server purges no binlog), what limits them (``age``,
    ``size``, ``none``, ``purged``), ``below`` the stream's ``binlog_margin_seconds`` then (or purged), and
    how old the figure is: a stream that is down stops checking."""

    measured_at: str
    age_seconds: float
    checked_by: str
    file: str
    position: int
    seconds: float | None
    limited_by: str
    behind_bytes: int
    warn_below_seconds: float | None
    below: bool


@dataclass(frozen=True)
class StreamView:
    """The stream of the lake as its checkpoint, lease, changelogs and last margin check tell it."""

    seq: int
    offset: str
    gtid: str | None
    last_commit: str
    lag_seconds: float | None
    rows_per_second: float
    lease_holder: str | None
    lease_valid_until: str | None
    lease_held: bool
    history: list[CommitPoint] = field(default_factory=list)
    binlog_margin: MarginView | None = None


@dataclass(frozen=True)
class LakeStatus:
    """Everything the page shows of one lake."""

    base_uri: str
    tables: list[TableView]
    stream: StreamView | None


def _iso(ms: float) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


def _key_text(value: Any) -> str | None:
    return None if value is None else json.dumps(encode_key(value), default=str)


def lake_tables(lake: Lake, checkpoint: Checkpoint | None) -> list[TableId]:
    """The tables of the lake: those the checkpoint names, and those with a snapshot plan."""
    found = set(checkpoint.schemas) | set(checkpoint.stopped) if checkpoint is not None else set()
    if lake.exists(lake.root):
        for database in lake.fs.get_file_info(pafs.FileSelector(lake.root)):
            if database.type != pafs.FileType.Directory or database.base_name.startswith("_"):
                continue
            for table in lake.fs.get_file_info(pafs.FileSelector(database.path)):
                if table.type == pafs.FileType.Directory:
                    table_id = TableId(database.base_name, table.base_name)
                    if lake.exists(lake.table(table_id).plan):
                        found.add(table_id)
    return sorted(found, key=str)


def delta_facts(table: TableVersion | None, files: list[StoredFile] | None = None) -> DeltaFacts | None:
    """The table's figures from its log and files' statistics (None before it exists); ``files``: its files,
    when listed already."""
    if table is None:
        return None
    files = table.files() if files is None else files
    return DeltaFacts(table.version(), len(files), sum(f.size for f in files), table.count())


def chunk_views(plan: Plan, manifests: list[BatchManifest | None],
                batch_states: Mapping[tuple[TableId, int], str]) -> list[ChunkView]:
    """The plan's chunks, each with its batch's state: done with a manifest, else what Airflow says."""
    views = []
    for batch, manifest in zip(plan.batches, manifests, strict=True):
        results = {r.chunk.index: r for r in manifest.chunks} if manifest is not None else {}
        state = DONE if manifest is not None else batch_states.get((batch.table, batch.number), PENDING)
        for chunk in plan.chunks_of(batch):
            result = results.get(chunk.index)
            views.append(ChunkView(chunk.index, _key_text(chunk.start), _key_text(chunk.end), batch.number, state,
                                   result.rows if result is not None else None,
                                   str(result.high_watermark) if result is not None else None))
    return views


def latest_verification(lake: Lake, table: TableId) -> VerificationView | None:
    """The newest whole-run report under the table's ``verify/`` folder (``engine.verification.verify``), if any."""
    folder = lake.table(table).path("verify")
    if not lake.exists(folder):
        return None
    reports = [f for f in lake.fs.get_file_info(pafs.FileSelector(folder))
               if f.type == pafs.FileType.File and f.base_name.endswith(".json")]
    if not reports:
        return None
    newest = max(reports, key=lambda f: (f.mtime_ns or 0, f.base_name))
    document = lake.read_json(newest.path)
    if document is None:  # deleted since it was listed
        return None
    report = VerifyReport.from_dict(document, newest.path)
    totals = report.totals()
    return VerificationView(report.run, _iso((newest.mtime_ns or 0) / 1e6), report.equal, len(report.verdicts),
                            report.rows, [v.chunk.index for v in report.differing], totals["missing"],
                            totals["extra"], totals["different"])


def table_events(changelog: TableVersion | None, checkpoint: Checkpoint | None, table: TableId) -> list[TableEvent]:
    """The table events the stream committed to the changelog up to its checkpoint (only the few columns
    that name them are read; a killed run's batch past the checkpoint is not shown), then the DDL that
    stopped the table."""
    events = []
    if changelog is not None and DDL_COLUMN in changelog.schema().names:
        committed = pc.field("_op").isin(TABLE_EVENT_OPS)
        if checkpoint is not None:
            committed = committed & (pc.field(STREAM_SEQ_COLUMN) <= checkpoint.visible[0])
        rows = changelog.read(["_op", DDL_COLUMN, "_op_ts", "_binlog_file", "_binlog_pos"],
                              committed).sort_by([("_binlog_file", "ascending"),
                                                                    ("_binlog_pos", "ascending")])
        for row in rows.to_pylist():
            events.append(TableEvent(ChangeKind(row["_op"]).name.lower().replace("_", " "), row[DDL_COLUMN] or "",
                                     f"binlog file {row['_binlog_file']} position {row['_binlog_pos']}",
                                     _iso(row["_op_ts"]) if row["_op_ts"] else None))
    stopped = checkpoint.stopped.get(table) if checkpoint is not None else None
    if stopped is not None:
        events.append(TableEvent("stopped", stopped.ddl or "taken out of the captured tables", str(stopped.offset)))
    return events


def table_view(lake: Lake, table: TableId, checkpoint: Checkpoint | None,
               batch_states: Mapping[tuple[TableId, int], str], opened: OpenedTables) -> TableView:
    """The table's view; ``opened``: its Delta tables, opened once for this read."""
    store = SnapshotStore(lake)
    plan = store.read_plan(table)
    manifests = store.manifests(plan) if plan is not None else []
    chunks = chunk_views(plan, manifests, batch_states) if plan is not None else []
    current_table, changelog_table = opened.current, opened.changelog
    current, changelog = delta_facts(current_table), delta_facts(changelog_table, opened.changelog_files)
    stopped = checkpoint.stopped.get(table) if checkpoint is not None else None
    done = sum(m is not None for m in manifests)
    if stopped is not None:
        state = "stopped"
    elif plan is not None and done < len(plan.batches):
        state = "snapshot"
    elif checkpoint is not None and table in checkpoint.schemas:
        state = "streaming"
    else:
        state = "snapshotted"
    merged = merged_through(current_table) if current_table is not None else None
    return TableView(str(table), state, chunks, len(plan.batches) if plan is not None else 0, done,
                     sum(m.rows for m in manifests if m is not None), current, changelog, merged,
                     latest_verification(lake, table), table_events(changelog_table, checkpoint, table),
                     (stopped.ddl or "taken out of the captured tables") if stopped is not None else None)


@dataclass(frozen=True)
class OpenedTables:
    """A table's two Delta tables, opened once for one read of the page."""

    current: TableVersion | None
    changelog: TableVersion | None

    @functools.cached_property
    def changelog_files(self) -> list[StoredFile] | None:
        """The changelog's files (None: no changelog), listed at the first use, for its figures and its history
        alike: a streamed table not shown, without batches in the window, needs none."""
        return self.changelog.files() if self.changelog is not None else None


def _open(lake: Lake, table: TableId) -> OpenedTables:
    places = lake.table(table)
    return OpenedTables(places.current.open(), places.changelog.open())


def newest_changes(changelog: TableVersion, files: list[StoredFile], first_seq: int, last_seq: int) -> dict[int, int]:
    """Per stream batch in ``[first_seq, last_seq]``: the newest source commit time (``_op_ts``, ms) of its
    rows. From the statistics of the changelog's ``files`` while each holds one batch (the stream writes a
    file a table a batch, and alone writes the changelog); else, as after a compaction, two columns read."""
    newest: dict[int, int] = {}
    for file in files:
        low, high = file.low.get(STREAM_SEQ_COLUMN), file.high.get(STREAM_SEQ_COLUMN)
        if low is not None and high is not None and (high < first_seq or low > last_seq):
            continue
        latest = file.high.get("_op_ts")
        if low is None or low != high or latest is None:
            return _newest_read(changelog, first_seq, last_seq)
        newest[low] = max(newest.get(low, latest), latest)
    return newest


def _newest_read(changelog: TableVersion, first_seq: int, last_seq: int) -> dict[int, int]:
    """``newest_changes`` from the rows: two columns read, the batches' files only."""
    seq = pc.field(STREAM_SEQ_COLUMN)
    rows = changelog.read([STREAM_SEQ_COLUMN, "_op_ts"], (seq >= first_seq) & (seq <= last_seq))
    newest = rows.group_by(STREAM_SEQ_COLUMN).aggregate([("_op_ts", "max")])
    return dict(zip(newest.column(STREAM_SEQ_COLUMN).to_pylist(), newest.column("_op_ts_max").to_pylist(),
                    strict=True))


@dataclass(frozen=True)
class _TableHistory:
    """One table's part of the stream's history: its appends in the window, and per batch the newest source
    commit time among its rows."""

    appends: list[StreamAppend]
    newest: dict[int, int]


def table_history(opened: OpenedTables, through_seq: int, since_ms: float) -> _TableHistory:
    """The table's stream batches up to ``through_seq`` committed after ``since_ms``."""
    changelog = opened.changelog
    appends = [a for a in appends_of(changelog, HISTORY_COMMITS) if a.seq <= through_seq and a.committed_ms >= since_ms]
    files = opened.changelog_files if appends else None
    if changelog is None or files is None:
        return _TableHistory([], {})
    return _TableHistory(appends, newest_changes(changelog, files, appends[0].seq, appends[-1].seq))


def stream_history(parts: Iterable[_TableHistory]) -> list[CommitPoint]:
    """The stream's batches over all its tables' parts."""
    committed: dict[int, int] = {}
    rows: dict[int, int] = {}
    newest: dict[int, int] = {}
    for part in parts:
        for append in part.appends:
            committed[append.seq] = max(committed.get(append.seq, 0), append.committed_ms)
            rows[append.seq] = rows.get(append.seq, 0) + append.rows
        for seq, ts in part.newest.items():
            if ts:
                newest[seq] = max(newest.get(seq, 0), ts)
    return [CommitPoint(seq, _iso(committed[seq]), rows[seq],
                        round(max(0, committed[seq] - newest[seq]) / 1000, 1) if seq in newest else None)
            for seq in sorted(committed)]


def margin_view(lake: Lake, now: float) -> MarginView | None:
    """The lake's last margin check, with its age at ``now`` (None: nothing has checked yet)."""
    check = read_margin_check(lake)
    if check is None:
        return None
    age = max(0.0, round(now - dt.datetime.fromisoformat(check.measured_at).timestamp(), 1))
    return MarginView(check.measured_at, age, check.checked_by, check.file, check.position, check.seconds,
                      check.limited_by.value, check.behind_bytes, check.warn_below_seconds, check.below)


def stream_view(lake: Lake, checkpoint: Checkpoint, history: list[CommitPoint], now: float) -> StreamView:
    seq, offset = checkpoint.visible
    lags = [p.lag_seconds for p in history if p.lag_seconds is not None]
    since = now - RATE_WINDOW_SECONDS
    recent = sum(p.rows for p in history if dt.datetime.fromisoformat(p.committed_at).timestamp() >= since)
    document = lake.read_json(lake.lease)
    lease = Lease.from_dict(document, lake.lease) if document is not None else None
    return StreamView(seq, f"{offset.file}:{offset.position}", offset.gtid, checkpoint.updated_at,
                      lags[-1] if lags else None, round(recent / RATE_WINDOW_SECONDS, 1),
                      lease.holder if lease is not None else None,
                      _iso(lease.expires_at * 1000) if lease is not None else None,
                      lease is not None and lease.valid(now), history, margin_view(lake, now))


def lake_status(lake: Lake, tables: Iterable[str] | None = None,
                batch_states: Mapping[tuple[TableId, int], str] | None = None, now: float | None = None) -> LakeStatus:
    """The lake's tables (those of ``tables`` only, when given) and its stream. Each table's plan, manifests
    and Delta logs are read once, many tables at once (``lake.parallel``): a whole database is hundreds."""
    now = time.time() if now is None else now
    checkpoint = StreamStore(lake).read_checkpoint()
    wanted = {TableId.parse(t) for t in tables} if tables is not None else None
    shown = {t for t in lake_tables(lake, checkpoint) if wanted is None or t in wanted}
    streamed = {*checkpoint.schemas, *checkpoint.stopped} if checkpoint is not None else set()
    since_ms = (now - HISTORY_HOURS * 3600) * 1000
    visible_seq = checkpoint.visible[0] if checkpoint is not None else -1

    def read(table: TableId) -> tuple[TableView | None, _TableHistory | None]:
        opened = _open(lake, table)
        view = table_view(lake, table, checkpoint, batch_states or {}, opened) if table in shown else None
        return view, table_history(opened, visible_seq, since_ms) if table in streamed else None

    found = each(read, sorted({*shown, *streamed}, key=str), name="ui-read")
    views = [view for view, _ in found if view is not None]
    stream = (stream_view(lake, checkpoint, stream_history(h for _, h in found if h is not None), now)
              if checkpoint is not None else None)
    return LakeStatus(lake.base_uri, views, stream)
