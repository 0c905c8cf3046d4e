"""When the idle stream compares its tables' schemas with the server's (``cdc.schema_check``), and
the error it fails with on a difference.

The comparison costs two information_schema queries and a few binlog-status reads, so it runs at
idle moments only (the stream has nothing to write then), at most once per idle period (the time
since the stream last wrote a row) and at most every ``schema_check_seconds``. The first idle moment
of a runner checks at once: a table changed behind the stream's back while no stream ran is the
likeliest case. A round in which the binlog has moved is not a check: it is tried again at the next
idle moment, so a busy source delays the check but never stops it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.schema_check import SchemaDifference, check_source_schemas
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceSchemaDivergedError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint

_log = logging.getLogger(__name__)

# how long to wait before confirming a difference: a DDL takes effect an instant before the server
# writes it to the binlog, and a difference seen in that instant is gone (or explained) after it
CONFIRM_AFTER_SECONDS = 1.0


class SchemaSelfCheck:
    """The stream runner's self-check (docs/design/invariants.md, invariant 6); ``at_idle`` at each ``CaughtUp``."""

    def __init__(self, interval_seconds: float, confirm_after_seconds: float = CONFIRM_AFTER_SECONDS) -> None:
        self._interval = interval_seconds
        self._confirm_after = confirm_after_seconds
        self._server: ServerInfo | None = None
        self._checked_at: float | None = None  # time.monotonic() of the last check that ran
        self._checked_idle_since: float | None = None  # the idle period it ran in

    def at_idle(self, control: Any, checkpoint: Checkpoint, idle_since: float) -> None:
        """Check if due: the stream is idle since ``idle_since`` (``StreamProgress.idle_since``) and has
        committed ``checkpoint``. Raises ``SourceSchemaDivergedError`` on a confirmed difference."""
        now = time.monotonic()
        if idle_since == self._checked_idle_since or (
            self._checked_at is not None and now - self._checked_at < self._interval
        ):
            return
        differences = self._differences(control, checkpoint)
        if differences:
            time.sleep(self._confirm_after)
            differences = self._differences(control, checkpoint)
        if differences is None:
            _log.debug("schema self-check put off: the binlog has moved past %s", checkpoint.offset)
            return
        self._checked_at, self._checked_idle_since = now, idle_since
        if differences:
            raise SourceSchemaDivergedError(_message(differences, checkpoint))
        _log.debug("schema self-check: the %d captured tables match information_schema at %s",
                   len(checkpoint.schemas), checkpoint.offset)

    def _differences(self, control: Any, checkpoint: Checkpoint) -> list[SchemaDifference] | None:
        if self._server is None:
            self._server = ServerInfo.read(control)
        return check_source_schemas(control, self._server, checkpoint.offset, checkpoint.schemas)


def _message(differences: list[SchemaDifference], checkpoint: Checkpoint) -> str:
    tables = ", ".join(str(d.table) for d in differences)
    return (
        f"the source's schema of {tables} differs from the stream's, although the stream has read the whole "
        f"binlog (checkpoint at {checkpoint.offset}): a change that never reached the binlog (a DDL run with "
        f"sql_log_bin=0, a table replaced, dropped or restored behind the server's binlog), which the stream "
        f"cannot follow; it stops rather than decode rows with the wrong columns. "
        + "; ".join(map(str, differences))
        + f". Undo the change on the server, or take {tables} anew: run the stream once without it in "
        f"tables, delete its folder <db>/<table> in the lake, and add it back (it is snapshotted again; the docs' "
        f"'The binlog stream', 'Changing tables between runs'); then clear the stream task."
    )
