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

The lease also says whether its last holder **left the lake clean**: a holder that stops or defers
right after its checkpoint writes the checkpoint's sequence number as ``clean_seq`` when it releases or
renews the lease for the wait; every writer clears it in the same write that takes the lease, before
anything else can commit. A run killed between its Delta commits and its checkpoint cleared it when it
took the lease and never wrote it again, so the next writer finds none and scans every changelog for
rows past the checkpoint (``lake.write.stream_commit.StreamStore.remove_uncommitted``). With it, a resume
skips that scan: over a thousand tables it opened a thousand changelogs at every deferral's end, 1.2-2.7 s
on local disk (``bench.resume_bench``) and more on an object store. It costs no request of its own: taking
and renewing the lease read and write the document anyway.

A holder that **fails** releases the lease at once (``released_on_failure``), without ``clean_seq``: the
next try or the next run need not wait for the expiry (minutes: ``LakeLeaseError`` meanwhile), and it
still scans for what the failed one may have left past the checkpoint. A wait in the triggerer that
fails is released the same way by the task it hands the error to (``release_held``), keeping
``clean_seq``. Releasing keeps the token, so fencing is as before: the next holder takes the next token.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_provider_mysqlcdc.exceptions import LakeLeaseError
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.handle import Lake

_log = logging.getLogger(__name__)

def _lease_0_to_1(d: dict[str, Any]) -> dict[str, Any]:
    """The lease before it was versioned (849b27a to ccb345b, never released) had the same fields."""
    return d


def _lease_1_to_2(d: dict[str, Any]) -> dict[str, Any]:
    """Before ``clean_seq``, nothing said the last holder left the lake clean: the next writer scans."""
    return {**d, "clean_seq": None}


LEASE_FORMAT = DocumentFormat("stream lease", version=2, oldest=0, upgrades={0: _lease_0_to_1, 1: _lease_1_to_2},
                              unversioned=0)
"""0 (no ``format_version``): holder, token, expiry, never released; 1: the same, versioned; 2: and
``clean_seq``."""


@dataclass(frozen=True)
class Lease:
    """``_stream/lease.json``: who may write the lake's stream, with which fencing token, until when."""

    holder: str
    token: int
    expires_at: float
    clean_seq: int | None = None
    """The stream checkpoint's sequence number when the holder stopped or deferred with nothing committed
    past it; None from the moment a writer takes the lease (it may commit from then on)."""
    FORMAT: ClassVar[DocumentFormat] = LEASE_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return self.FORMAT.write({"holder": self.holder, "token": self.token, "expires_at": self.expires_at,
                                  "clean_seq": self.clean_seq})

    @classmethod
    def from_dict(cls, document: dict[str, Any], path: str = "") -> Lease:
        d = cls.FORMAT.read(document, path)
        return cls(d["holder"], d["token"], d["expires_at"], d["clean_seq"])

    def valid(self, now: float) -> bool:
        return now < self.expires_at

    def describe(self) -> str:
        until = dt.datetime.fromtimestamp(self.expires_at, dt.UTC).isoformat(timespec="seconds")
        return f"{self.holder!r} (token {self.token}, valid until {until})"


class StreamLease:
    """The lease of the stream writing the lake at ``lake``, held as ``holder`` for ``seconds`` at a time.

    ``clock`` tells the time in seconds since the epoch: the expiry is written for writers in other
    processes and on other machines, so it is the wall clock (a test gives a fake one)."""

    def __init__(self, lake: Lake, holder: str, seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.lake, self.holder, self.seconds, self.clock = lake, holder, seconds, clock
        self.path = lake.lease
        self.token: int | None = None
        self.left_clean_at: int | None = None
        """What ``acquire`` found: the checkpoint's sequence number the last holder left the lake clean at."""

    def _read(self) -> Lease | None:
        document = self.lake.read_json(self.path)
        return Lease.from_dict(document, self.path) if document is not None else None

    def _write(self, token: int, until: float, clean_seq: int | None = None) -> None:
        self.lake.write_json(self.path, Lease(self.holder, token, until, clean_seq).to_dict())

    def acquire(self) -> None:
        """Take the lease (or keep it, for the same holder); fail while another holder's is valid. Notes
        the lease's ``clean_seq`` in ``left_clean_at`` and clears it: from here on this holder may commit."""
        current, now = self._read(), self.clock()
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
        self.left_clean_at = current.clean_seq if current is not None else None
        self.check()  # another writer that wrote in the same instant wins or loses here

    def check(self, until: float | None = None, clean_seq: int | None = None) -> None:
        """Fail unless the lease is still ours; then renew it until ``until`` (default: ``seconds`` from now).
        ``clean_seq``: the holder leaves the lake clean at that checkpoint for a wait elsewhere (give it with
        ``until``, after the last commit before the wait)."""
        current, now = self._read(), self.clock()
        if self.token is None or current is None or (current.holder, current.token) != (self.holder, self.token):
            held = current.describe() if current is not None else "nobody"
            raise LakeLeaseError(
                f"the stream {self.holder!r} lost its lease on the lake at {self.lake.root} (now held by {held}): "
                f"another stream took over after this one stalled past its lease; this one stops without committing"
            )
        # renewing is a write: only when half the lease is gone, or to hold it through a wait
        if until is not None or current.expires_at - now < self.seconds / 2:
            self._write(self.token, max(until or 0.0, now + self.seconds), clean_seq)

    @contextmanager
    def released_on_failure(self) -> Iterator[None]:
        """Release the lease when the block raises (the error goes on); a release that fails too is logged,
        not raised over the error that matters."""
        try:
            yield
        except BaseException:
            try:
                self.release()
            except Exception:
                _log.warning("could not release the stream's lease on %s after its failure: it expires by "
                             "itself", self.lake.root, exc_info=True)
            raise

    def release_held(self) -> bool:
        """Release the lease if ``holder`` holds it, though this object did not take it: the task after its
        wait in the triggerer failed (the lease was renewed until the wait's end: a retry would meet
        ``LakeLeaseError`` until then). Token and ``clean_seq`` stay as they are: the holder wrote nothing
        since it renewed the lease for the wait. False when another holder or nobody holds it."""
        current = self._read()
        if current is None or current.holder != self.holder or not current.valid(self.clock()):
            return False
        self._write(current.token, 0.0, current.clean_seq)
        return True

    def release(self, clean_seq: int | None = None) -> None:
        """Let the next writer in at once (when the lease is still ours); ``clean_seq`` as in ``check``."""
        current = self._read()
        if self.token is not None and current is not None and (current.holder, current.token) == (
                self.holder, self.token):
            self._write(self.token, 0.0, clean_seq)
