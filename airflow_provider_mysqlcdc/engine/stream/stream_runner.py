"""The stream runner: from the options to committed change batches, until a stop condition or a wait.

The stream operator, the tests and the benchmarks all run the stream through this class, so the
startup (the first checkpoint for each startup mode, and the tables added or removed since the last
run), the batch loop and the stop conditions exist once. No Airflow here: when the runner is idle
long enough it returns, and the operator hands the wait to the triggerer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import replace
from functools import partial
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.dump import EventStream
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, check_offset_available, server_identity
from airflow_provider_mysqlcdc.cdc.offset.startup import (
    StartupMode,
    anchor,
    parse_file_position,
    reanchor,
    start_offset,
)
from airflow_provider_mysqlcdc.cdc.schema.discovery import find_tables, load_table_schema, load_table_schemas
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.checks import check_source
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.retention import PositionMargin, read_binlog_files
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.cdc.split.chunks import FinishedChunkInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import (
    PositionLostBehavior,
    SchemaChangeBehavior,
    StreamOptions,
    StreamProgress,
    StreamSummary,
)
from airflow_provider_mysqlcdc.engine.stream.archive_catch_up import ArchiveCatchUp
from airflow_provider_mysqlcdc.engine.stream.captured_tables import TableStart, reconcile_tables
from airflow_provider_mysqlcdc.engine.stream.lost_range import resnapshot_lost_range
from airflow_provider_mysqlcdc.engine.stream.retention_watch import RetentionWatch
from airflow_provider_mysqlcdc.engine.stream.schema_changes import SchemaChanges
from airflow_provider_mysqlcdc.engine.stream.schema_self_check import SchemaSelfCheck
from airflow_provider_mysqlcdc.engine.stream.state_merge import StateMerger
from airflow_provider_mysqlcdc.engine.stream.stream_batches import CaughtUp, StreamCommit, stream_batches
from airflow_provider_mysqlcdc.engine.stream.stream_observer import (
    CommitObservation,
    MergeObservation,
    NoStreamObserver,
    StreamObserver,
)
from airflow_provider_mysqlcdc.engine.stream.table_upkeep import TableUpkeep
from airflow_provider_mysqlcdc.engine.verification.resnapshot import resnapshot_server_id
from airflow_provider_mysqlcdc.exceptions import (
    BinlogPositionLostError,
    InvalidOptionError,
    ServerChangedError,
    SourceConfigError,
)
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore, batch_read_with
from airflow_provider_mysqlcdc.lake.write.lease import StreamLease
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

_log = logging.getLogger(__name__)

DEFAULT_WAKE_SECONDS = 300.0


_TABLES_NAMED = 5
"""A commit's log line names this many of its tables (the most rows first), and counts the others."""


def _commit_sentence(report: StreamCommit, observation: CommitObservation) -> str:
    """The INFO line of one commit: what it wrote where, up to where, and how far behind its tables are."""
    written = {t: n for t, n in report.rows.items() if n}
    if not written:
        return (f"batch {report.seq} read {report.events_read} binlog events, none of them new changes of the "
                f"captured tables, and moved the checkpoint to {report.offset}")
    named = sorted(written, key=lambda t: (-written[t], t))
    tables = ", ".join(f"{t} {written[t]}" for t in named[:_TABLES_NAMED])
    more = f" and {len(named) - _TABLES_NAMED} more" if len(named) > _TABLES_NAMED else ""
    sentence = (f"batch {report.seq} wrote {sum(written.values())} changelog rows of {len(written)} "
                f"{'table' if len(written) == 1 else 'tables'} ({tables}{more}) from {report.events_read} binlog "
                f"events up to {report.offset}")
    if observation.lag_seconds is not None:
        sentence += f"; lag {observation.lag_seconds:.1f} s"
    behind = observation.furthest_behind
    if behind is not None and len(written) > 1:
        sentence += f", the table furthest behind is {behind[0]} at {behind[1]:.1f} s"
    return sentence


