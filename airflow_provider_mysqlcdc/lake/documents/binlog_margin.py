"""The last check of the stream checkpoint's binlog margin, kept in the lake for those who read only the lake.

The stream measures how long the binlog file of its checkpoint has left on the server
(``cdc.source.retention.position_margin``) at most every 30 s while it runs, and the split task once per
run from outside it (``engine.stream.retention_watch``). The MySQL CDC page reads only the lake, so each
check is also written here, ``_stream/binlog_margin.json``: one small document replaced whole (one
upload on an object store, at most one every 30 s), holding when it was measured and by whom, the
position, the seconds left (None: nothing purges the binlog), what limits them, the binlog bytes the
server wrote after the position, and the stream's ``binlog_margin_seconds`` (the page's warning, the
split's threshold). A stream that is down writes no more checks: the page shows the figure's age.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_provider_mysqlcdc.cdc.source.retention import MarginLimit, PositionMargin
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.handle import Lake

MARGIN_FORMAT = DocumentFormat("binlog margin", version=1, oldest=1)
"""1: the first."""


@dataclass(frozen=True)
class MarginCheck:
    """One check of the checkpoint's binlog margin, as the lake keeps it."""

    measured_at: str
    """When it was measured (ISO 8601, UTC, the checker's clock)."""
    checked_by: str
    """``stream`` (its watch while it runs) or ``split`` (the split task, from outside the stream)."""
    file: str
    position: int
    seconds: float | None
    """How long the file had left at ``measured_at``; None when the server purges no binlog."""
    limited_by: MarginLimit
    behind_bytes: int
    warn_below_seconds: float | None
    """The stream's ``binlog_margin_seconds`` (None: it never warns)."""
    FORMAT: ClassVar[DocumentFormat] = MARGIN_FORMAT

    @classmethod
    def of(cls, margin: PositionMargin, checked_by: str, warn_below_seconds: float | None,
           measured_at: float) -> MarginCheck:
        """``margin`` as measured at ``measured_at`` (epoch seconds)."""
        at = dt.datetime.fromtimestamp(measured_at, dt.UTC).isoformat(timespec="seconds")
        return cls(at, checked_by, margin.file, margin.position, margin.seconds, margin.limited_by,
                   margin.behind_bytes, warn_below_seconds)

    @property
    def below(self) -> bool:
        """Whether the margin was below the stream's threshold, or the file gone, when measured."""
        if self.limited_by is MarginLimit.PURGED:
            return True
        return self.seconds is not None and self.warn_below_seconds is not None and (
            self.seconds < self.warn_below_seconds)

    def to_dict(self) -> dict[str, Any]:
        return self.FORMAT.write({
            "measured_at": self.measured_at, "checked_by": self.checked_by, "file": self.file,
            "position": self.position, "seconds": self.seconds, "limited_by": self.limited_by.value,
            "behind_bytes": self.behind_bytes, "warn_below_seconds": self.warn_below_seconds,
        })

    @classmethod
    def from_dict(cls, document: Any, path: str = "") -> MarginCheck:
        d = cls.FORMAT.read(document, path)
        return cls(d["measured_at"], d["checked_by"], d["file"], d["position"], d["seconds"],
                   MarginLimit(d["limited_by"]), d["behind_bytes"], d["warn_below_seconds"])


def write_margin_check(lake: Lake, check: MarginCheck) -> None:
    """Replace the lake's last margin check with ``check``."""
    lake.write_json(lake.binlog_margin, check.to_dict())


def read_margin_check(lake: Lake) -> MarginCheck | None:
    """The lake's last margin check, or None when nothing has checked yet."""
    document = lake.read_json(lake.binlog_margin)
    return MarginCheck.from_dict(document, lake.binlog_margin) if document is not None else None
