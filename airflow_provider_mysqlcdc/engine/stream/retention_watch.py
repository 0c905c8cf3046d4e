"""The stream's binlog position against the server's retention, watched while it runs.

The split checks the retention once, before a snapshot; a stream that falls behind (a slow lake, a
backlog after a pause) or whose server's retention was shortened loses its position silently until
the server purges the file and the next start fails (``BinlogPositionLostError``). So at every commit
and idle wake the runner asks this watch how long the checkpoint's binlog file has left
(``cdc.source.retention.position_margin``, the computation the split and the Test button use too).
The server's figures are read at most every ``CHECK_SECONDS``: three short queries, 0.55 ms all told
on a local MariaDB (measured over 100 rounds), and ~30 ms once per binlog file for when it started
(a short binlog dump, kept); the stream commits about every second, and a margin worth warning about
is hours, so a check every 30 s costs nothing and misses nothing. Each check is reported (the
operator sends it as the ``binlog_margin_seconds`` metric); below ``binlog_margin_seconds`` a WARNING
says when the position may be lost and what to do, at most every ``WARN_EVERY_SECONDS``. A failed
check is logged and skipped: the watch never stops the stream.

Each check is also written to the lake (``lake.documents.binlog_margin``, one small document replaced
whole), with ``binlog_margin_seconds``: the MySQL CDC page reads only the lake, and shows it beside the
lag with its age. A stream that failed or is paused checks nothing, but its DAG's split task still runs
each run: it looks at the checkpoint's margin from outside with the same watch (``check_checkpoint``),
warns with the same sentence (``PositionMargin.warning``) against the threshold the stream recorded,
and records what it found.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, server_identity
from airflow_provider_mysqlcdc.cdc.source.retention import FileStarts, PositionMargin, read_position_margin
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.lake.documents.binlog_margin import MarginCheck, read_margin_check, write_margin_check
from airflow_provider_mysqlcdc.lake.handle import Lake

_log = logging.getLogger(__name__)

CHECK_SECONDS = 30.0
WARN_EVERY_SECONDS = 600.0


class RetentionWatch:
    """The margin of the stream's position, checked at most every ``CHECK_SECONDS`` of ``clock``;
    ``report`` gets every check (the metric), ``margin_seconds`` (None: never) decides the warning, and
    ``lake`` (None: none) keeps each check as ``checked_by`` made it; ``log`` says the warnings."""

    def __init__(self, settings: Mapping[str, Any], margin_seconds: float | None,
                 report: Callable[[PositionMargin], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, lake: Lake | None = None,
                 checked_by: str = "stream", log: logging.Logger | Any = _log) -> None:
        self._starts = FileStarts(settings)
        self.margin_seconds = margin_seconds
        self._report = report
        self._clock = clock
        self._lake, self._checked_by, self._log = lake, checked_by, log
        self._checked: float | None = None
        self._warned: float | None = None
        self.last: PositionMargin | None = None

    def check(self, control: Any, offset: BinlogOffset) -> PositionMargin | None:
        """The margin of ``offset`` as of the last check (made now when one is due)."""
        now = self._clock()
        if self._checked is not None and now - self._checked < CHECK_SECONDS:
            return self.last
        self._checked = now
        try:
            margin = read_position_margin(control, self._starts, offset.file, offset.position)
        except Exception:  # a side channel: the stream's own reads fail loudly enough if the server is gone
            self._log.warning("could not read the binlog retention of the stream's position %s", offset,
                              exc_info=True)
            return self.last
        self.last = margin
        if self._report is not None:
            self._report(margin)
        self._record(margin)
        warning = margin.warning(self.margin_seconds)
        if warning is not None and (self._warned is None or now - self._warned >= WARN_EVERY_SECONDS):
            self._warned = now
            self._log.warning("%s", warning)
        return margin

    def _record(self, margin: PositionMargin) -> None:
        """The check into the lake, for the page; a failed write is logged, never raised."""
        if self._lake is None:
            return
        try:
            write_margin_check(self._lake, MarginCheck.of(margin, self._checked_by, self.margin_seconds, time.time()))
        except Exception:
            self._log.warning("could not write the binlog margin check to the lake at %s", self._lake.root,
                              exc_info=True)


def check_checkpoint(control: Any, settings: Mapping[str, Any], lake: Lake, offset: BinlogOffset,
                     log: logging.Logger | Any = _log) -> None:
    """The split task's look at the margin of the stream's checkpoint ``offset``, from outside the stream:
    one check of the watch, against the ``binlog_margin_seconds`` the stream recorded in the lake last (its
    default before any check), logged, warned about and recorded. Nothing is measured when the checkpoint
    is of another server than ``control`` reaches (a failover: the stream finds its position there by its
    GTIDs); a failed check is logged."""
    if offset.server is not None and offset.server != server_identity(control, ServerInfo.read(control)):
        log.info("the stream's checkpoint %s is of another server (%s): its binlog margin is measured once the "
                 "stream has found its position on this one", offset, offset.server)
        return
    try:
        last = read_margin_check(lake)
    except Exception:  # a damaged check must not stop the split: the next check replaces it
        log.warning("could not read the last binlog margin check of the lake at %s", lake.root, exc_info=True)
        last = None
    threshold = last.warn_below_seconds if last is not None else StreamOptions.binlog_margin_seconds
    margin = RetentionWatch(settings, threshold, lake=lake, checked_by="split", log=log).check(control, offset)
    if margin is not None:
        log.info("binlog margin of the stream's checkpoint: %s", margin.describe())