class StreamRunner:
    """Runs the stream of ``options`` against one server; ``open`` first, then ``run``.

    ``observer`` is told of each committed batch, each MERGE and each idle heartbeat (for metrics);
    by default nobody is. ``on_margin`` gets each check of the position's binlog retention (for the
    ``binlog_margin_seconds`` metric)."""

    def __init__(self, options: StreamOptions, config: ConnectionConfig,
                 observer: StreamObserver | None = None,
                 on_margin: Callable[[PositionMargin], None] | None = None) -> None:
        self.options = options
        self.config = config
        self.observer: StreamObserver = observer or NoStreamObserver()
        # changelog rows per table committed since the last MERGE, and whether any since the last
        # CaughtUp: what the observer is told of merges and of idleness
        self._wrote_since_caught_up = False
        self.lease = StreamLease(options.lake, options.writer, options.lease_seconds)
        self.store = StreamStore(options.lake, fence=self.lease.check)
        self.server_id = config.server_id.stream_id
        self.upkeep = TableUpkeep(options.lake)
        self._stop_at: BinlogOffset | None = None
        self._matched: list[TableId] | None = None  # the pattern's tables on the server, listed once per start
        self.schema_check = SchemaSelfCheck(options.schema_check_seconds)
        self.retention = RetentionWatch(config.replication_settings(), options.binlog_margin_seconds, on_margin,
                                        lake=options.lake)

    def open(self, control: Any) -> Checkpoint:
        """The checkpoint to continue from: the lake's, brought in line with ``tables``, or a first one."""
        # the split's checks on every start, whatever the startup mode: a stream that starts on its own (no
        # snapshot) or runs after the settings changed must not read a binlog it cannot keep exactly; SELECT on
        # each captured database, so that a table the CDC user cannot see is never taken for one dropped
        self._matched = None
        check_source(control, databases=self._databases(control))
        self.lease.acquire()  # before anything is written or discarded
        with self.lease.released_on_failure():  # a failed start lets the next try in at once
            return self._open(control)

    def _open(self, control: Any) -> Checkpoint:
        checkpoint = self.store.read_checkpoint()
        kept = checkpoint.offset if checkpoint is not None else None
        lost: BinlogPositionLostError | None = None
        if checkpoint is not None:  # before anything in the lake is touched
            try:
                checkpoint.offset = self._kept_position(control, checkpoint.offset)
            except BinlogPositionLostError as error:
                if self.options.on_position_lost is PositionLostBehavior.FAIL:
                    raise
                lost = error
        if checkpoint is not None and self.lease.left_clean_at == checkpoint.seq:
            _log.debug("the last writer left the lake clean at batch %d: no changelog to scan", checkpoint.seq)
        elif checkpoint is not None and (stale := self.store.remove_uncommitted(checkpoint)):
            _log.info("removed %d changelog rows of an interrupted run past batch %d", stale, checkpoint.seq)
        if checkpoint is not None and lost is not None:
            self._recover(control, checkpoint, lost)
        if checkpoint is None:
            checkpoint = self._first_checkpoint(control)
            checkpoint.offset = self._anchor(control, checkpoint)
            _log.info("stream starts at %s (startup_mode %s)", checkpoint.offset, self.options.startup_mode.value)
        else:
            anchored = self._anchor(control, checkpoint)
            moved, checkpoint.offset = anchored != checkpoint.offset, anchored
            notes = reconcile_tables(checkpoint, self._wanted(control, checkpoint), self._snapshot_start,
                                     lambda table: load_table_schema(control, table))
            self._refuse_kept_columns(checkpoint)
            if not notes and not moved and checkpoint.offset == kept:
                return checkpoint
            for note in notes:
                _log.warning("%s", note)
        self.store.commit(checkpoint, {})
        return checkpoint

    def _refuse_kept_columns(self, checkpoint: Checkpoint) -> None:
        """A lake that 'ignore' kept columns of is not the source's replica: only 'ignore' may go on with it."""
        behavior = self.options.schema_change_behavior
        if checkpoint.kept and behavior is not SchemaChangeBehavior.IGNORE:
            tables = sorted(map(str, checkpoint.kept))
            raise InvalidOptionError(
                f"schema_change_behavior is {behavior.value!r}, but the lake of {tables} keeps the columns it had "
                f"before DDL an earlier run passed over under 'ignore', so it cannot follow the source's columns "
                f"from here. Set schema_change_behavior back to 'ignore', or take these tables anew (run the stream "
                f"once without them in tables, delete their folders <db>/<table> in the lake, add them back)")

    def _anchor(self, control: Any, checkpoint: Checkpoint) -> BinlogOffset:
        """The checkpoint's offset on the server the connection reaches now (``startup.anchor``): with
        its GTIDs, and found again by them after a failover. Snapshot high watermarks that the stream
        has not passed yet are file positions of the old server without GTIDs: a failover then is
        refused, not guessed."""
        offset = anchor(control, ServerInfo.read(control), self.config, self.server_id, checkpoint.offset)
        moved = (offset.file, offset.position) != (checkpoint.offset.file, checkpoint.offset.position)
        if moved and checkpoint.chunks:
            raise ServerChangedError(
                f"the mysql_cdc connection reaches another server than the stream's checkpoint came from, and the "
                f"stream has not yet passed the snapshot's high watermarks of {sorted(map(str, checkpoint.chunks))} "
                f"(positions on the old server): re-snapshot those tables on this server."
            )
        return offset

    def _kept_position(self, control: Any, offset: BinlogOffset) -> BinlogOffset:
        """The checkpoint's offset, unless this same server purged its binlog file (on another server the file
        means nothing, and ``anchor`` finds the point by GTIDs). Purged with no transaction after it (an idle
        stream whose server rotated its files): the same point in the binlog it still has, found by the
        checkpoint's GTIDs (``reanchor``). Purged past transactions: ``BinlogPositionLostError``. Checked
        before the GTID anchor, which would take the missing file for another server's."""
        files, _ = read_binlog_files(control)
        server = ServerInfo.read(control)
        if offset.file in {f.name for f in files} or offset.server not in (None, server_identity(control, server)):
            return offset
        if offset.gtid:
            try:
                found = replace(reanchor(control, server, self.config, self.server_id, offset), server=offset.server)
            except ServerChangedError:
                pass  # transactions in between are gone
            else:
                _log.info("the binlog file of the checkpoint %s was purged, with no transaction after the checkpoint: "
                          "the stream continues from the same point, %s:%d", offset, found.file, found.position)
                return found
        oldest = f"{files[0].name}:4" if files else "none"
        raise BinlogPositionLostError(
            f"the stream's checkpoint {offset} is in binlog file {offset.file}, which the server has purged: it is "
            f"no longer on the server, whose oldest binlog starts at {oldest}, so the changes between them are lost "
            f"to the stream (it was stopped, paused or behind for longer than the server keeps its binlog). Nothing "
            f"was written: the lake at {self.options.base_uri} holds the tables as of the checkpoint, readable as "
            f"they are. Ways back: set the stream's on_position_lost to 'archive' with binlog_archive_uri naming "
            f"archived copies of the server's binlog files that reach from {offset.file} to {oldest} (no re-read, "
            f"the changelog complete); or to 'resnapshot': every captured table read again from the server, its "
            f"changelog marking the lost range with a !G record; or take the tables anew by hand: delete the lake "
            f"(everything under {self.options.base_uri}, its _stream folder with the checkpoint included) and run "
            f"the DAG again. Then keep binlogs longer than the stream may stay stopped (binlog_expire_logs_seconds, "
            f"expire_logs_days) and alert on the mysql_cdc.stream.binlog_margin_seconds metric (docs/production.md)",
            str(offset), oldest,
        )

    def _recover(self, control: Any, checkpoint: Checkpoint, lost: BinlogPositionLostError) -> None:
        """Bring a checkpoint whose binlog the server purged to a point the server has, as ``on_position_lost``
        says, committing what that takes (the lease is held): the lost range read from the archive, or every
        captured table read again past it."""
        _log.warning("%s. on_position_lost is %r: recovering", lost.lost_range, self.options.on_position_lost.value)
        if self.options.on_position_lost is PositionLostBehavior.ARCHIVE:
            self._from_archive(control, checkpoint, lost)
        else:
            resnapshot_lost_range(self.options.lake, self.store, self.config, self.server_id, control, checkpoint,
                                  lost)

    def _from_archive(self, control: Any, checkpoint: Checkpoint, lost: BinlogPositionLostError) -> None:
        """The lost range read from the archived binlog files (``archive_catch_up``), each batch committed as
        the stream's are, then the checkpoint handed over to the server."""
        archive = ArchiveCatchUp(self.options, self.config, self.server_id, lost)
        checkpoint.offset = archive.start(control, checkpoint)
        archive.read(self._batches(control, checkpoint, follow=False, events=archive.files.open), self._account,
                     checkpoint)
        checkpoint.offset = archive.hand_over(control, checkpoint.offset, partial(self._kept_position, control))

    def run(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress, may_wait: bool) -> str | None:
        """Commit batches until a stop condition holds (returns it), or, with ``may_wait``, until idle for
        ``defer_after_idle_seconds`` (returns None: time to wait elsewhere). One binlog connection follows
        the server meanwhile, with server heartbeats while it is idle. The current-state tables are
        merged every ``merge_interval_seconds`` (counted across deferrals: a deferral does not merge before
        it is due, and the wait elsewhere ends when it is, ``wait_until``) and before a stop: a MERGE round
        costs each table written since the last, so merging at every deferral of a stream over hundreds
        of tables took most of its time."""
        with self.lease.released_on_failure():  # a failed stream lets the next try in at once
            return self._run(control, checkpoint, progress, may_wait)

    def _run(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress, may_wait: bool) -> str | None:
        merger = StateMerger(self.options.lake, control)
        batches = self._batches(control, checkpoint, follow=True)
        lease_checked = time.monotonic()
        try:
            for item in batches:
                if time.time() >= progress.merge_due_at(self.options.merge_interval_seconds):
                    self._merge(merger, checkpoint, progress)
                if isinstance(item, StreamCommit):
                    self._account(item, progress)  # its commit checked the lease
                    lease_checked = time.monotonic()
                else:
                    self._caught_up(control, checkpoint, progress)
                    if time.monotonic() - lease_checked >= self.options.poll_interval:
                        self.lease.check()  # renews the lease while idle
                        lease_checked = time.monotonic()
                self.retention.check(control, checkpoint.offset)
                stopped = self.stop_reason(progress, checkpoint.offset, caught_up=isinstance(item, CaughtUp))
                if stopped:
                    self._merge(merger, checkpoint, progress)  # current state readers see all
                    _log.info("%s", self.summary(progress, checkpoint, stopped).describe())
                    # clean: whenever stream_batches yields, nothing is being written (its _Committer)
                    self.lease.release(clean_seq=checkpoint.seq)
                    return stopped
                idle = time.time() - progress.idle_since
                if isinstance(item, CaughtUp) and may_wait and idle >= self.options.defer_after_idle_seconds:
                    return None  # merged when due: the wait elsewhere ends by then
        finally:
            batches.close()  # the binlog connection
        raise SourceConfigError("the binlog connection ended while following the server; the task's retry "
                                "continues from the checkpoint")

    def catch_up(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress) -> None:
        """Commit batches until the stream has caught up with the server, then return."""
        with self.lease.released_on_failure():
            for item in self._batches(control, checkpoint, follow=False):
                if isinstance(item, StreamCommit):
                    self._account(item, progress)
                else:
                    self._caught_up(control, checkpoint, progress)
                self.retention.check(control, checkpoint.offset)

    def _batches(
        self, control: Any, checkpoint: Checkpoint, follow: bool,
        events: Callable[[str, int], EventStream] | None = None,
    ) -> Generator[StreamCommit | CaughtUp, None, None]:
        """The batches from the checkpoint: the server's binlog, or with ``events`` other binlog files."""
        if events is None:
            check_offset_available(control, checkpoint.offset)
        reload = partial(load_table_schema, control)
        merger = StateMerger(self.options.lake, control)
        schema_changes = SchemaChanges(self.options.schema_change_behavior, self.options.lake, self.config,
                                       lambda at: self._merge(merger, at), reload, self.options.selection(),
                                       lambda: resnapshot_server_id(self.config, "mysql_cdc_conn_id"))
        return stream_batches(self.config, self.server_id, self.store, checkpoint, control, reload,
                              self.options.limits, follow=self.options.poll_interval if follow else None,
                              schema_changes=schema_changes, events=events)

    def _account(self, report: StreamCommit, progress: StreamProgress) -> None:
        self.upkeep.changelogs_committed(TableId.parse(t) for t, rows in report.rows.items() if rows)
        written = sum(report.rows.values())
        progress.batches += 1
        progress.rows += written
        now = time.time()
        if written:
            progress.idle_since = now
        # the report's last change time carries over from an earlier batch when this one wrote nothing
        lag_seconds = max(0.0, now - report.last_ts_ms / 1000) if written and report.last_ts_ms else None
        table_lags = {t: max(0.0, now - ts / 1000) for t, ts in report.table_ts_ms.items()
                      if ts and report.rows.get(t)}
        observation = CommitObservation(report.seq, dict(report.rows), report.events_read, lag_seconds, table_lags)
        _log.info("%s", _commit_sentence(report, observation))
        self._wrote_since_caught_up = self._wrote_since_caught_up or bool(written)
        self.observer.committed(observation)

    def _caught_up(self, control: Any, checkpoint: Checkpoint, progress: StreamProgress) -> None:
        """A ``CaughtUp``: the lag is 0 only if nothing was written since the previous one. A busy server
        also yields ``CaughtUp`` right after a batch cut for latency, and that batch's lag stands. Idle,
        the stream checks its tables' columns against the server's (fails on a difference)."""
        if not self._wrote_since_caught_up:
            self.observer.caught_up()
        self._wrote_since_caught_up = False
        self.schema_check.at_idle(control, checkpoint, progress.idle_since)

    def _merge(self, merger: StateMerger, checkpoint: Checkpoint, progress: StreamProgress | None = None) -> None:
        """Merge the tables with changes since the last MERGE; the checkpoint is written again when it
        merged through a later batch, so that the next run opens none of them again (the stream calls
        this between its commits, when the checkpoint is what the lake holds). ``progress`` notes when."""
        if progress is not None:
            progress.merged_at = time.time()
        started, before = time.monotonic(), checkpoint.merged_seq
        merged = merger.merge(checkpoint)
        if checkpoint.merged_seq != before:
            self.store.commit(checkpoint, {})
        seconds = time.monotonic() - started
        self.upkeep.current_committed(merged)
        if merged:
            self.observer.merged(MergeObservation(seconds, {str(t): rows for t, rows in merged.items()}))

    def stop_reason(self, progress: StreamProgress, offset: BinlogOffset, caught_up: bool = True) -> str | None:
        """Why the stream should stop now, if it should; idleness counts only once caught up (a backlog
        of other tables' events is not idleness)."""
        options, now = self.options, time.time()
        if options.stop_at_offset:
            if self._stop_at is None:  # parsed once, in the flavour of the stream's offsets
                self._stop_at = parse_file_position(options.stop_at_offset, "stop_at_offset", offset.flavor)
            if not offset < self._stop_at:
                return f"reached {options.stop_at_offset}"
        if options.max_duration_seconds is not None and now - progress.started >= options.max_duration_seconds:
            return f"ran {options.max_duration_seconds:g} s"
        idle = options.stop_after_idle_seconds
        if caught_up and idle is not None and now - progress.idle_since >= idle:
            return f"idle for {idle:g} s"
        return None

    def wait_until(self, progress: StreamProgress, checkpoint: Checkpoint) -> float:
        """When a wait elsewhere must end at the latest, so that the stop conditions are checked in
        time; the lease is held until then, and says the lake is left clean at ``checkpoint`` (call this
        after ``run`` returned, with the checkpoint it committed last: ``run`` returns only where
        ``stream_batches`` yielded, and nothing is being written then)."""
        deadlines = [time.time() + DEFAULT_WAKE_SECONDS, progress.merge_due_at(self.options.merge_interval_seconds)]
        if self.options.stop_after_idle_seconds is not None:
            deadlines.append(progress.idle_since + self.options.stop_after_idle_seconds)
        if self.options.max_duration_seconds is not None:
            deadlines.append(progress.started + self.options.max_duration_seconds)
        wake_at = min(deadlines)
        self.lease.check(until=wake_at + self.options.lease_seconds, clean_seq=checkpoint.seq)
        return wake_at

    @staticmethod
    def summary(progress: StreamProgress, checkpoint: Checkpoint, stopped: str) -> StreamSummary:
        return StreamSummary(progress, stopped, str(checkpoint.offset), checkpoint.seq)

    def _first_checkpoint(self, control: Any) -> Checkpoint:
        options = self.options
        if options.startup_mode is StartupMode.INITIAL:
            starts = self._snapshot_starts(self._wanted(control, None))
            offsets = [hw for s in starts.values() if s is not None and (hw := s.lowest_high_watermark) is not None]
            if not offsets:
                raise InvalidOptionError(f"none of the tables {options.selection().describe()} has a snapshot in "
                                         f"{options.base_uri} yet: run the split and snapshot tasks first")
            return Checkpoint(0, min(offsets), {t: s.schema for t, s in starts.items() if s is not None},
                              {t: s.chunks for t, s in starts.items() if s is not None})
        server = ServerInfo.read(control)
        offset = start_offset(options.startup_mode, control, server, self.config, self.server_id,
                              options.startup_offset, options.startup_timestamp)
        tables = self._wanted(control, None)
        schemas = load_table_schemas(control, tables)  # two queries for all of them
        # a table the server lacks: load_table_schema names it in its error
        return Checkpoint(0, offset, {t: schemas[t] if t in schemas else load_table_schema(control, t) for t in tables})

    def _wanted(self, control: Any, checkpoint: Checkpoint | None) -> list[TableId]:
        """The tables to capture from now on: those named, or those the patterns match on the server. In
        'initial' mode a matched table that has no snapshot and that the stream does not capture yet (made
        after this run's split) is left to the next run's split, with a warning: one made while the stream
        runs is captured by the stream itself (``engine.stream.schema_changes``)."""
        selection = self.options.selection()
        if not selection.by_pattern:
            return [t for t in selection.tables if selection.matches(t)]
        found = self._matching(control)
        if checkpoint is not None:  # gone from the server since (dropped, renamed): its DDL in the binlog ends it
            found += sorted(t for t in checkpoint.schemas if t not in set(found) and selection.matches(t))
        if self.options.startup_mode is not StartupMode.INITIAL:
            return found
        known = {*checkpoint.schemas, *checkpoint.stopped} if checkpoint is not None else set()
        plans = SnapshotStore(self.options.lake).read_plans([t for t in found if t not in known])
        later = [t for t, plan in plans.items() if plan is None]
        if later:
            _log.warning("%s match %s but have no snapshot yet (made after this run's split): the next run's split "
                         "and snapshot take them, then the stream", sorted(map(str, later)), selection.describe())
        return [t for t in found if t not in later]

    def _databases(self, control: Any) -> list[str]:
        """The databases of the captured tables: those named, or those of the tables the patterns match."""
        selection = self.options.selection()
        tables = self._matching(control) if selection.by_pattern else selection.tables
        return sorted({t.database for t in tables})

    def _matching(self, control: Any) -> list[TableId]:
        """The tables the patterns match on the server: listed once per start (the source check and the
        capture both need them)."""
        if self._matched is None:
            self._matched = find_tables(control, self.options.selection())
        return list(self._matched)

    def _snapshot_start(self, table: TableId) -> TableStart | None:
        """The table's finished snapshot as a capture start; required in ``initial`` mode, unused otherwise."""
        return self._snapshot_starts([table])[table]

    def _snapshot_starts(self, tables: list[TableId]) -> dict[TableId, TableStart | None]:
        """``_snapshot_start`` of each table, their plans and manifests read at once (on an object store)."""
        if self.options.startup_mode is not StartupMode.INITIAL:
            return dict.fromkeys(tables)
        snapshots = SnapshotStore(self.options.lake)
        plans = snapshots.read_plans(tables)
        unfinished = [t for t, plan in plans.items() if plan is None]
        found = [(t, plan) for t, plan in plans.items() if plan is not None]
        starts: dict[TableId, TableStart | None] = {}
        for (table, plan), manifests in zip(found, snapshots.manifests_of([p for _, p in found]), strict=True):
            committed = [m for m in manifests if m is not None]
            if len(committed) < len(manifests):
                unfinished.append(table)
                continue
            chunks = [FinishedChunkInfo.of(r.chunk, r.high_watermark) for m in committed for r in m.chunks]
            # the columns in effect where the stream starts for the table; it follows later changes itself
            starts[table] = TableStart(batch_read_with(committed, plan, latest=False), chunks)
        if unfinished:
            raise InvalidOptionError(
                f"startup_mode 'initial' needs the finished snapshot of {', '.join(sorted(map(str, unfinished)))} in "
                f"{self.options.base_uri}; run the snapshot tasks first (or choose another startup_mode)"
            )
        return {t: starts[t] for t in tables}
