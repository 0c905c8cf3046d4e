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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.retention import FileStarts, PositionMargin, read_position_margin

_log = logging.getLogger(__name__)

CHECK_SECONDS = 30.0
WARN_EVERY_SECONDS = 600.0


class RetentionWatch:
    """The margin of the stream's position, checked at most every ``CHECK_SECONDS`` of ``clock``;
    ``report`` gets every check (the metric), ``margin_seconds`` (None: never) decides the warning."""

    def __init__(self, settings: Mapping[str, Any], margin_seconds: float | None,
                 report: Callable[[PositionMargin], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._starts = FileStarts(settings)
        self.margin_seconds = margin_seconds
        self._report = report
        self._clock = clock
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
            _log.warning("could not read the binlog retention of the stream's position %s", offset, exc_info=True)
            return self.last
        self.last = margin
        if self._report is not None:
            self._report(margin)
        limit = self.margin_seconds
        if limit is not None and margin.below(limit) and (
                self._warned is None or now - self._warned >= WARN_EVERY_SECONDS):
            self._warned = now
            _log.warning("the stream's position may be lost soon: %s, less than binlog_margin_seconds = %g. %s",
                         margin.describe(), limit, margin.advice())
        return margin
