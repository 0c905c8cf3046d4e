"""Errors a user can act on. Each message names what is wrong and what to set or grant.

Every error the provider raises on purpose is a ``MySqlCdcError``, so a DAG or a test can catch
them all at once, or one kind by its class. Plain Python: ``cdc/`` and the Spark job import it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class MySqlCdcError(Exception):
    """Base class for every error this provider raises on purpose."""


class SourceConfigError(MySqlCdcError):
    """The MySQL/MariaDB server is not set up for CDC (binlog settings, version, privileges), or
    cannot be reached with the ``mysql_cdc`` connection, or no longer has the binlog we need."""


class BinlogRetentionError(SourceConfigError):
    """The snapshot would likely outlast the server's binlog retention: the binlog the stream starts
    from would be purged before the stream reads it (the split task's ``retention_check``)."""


class BinlogPositionLostError(SourceConfigError):
    """The server purged the binlog file of the stream's checkpoint (the stream was stopped, paused or behind
    for longer than the server keeps its binlog): the changes since then are no longer on the server. The
    stream stops before writing anything; the lake keeps what it had. The ways back: the stream's
    ``on_position_lost`` ('resnapshot', or 'archive' with archived binlog files), or the tables taken anew by
    hand (delete the lake and run the DAG again); then keep binlogs longer than the stream may be stopped.
    ``checkpoint`` is the lost offset, ``oldest`` where the server's binlog starts now (empty in an error
    rebuilt from its message alone: ``error_from_event``, a Spark job's error file)."""

    def __init__(self, message: str, checkpoint: str = "", oldest: str = "") -> None:
        super().__init__(message)
        self.checkpoint, self.oldest = checkpoint, oldest

    @property
    def lost_range(self) -> str:
        return (f"the binlog from the stream's checkpoint {self.checkpoint} to the server's oldest binlog "
                f"{self.oldest} is purged")


class IncompleteChangeError(SourceConfigError):
    """A change of a captured table that the binlog does not hold as whole row images: a statement logged as
    text (a session with ``binlog_format`` STATEMENT or MIXED, statement-based LOAD DATA) or a row image
    that lacks columns (a session with ``binlog_row_image`` MINIMAL or NOBLOB). The reader stops before it:
    nothing past it is committed. Keep ROW and FULL in every session, then take the table anew."""


class ServerChangedError(SourceConfigError):
    """The checkpoint's binlog position belongs to another server than the connection now reaches
    (a failover, an edited connection), and the stream cannot find the same point on this one: its
    offset has no GTIDs, or this server lacks transactions the lake already has. Enable GTIDs
    (MySQL ``gtid_mode=ON``; MariaDB has them) and fail over to a replica that has caught up, or
    re-snapshot the tables."""


class TableNotSupportedError(MySqlCdcError):
    """A captured table cannot be snapshotted as configured (e.g. no primary key and no chunk key)."""


class InvalidOptionError(MySqlCdcError, ValueError):
    """An option value given by the user is malformed or out of range."""


class SchemaChangeError(MySqlCdcError):
    """A captured table changed in a way the binlog reader cannot follow at this offset."""


class SourceSchemaDivergedError(SchemaChangeError):
    """The idle stream's self-check found a captured table whose columns in
    information_schema differ from those the stream's checkpoint holds, although the stream has read
    the whole binlog: a change the binlog never showed (a DDL run with ``sql_log_bin=0``, a table
    replaced or dropped that way). Continuing would decode rows with the wrong columns."""


class RowDecodeError(MySqlCdcError):
    """A binlog rows event could not be decoded with its table map (a bug to report, not a setting)."""


class NoSuchTableError(MySqlCdcError, ValueError):
    """The lake holds no committed rows of the table asked for (not snapshotted or streamed yet)."""


class SnapshotStateError(MySqlCdcError):
    """The snapshot's saved state (plan, chunk batches, manifests with their high watermarks) is
    missing, incomplete or inconsistent for the step asked, e.g. written by another version."""


class LakeLeaseError(MySqlCdcError):
    """Another stream holds the lake's lease (one writer per lake), or this one lost it to another."""


class LakeFormatError(MySqlCdcError):
    """A document or table of the lake cannot be read as it stands: damaged, of a shape this version of
    the provider does not read, or a Delta table with features it cannot keep."""


class TableCommitConflictError(MySqlCdcError):
    """A commit to a table of the lake lost a race with another writer's commit to the same table; the
    caller retries it or puts it off."""


class NewerLakeFormatError(LakeFormatError):
    """A document of the lake (plan, batch manifest, stream checkpoint, lease, verification report) was
    written by a newer version of the provider, in a ``format_version`` this one does not know."""


class RetiredLakeFormatError(LakeFormatError):
    """A document of the lake is of a format from before the first release whose data lies elsewhere
    (not a matter of the document alone), which no released version reads: the lake must be written anew."""


class SnapshotJobError(MySqlCdcError):
    """A Spark snapshot job ended without committing its batch to the lake."""


class AsOfError(MySqlCdcError, ValueError):
    """A read as of a source position the lake does not cover (before the table's snapshot finished,
    past the stream's checkpoint) or cannot place (a GTID position not resolved on the server)."""


class VerifyError(MySqlCdcError):
    """A verification of the replica against the source could not run or finish (no snapshot plan,
    batch reports missing from the lake)."""


class ReplicaMismatchError(VerifyError):
    """Verification found chunks where the replica differs from the source (keys missing, extra or
    different); the report in the lake names them."""


# -- errors that cross a process boundary (the triggerer reports, the task raises) ------------------


def error_event(exc: BaseException) -> dict[str, str]:
    """What a trigger event carries about a failure, for :func:`error_from_event` in the task."""
    kind = type(exc)
    name = kind.__name__ if kind.__module__ in (__name__, "builtins") else f"{kind.__module__}.{kind.__qualname__}"
    return {"error_type": name, "error": str(exc)}


def error_from_event(event: Mapping[str, Any]) -> MySqlCdcError:
    """The exception to raise for an ``error_event`` payload: ours again by its class name; any
    other error (a dropped connection, a missing Airflow connection) as a SourceConfigError that
    names it."""
    name, message = str(event.get("error_type", "")), str(event.get("error", "unknown error"))
    kind = globals().get(name)
    if isinstance(kind, type) and issubclass(kind, MySqlCdcError):
        return kind(message)
    return SourceConfigError(
        f"waiting for the binlog failed ({name or 'unknown error'}): {message}; check the mysql_cdc "
        f"connection and that the server is up, then clear the task (it continues from its checkpoint)"
    )
