"""Server ids for binlog connections, taken from a configured range like Flink CDC's ``server-id``.

A binlog reader registers with the server as a replica under a server id. Two readers with the same
id make the server drop the older one, and an id that clashes with a real replica breaks that
replica, so every concurrent reader takes its own id from a range the user reserves for CDC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

DEFAULT_SERVER_ID_RANGE = "5400-5408"
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
