"""What the stream runner tells an observer, for metrics: its commits, lag, merges.

The engine stays free of Airflow (Spark executors and lean workers import it), so it only states
facts through this protocol; the operator passes an implementation backed by Airflow's ``Stats``
(``operators.stream_metrics``). The default observer does nothing, so the runner's other callers
(tests, benchmarks, the crash-test worker) need not care.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class CommitObservation:
    """One stream commit (``StreamCommit``). ``lag_seconds`` is now minus the commit time of its last
    change (never below 0; commit times have second resolution, so it reads up to a second high), None
    when it wrote no change (it only moved the checkpoint past other traffic)."""

    seq: int
    rows: Mapping[str, int]
    """Changelog rows written per table (``db.table``); an UPDATE writes two (before and after)."""
    events_read: int
    """Row changes read from the binlog for this commit, including those the snapshot's emit filter skipped."""
    lag_seconds: float | None
    table_lag_seconds: Mapping[str, float] = field(default_factory=dict)
    """Per table written, now minus the commit time of its last change in this commit: a table whose changes
    came early in a long batch is further behind than ``lag_seconds`` says."""

    @property
    def furthest_behind(self) -> tuple[str, float] | None:
        """The table with the largest lag of this commit, and that lag (None when it wrote no change)."""
        if not self.table_lag_seconds:
            return None
        table = max(self.table_lag_seconds, key=lambda t: self.table_lag_seconds[t])
        return table, self.table_lag_seconds[table]


@dataclass(frozen=True)
class MergeObservation:
    """One MERGE of the changelogs into the current-state tables."""

    seconds: float
    rows: Mapping[str, int]
    """Per merged table, the changelog rows merged: those committed since the previous merge, and those
    an interrupted earlier run left unmerged."""


class StreamObserver(Protocol):
    """Receives the stream's facts as they happen; must be cheap and must not raise."""

    def committed(self, commit: CommitObservation) -> None: ...

    def caught_up(self) -> None:
        """The stream is caught up and wrote nothing for a heartbeat period or more: its lag is 0."""

    def merged(self, merge: MergeObservation) -> None: ...


class NoStreamObserver:
    """The default: observes nothing."""

    def committed(self, commit: CommitObservation) -> None:
        pass

    def caught_up(self) -> None:
        pass

    def merged(self, merge: MergeObservation) -> None:
        pass
