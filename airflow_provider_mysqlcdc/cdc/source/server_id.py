"""Server ids for binlog connections, taken from a configured range like Flink CDC's ``server-id``.

A binlog reader registers with the server as a replica under a server id. Two readers with the same
id make the server drop the older one, and an id that clashes with a real replica breaks that
replica, so every concurrent reader takes its own id from a range the user reserves for CDC.

Who takes which id of the range (``len(range)`` ids, indexes ``0 .. len - 1``):

- the stream takes the last id (index ``len - 1``);
- the split task of a DAG run gives each snapshot job it returns (a mapped task: a pack of batches of
  one or many tables) its own run of consecutive indexes from 0 upward (:func:`assign_snapshot_readers`):
  as many as the job's Spark application runs tasks at once (``readers_per_batch``, at most one per
  chunk). Spark task ``i`` of the job reads with index ``first_reader + i`` (:func:`snapshot_server_id`).

So every binlog reader of one DAG run has its own id by construction, whatever runs in parallel, the
number of ids follows the jobs, not the tables, and the split fails before any work when the range has
fewer ids than that takes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

DEFAULT_SERVER_ID_RANGE = "5400-5408"
STREAM_READERS = 1  # the stream's one binlog reader, on the range's last id
_MAX = 2**32 - 1
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class ServerIdRange:
    start: int
    end: int

    @classmethod
    def parse(cls, text: str | int) -> ServerIdRange:
        match = _RANGE.match(str(text))
        if not match:
            raise InvalidOptionError(f"server_id must be a number or a range like '5400-5408', not {text!r}")
        start = int(match.group(1))
        end = int(match.group(2) or start)
        if not 1 <= start <= end <= _MAX:
            raise InvalidOptionError(
                f"server_id range {text!r} must lie within 1..{_MAX} with start <= end (e.g. '5400-5408')"
            )
        return cls(start, end)

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"

    def __len__(self) -> int:
        return self.end - self.start + 1

    @property
    def stream_id(self) -> int:
        """The stream's id (the last): its runner reads with it, and its trigger while it waits."""
        return self.end

    def allocate(self, index: int) -> int:
        """The id of the ``index``-th concurrent reader (0-based)."""
        if not 0 <= index < len(self):
            raise InvalidOptionError(
                f"reader {index + 1} needs a server id but the server_id range {self} has only {len(self)}: "
                f"widen the connection's server_id extra (e.g. '{self.start}-{self.start + index + 8}') "
                f"or run fewer binlog readers at once"
            )
        return self.start + index


def explain_server_id_clash(message: str, server_id: int, configured: ServerIdRange) -> SourceConfigError | None:
    """A clear error for the server's "same server_uuid/server_id" refusal, else None.

    MySQL reports it as error 1236 ("... has connected to the master/source"); MariaDB 10.11 as
    error 4052 ("... is already connected"), sent to the *older* reader when a newer one registers
    with its id.
    """
    lowered = message.lower()
    if "same server_uuid" in lowered or "same server_id" in lowered or "same server-id" in lowered:
        return SourceConfigError(
            f"server id {server_id} (from the server_id range {configured}) is also used by another replica or "
            f"CDC reader of this server, and the server keeps only one of them: give each pipeline its own range "
            f"in the connection's server_id extra, one that no replica or other CDC tool uses"
        )
    return None


def assign_snapshot_readers(
    ids: ServerIdRange, reader_counts: Sequence[int], readers_per_batch: int, connection: str | None = None
) -> list[int]:
    """The first reader index of each snapshot job of a DAG run, in the order given.

    ``reader_counts[i]`` is how many binlog readers job ``i`` runs at once (its Spark tasks:
    ``readers_per_batch``, fewer for a job with fewer chunks). Job ``i`` takes the indexes
    ``first[i] .. first[i] + reader_counts[i] - 1``: no two jobs share one, and none is the
    stream's (the last). Raises InvalidOptionError, naming the connection's ``server_id`` extra and a
    range that fits, when the range has fewer ids than these readers and the stream need.
    """
    firsts, taken = [], 0
    for count in reader_counts:
        if count < 1:
            raise InvalidOptionError(f"a snapshot job runs at least one reader (readers_per_batch >= 1), not {count}")
        firsts.append(taken)
        taken += count
    needed = taken + STREAM_READERS
    if needed > len(ids):
        start = min(ids.start, _MAX - needed + 1)
        extra = f"the server_id extra of the connection{f' {connection!r}' if connection else ''}"
        plural = "s" if len(reader_counts) != 1 else ""
        raise InvalidOptionError(
            f"{extra} gives {len(ids)} server id{'s' if len(ids) != 1 else ''} ({ids}), but this DAG run can have "
            f"{needed} binlog readers at once, each needing its own id: {taken} for its {len(reader_counts)} "
            f"snapshot job{plural} (up to readers_per_batch={readers_per_batch} Spark tasks each, at most one per "
            f"chunk) + {STREAM_READERS} for the stream. Set a range of at least {needed} ids that no replica or "
            f"other CDC tool uses in the connection's extra, e.g. \"server_id\": \"{start}-{start + needed - 1}\", "
            f"or lower readers_per_batch"
        )
    return firsts


def snapshot_server_id(ids: ServerIdRange, first_reader: int, readers: int, index: int) -> int:
    """The server id of Spark task ``index`` of a snapshot job given ``first_reader`` and ``readers``
    by :func:`assign_snapshot_readers`; refuses ids outside the job's own or the stream's id."""
    if not 0 <= index < readers:
        raise InvalidOptionError(
            f"snapshot task {index} of a job with {readers} binlog reader(s): a snapshot job runs at most "
            f"readers_per_batch tasks (set on the split task)"
        )
    if first_reader < 0 or first_reader + readers > len(ids) - STREAM_READERS:
        raise InvalidOptionError(
            f"this snapshot job was given server id indexes {first_reader}-{first_reader + readers - 1} of the "
            f"connection's server_id range, which is now {ids} ({len(ids)} ids, the last one the stream's): the "
            f"server_id extra changed after the split task planned this run; clear the split task of this run "
            f"with its downstream tasks so that it assigns the ids again"
        )
    return ids.allocate(first_reader + index)
