"""One stream writer per lake: a lease with a fencing token, checked at every commit.

Two streams writing one lake (two runs of a DAG at once, two DAGs with the same ``base_uri``) would
each commit change batches under the same sequence numbers and overwrite each other's checkpoint:
changes lost or doubled. So the stream takes ``_stream/lease.json`` before its first commit:

- The lease names its **holder** (a stable name: the DAG, run and task, so a retry or a resumed
  deferral of the same task is the same holder), a **token** that grows by one each time another
  holder takes the lease over, and an **expiry**. The holder renews it at every commit and before a
  deferral (until the wait's end), so a healthy stream never loses it.
- Another holder gets a clear error while the lease is valid. Once it has expired (the writer died
  and nothing renewed it), the next writer takes it over with the next token.
- **Fencing:** every commit first re-reads the lease; a writer that stalled past its expiry and
  was taken over finds another holder or token there and fails without writing its checkpoint, so
  its batch never becomes visible (files it wrote past the checkpoint are discarded by the next
  writer's start).

The lease is a small JSON document written like the checkpoint (whole, moved into place), not a
compare-and-swap: two writers starting within the same instant can both believe they won, and the
re-read right after writing (and at every commit) makes all but the last writer fail.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_provider_mysqlcdc.exceptions import LakeLeaseError
from airflow_provider_mysqlcdc.lake.documents import DocumentFormat
from airflow_provider_mysqlcdc.lake.handle import Lake


def _lease_0_to_1(d: dict[str, Any]) -> dict[str, Any]:
    """The lease before it was versioned (849b27a to ccb345b, never released) had the same fields."""
    return d


LEASE_FORMAT = DocumentFormat("stream lease", version=1, oldest=0, upgrades={0: _lease_0_to_1}, unversioned=0)
"""0 (no ``format_version``): holder, token, expiry, never released; 1: the same, versioned."""


@dataclass(frozen=True)
class Lease:
    """``_stream/lease.json``: who may write the lake's stream, with which fencing token, until when."""

    holder: str
    token: int
    expires_at: float
    FORMAT: ClassVar[DocumentFormat] = LEASE_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return self.FORMAT.write({"holder": self.holder, "token": self.token, "expires_at": self.expires_at})

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "") -> Lease:
        d = cls.FORMAT.read(document, path)
        return cls(d["holder"], d["token"], d["expires_at"])

    def valid(self, now: float) -> bool:
        return now < self.expires_at

    def describe(self) -> str:
        until = dt.datetime.fromtimestamp(self.expires_at, dt.UTC).isoformat(timespec="seconds")
        return f"{self.holder!r} (token {self.token}, valid until {until})"


class StreamLease:
    """The lease of the stream writing the lake at ``lake``, held as ``holder`` for ``seconds`` at a time."""

    def __init__(self, lake: Lake, holder: str, seconds: float) -> None:
        self.lake, self.holder, self.seconds = lake, holder, seconds
        self.path = lake.lease
        self.token: int | None = None

    def _read(self) -> Lease | None:
        document = self.lake.read_json(self.path)
        return Lease.from_dict(document, self.path) if document is not None else None

    def _write(self, token: int, until: float) -> None:
        self.lake.write_json(self.path, Lease(self.holder, token, until).to_dict())

    def acquire(self) -> None:
        """Take the lease (or keep it, for the same holder); fail while another holder's is valid."""
        current, now = self._read(), time.time()
        if current is not None and current.holder != self.holder and current.valid(now):
            raise LakeLeaseError(
                f"the stream of the lake at {self.lake.root} is held by {current.describe()}: one stream writes "
                f"a lake at a time. Set max_active_runs=1 on the DAG and give every DAG its own base_uri; a "
                f"writer that died releases the lake when its lease expires"
            )
        token = current.token if current is not None and current.holder == self.holder else (
            (current.token if current is not None else 0) + 1)
        self._write(token, now + self.seconds)
        self.token = token
        self.check()  # another writer that wrote in the same instant wins or loses here

    def check(self, until: float | None = None) -> None:
        """Fail unless the lease is still ours; then renew it until ``until`` (default: ``seconds`` from now)."""
        current, now = self._read(), time.time()
        if self.token is None or current is None or (current.holder, current.token) != (self.holder, self.token):
            held = current.describe() if current is not None else "nobody"
            raise LakeLeaseError(
                f"the stream {self.holder!r} lost its lease on the lake at {self.lake.root} (now held by {held}): "
                f"another stream took over after this one stalled past its lease; this one stops without committing"
            )
        # renewing is a write: only when half the lease is gone, or to hold it through a wait
        if until is not None or current.expires_at - now < self.seconds / 2:
            self._write(self.token, max(until or 0.0, now + self.seconds))

    def release(self) -> None:
        """Let the next writer in at once (when the lease is still ours)."""
        current = self._read()
        if self.token is not None and current is not None and (current.holder, current.token) == (
                self.holder, self.token):
            self._write(self.token, 0.0)
