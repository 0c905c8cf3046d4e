"""An append committed by a Delta log entry of our own, not through delta-rs's transaction.

Why: delta-rs 1.6 replays a table's log from its last checkpoint at every commit and at every refresh of a
loaded table, so a commit costs more the more entries follow the checkpoint (``bench.long_stream_commits``: 17.5
ms a table's commit and upkeep with a checkpoint every 100 commits, 10.9 ms every 20). A stream batch pays it
for every table it touches (``bench.stream_changelogs_bench``, 1,000 changelogs of 3 rows: 4.45 ms a table
through delta-rs, 2.55 ms by our entries). An append needs none of that replay: its log entry is three actions
(``commitInfo``, ``txn``, ``add``), and what orders writers is the log's put-if-absent of the entry's name.

What keeps it exact (the Delta protocol's rules for a blind append):

* the entry goes at the version after the newest one the handle knows, created only if that name is absent (a
  hard link, which fails on an existing name: delta-rs commits to a filesystem the same way). A writer that
  lost the race reads the log again and tries the next version, since appends never conflict with each other,
  unless the entry of the same stream batch is there already (the transaction version: a commit that landed and
  then failed) or another writer changed the schema;
* only tables whose protocol asks nothing of an append beyond its file and statistics take this path: writer
  version 2 or lower, or table features among ``APPENDABLE_FEATURES``; the others go through delta-rs;
* a checkpoint every ``delta.checkpointInterval`` versions and the expired log entries removed after it, as
  delta-rs's post-commit hook does;
* only on a local filesystem (``supports``): an object store's put-if-absent (S3's conditional PUT) is not in
  pyarrow's filesystems, so there delta-rs commits, with its conditional PUT.

The same entries set a table's properties (``properties_entry``: a ``metaData`` action, the protocol left as it
is), where delta-rs's ``set_table_properties`` would add table features to it.

A handle kept for appends need not load the table with delta-rs at all (``read_state``): what an append needs of
the log (its newest version, protocol, configuration, schema and application transactions) is in the newest
checkpoint's three columns and the entries after it, read here without the table's file list that delta-rs builds
as it loads. A stream opening a whole database's lake reads every changelog's transaction version: reopening a
lake of 300 changelogs took 0.21 s against 0.49 s (``bench.many_tables --stream-only``). Only logs of a protocol
our entries can append to are read so; any other log (a checkpoint in parts or of version 2, a gap in the
entries) raises ``LogNotReadable``, and delta-rs loads the table.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.lake.documents import storage

if TYPE_CHECKING:
    import pyarrow.fs as pafs

ENGINE = "airflow-provider-mysqlcdc"
"""``commitInfo.engineInfo`` of our entries."""
APPENDABLE_FEATURES = frozenset({"timestampNtz", "appendOnly", "invariants", "variantType"})
"""Writer features that ask nothing of an append of a file with the table's own columns and types, but for a
table with a column invariant or a variant column (``plain_schema``). delta-rs names all four when it sets a
property of a table of writer version 7 (our upkeep did before it wrote properties itself; other
writers may)."""
_SCHEMA_DEMANDS = ('"delta.invariants"', '"type":"variant"')
"""What in a table's schema JSON asks a writer to check or encode values: a column invariant, a variant."""
DEFAULT_CHECKPOINT_INTERVAL = 100
"""``delta.checkpointInterval`` when the table does not set it (the Delta protocol's default)."""
_ENTRY = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(\.parquet|\..+)")  # group 2: a single file, or parts / version 2
_INFO = b'{"commitInfo":'
_SKIPPED = (b'{"add":', b'{"remove":', _INFO, b'{"cdc":')
"""Lines of an entry that say nothing of its state (``read_state``); any other line is parsed."""
_STATE_COLUMNS = ("protocol", "metaData", "txn")
_TEMPORARY_SUFFIX = ".json.tmp"
_TEMPORARY = re.compile(r"_commit_[0-9a-f-]{36}\.json\.tmp")
"""``put_if_absent``'s temporary files (Delta readers ignore names starting with an underscore)."""
STALE_TEMPORARY_SECONDS = 3600.0
"""The age past which a temporary of ``put_if_absent`` is a killed writer's leftover (``remove_stale_temporaries``)."""


class LogNotReadable(Exception):
    """A log ``read_state`` leaves to delta-rs: the message says why."""


@dataclass
class LogState:
    """What an append by our own entry needs of a table's log, read without delta-rs (``read_state``) and
    moved on by our own entries (``appended``)."""

    version: int
    min_writer_version: int
    writer_features: list[str] | None
    metadata: dict[str, Any]
    """The newest ``metaData`` action, as JSON has it (a checkpoint's maps made objects)."""
    transactions: dict[str, int]

    @property
    def configuration(self) -> Mapping[str, str]:
        configuration: Mapping[str, str] = self.metadata.get("configuration") or {}
        return configuration

    @property
    def schema_json(self) -> str:
        return str(self.metadata["schemaString"])

    def appended(self, version: int, app_id: str | None, app_version: int) -> None:
        """Our own entry of ``version`` landed, with the application's transaction version if any."""
        self.version = version
        if app_id is not None:
            self.transactions[app_id] = app_version


def supports(fs: pafs.FileSystem) -> bool:
    """Whether our entries can be written to ``fs`` with put-if-absent: a local filesystem."""
    return storage.is_local(fs)


def appendable(min_writer_version: int, writer_features: list[str] | None) -> bool:
    """Whether a table of this protocol takes an append by our own log entry (of a ``plain_schema``): it asks
    nothing beyond ``APPENDABLE_FEATURES`` (writer version 2 is invariants and appendOnly)."""
    return min_writer_version <= 2 or (min_writer_version == 7 and set(writer_features or ()) <= APPENDABLE_FEATURES)


@functools.lru_cache(maxsize=1024)
def plain_schema(schema_json: str) -> bool:
    """Whether no column of a table of this schema (Delta's JSON) has an invariant to check or is a variant: the
    rows of another table may then be appended as a file of our own (delta-rs's ``write_deltalake`` checks them)."""
    compact = schema_json.replace(" ", "")
    return not any(demand in compact for demand in _SCHEMA_DEMANDS)


def checkpoint_due(version: int, configuration: Mapping[str, str | None]) -> bool:
    """Whether the commit of ``version`` is one after which a checkpoint is written."""
    interval = int(configuration.get("delta.checkpointInterval") or DEFAULT_CHECKPOINT_INTERVAL)
    return version > 0 and version % interval == 0


def log_path(folder: str, version: int) -> str:
    """The log entry of ``version`` of the table in ``folder``."""
    return f"{folder}/_delta_log/{version:020d}.json"


def protocol(timestamp_ntz: bool) -> dict[str, Any]:
    """The protocol of a new table: the oldest one, or the ``timestampNtz`` feature's where a column is a
    timestamp without time zone (as delta-rs creates it)."""
    if not timestamp_ntz:
        return {"minReaderVersion": 1, "minWriterVersion": 2}
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
            "writerFeatures": ["timestampNtz"]}


def read_state(folder: str) -> LogState | None:
    """The log state of the table in ``folder`` (a local path), or None if it has no log: the newest single-file
    checkpoint's protocol, metadata and transactions, then every entry after it in order. ``LogNotReadable``
    for a log read only by delta-rs (module docstring); a table whose protocol our entries cannot append to is
    one of them, so a state read here always belongs to a table ``appendable`` accepts."""
    log = f"{folder}/_delta_log"
    listed = _listing(log)
    if listed is None:
        return None
    entries, checkpoints = listed
    newest = max(entries | set(checkpoints))
    base = max(checkpoints, default=-1)
    if base >= 0 and not checkpoints[base]:
        raise LogNotReadable(f"the checkpoint of version {base} in {log} is in parts or of version 2")
    missing = sorted(set(range(base + 1, newest + 1)) - entries)
    if missing:
        raise LogNotReadable(f"{log} lacks the entry of version {missing[0]}")
    try:
        actions = _checkpoint_actions(f"{log}/{base:020d}.checkpoint.parquet") if base >= 0 else []
        for version in range(base + 1, newest + 1):
            with open(log_path(folder, version), "rb") as entry_file:
                actions += [json.loads(line) for line in entry_file if line.strip() and not line.startswith(_SKIPPED)]
    except FileNotFoundError as error:  # removed meanwhile by a log cleanup after a newer checkpoint
        raise LogNotReadable(f"an entry or the checkpoint of {log} went away while it was read") from error
    return _state(newest, actions, log)


def _listing(log: str) -> tuple[set[int], dict[int, bool]] | None:
    """The versions of the log's entries and of its checkpoints (whether each is one Parquet file, else in parts
    or of version 2), or None for a log without either (no table: no folder, or one whose first entry is not
    written yet)."""
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    entries: set[int] = set()
    checkpoints: dict[int, bool] = {}
    for name in names:
        if entry := _ENTRY.fullmatch(name):
            entries.add(int(entry.group(1)))
        elif checkpoint := _CHECKPOINT.fullmatch(name):
            version = int(checkpoint.group(1))
            checkpoints[version] = checkpoints.get(version, True) and checkpoint.group(2) == ".parquet"
    return (entries, checkpoints) if entries or checkpoints else None


def commit_infos(folder: str, limit: int | None = None) -> list[tuple[int, dict[str, Any]]] | None:
    """The ``commitInfo`` of each of the newest ``limit`` entries (None: all) of the log of the table in ``folder``
    (a local path), newest first, with its version ({} for an entry without one): the commit history delta-rs's
    ``history`` gives, without loading the table. Entries a log cleanup removed are not in it, there or here.
    None when there is no log (no table)."""
    log = f"{folder}/_delta_log"
    listed = _listing(log)
    if listed is None:
        return None
    versions = sorted(listed[0], reverse=True)
    infos: list[tuple[int, dict[str, Any]]] = []
    for version in versions if limit is None else versions[:limit]:
        try:
            with open(log_path(folder, version), "rb") as entry_file:
                infos.append((version, _commit_info_of(entry_file)))
        except FileNotFoundError:  # removed by a log cleanup since the listing: so are all older ones
            break
    return infos


def commit_info(fs: pafs.FileSystem, folder: str, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` of the log entry of ``version`` ({} for an entry without one), None when the log does not
    hold it (no such version yet, or a log cleanup removed it): one read of one small file, on any filesystem (an
    object store included), where ``history`` reads every entry newer than it, and delta-rs loads the table first."""
    try:
        with fs.open_input_stream(log_path(folder, version)) as stream:
            entry = stream.read()
    except FileNotFoundError:
        return None
    return _commit_info_of(entry.splitlines())


def _commit_info_of(lines: Iterable[bytes]) -> dict[str, Any]:
    for line in lines:
        if line.startswith(_INFO):
            info: dict[str, Any] = json.loads(line)["commitInfo"]
            return info
        if line.strip() and not line.startswith(_SKIPPED):  # another writer's spacing, or another action
            action = json.loads(line)
            if "commitInfo" in action:
                return dict(action["commitInfo"])
    return {}


def _checkpoint_actions(path: str) -> list[dict[str, Any]]:
    """The protocol, metadata and transaction actions of a single-file checkpoint."""
    import pyarrow.parquet as pq  # only here: most tables are read before their first checkpoint

    file = pq.ParquetFile(path)
    columns = [c for c in _STATE_COLUMNS if c in file.schema_arrow.names]
    table = file.read(columns=columns)
    actions: list[dict[str, Any]] = []
    for column in columns:
        for value in table.column(column).to_pylist():
            if value is not None:
                if column == "metaData":  # Parquet's maps come as (key, value) pairs, JSON's as objects
                    format_ = value.get("format") or {"provider": "parquet"}
                    value = {**value, "configuration": dict(value.get("configuration") or []),
                             "format": {**format_, "options": dict(format_.get("options") or [])}}
                actions.append({column: value})
    return actions


def _state(version: int, actions: list[dict[str, Any]], log: str) -> LogState:
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    transactions: dict[str, int] = {}
    for action in actions:
        if "protocol" in action:
            protocol = action["protocol"]
        elif "metaData" in action:
            metadata = action["metaData"]
        elif "txn" in action:
            transactions[action["txn"]["appId"]] = int(action["txn"]["version"])
    if protocol is None or metadata is None:
        raise LogNotReadable(f"{log} has no protocol or no metadata up to version {version}")
    state = LogState(version, int(protocol["minWriterVersion"]), protocol.get("writerFeatures"), metadata,
                     transactions)
    if not appendable(state.min_writer_version, state.writer_features):
        raise LogNotReadable(f"the protocol of {log} asks more of a writer than an append of ours")
    if "delta.setTransactionRetentionDuration" in state.configuration:
        raise LogNotReadable(f"{log} expires application transactions")
    return state


@dataclass(frozen=True)
class NewTable:
    """What the entry that makes a table (version 0) says of it besides its first file."""

    schema_json: str
    """Its Delta schema."""
    timestamp_ntz: bool
    """Whether a column is a timestamp without time zone (``protocol``)."""
    configuration: Mapping[str, str]
    """Its table properties."""
    partition_columns: tuple[str, ...] = ()


def append_entry(adds: Sequence[Any], app_id: str | None, app_version: int, metadata: Mapping[str, str],
                 create: NewTable | None = None) -> bytes:
    """The log entry of one append: its commit info (``metadata`` as its own keys, as delta-rs writes a commit's
    custom metadata), the application's transaction version if any, and ``adds`` (delta-rs ``AddAction``s).
    ``create``: the entry makes the table (version 0): its protocol and metadata come first."""
    now = _now()
    info = _commit_info(now, "WRITE", {"mode": "Append"}, metadata)
    return _entry(_table_actions(now, info, adds, create, app_id, app_version))


def create_entry(adds: Sequence[Any], app_id: str | None, app_version: int, metadata: Mapping[str, str],
                 create: NewTable) -> bytes:
    """The entry of version 0 that makes a table with ``adds`` as its files (a snapshot batch's first commit), as
    delta-rs's ``CREATE TABLE`` writes it: not an append in the table's history."""
    now = _now()
    info = _commit_info(now, "CREATE TABLE", {"mode": "ErrorIfExists"}, metadata)
    return _entry(_table_actions(now, info, adds, create, app_id, app_version))


def _table_actions(now: int, info: dict[str, Any], adds: Sequence[Any], create: NewTable | None, app_id: str | None,
                   app_version: int) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = [info]
    if create is not None:
        actions += [{"protocol": protocol(create.timestamp_ntz)},
                    {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                  "schemaString": create.schema_json,
                                  "partitionColumns": list(create.partition_columns),
                                  "configuration": dict(create.configuration), "createdTime": now}}]
    if app_id is not None:
        actions.append({"txn": {"appId": app_id, "version": app_version, "lastUpdated": now}})
    actions += [{"add": {"path": add.path, "partitionValues": dict(add.partition_values), "size": add.size,
                         "modificationTime": add.modification_time, "dataChange": add.data_change,
                         "stats": add.stats}} for add in adds]
    return actions


def properties_entry(state: LogState, properties: Mapping[str, str]) -> bytes:
    """The log entry that sets ``properties`` on the table of ``state`` (its newest metadata), the protocol
    left as it is: delta-rs 1.6's ``set_table_properties`` adds the ``variantType`` reader feature to a table of
    writer version 7 (any with a DATETIME column), which Delta readers without variants refuse (delta-spark
    before 4.0). Only for properties that need no table feature (the maintenance policy's)."""
    configuration = {**state.configuration, **properties}
    info = _commit_info(_now(), "SET TBLPROPERTIES", {"properties": json.dumps(dict(properties))}, {})
    return _entry([info, {"metaData": {**state.metadata, "configuration": configuration}}])


def _now() -> int:
    return int(time.time() * 1000)


def _commit_info(now: int, operation: str, parameters: Mapping[str, str], metadata: Mapping[str, str]
                 ) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": now, "operation": operation, "operationParameters": dict(parameters),
                           "engineInfo": ENGINE, "clientVersion": ENGINE, **metadata}}


def _entry(actions: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def remove_stale_temporaries(folder: str, older_than_seconds: float = STALE_TEMPORARY_SECONDS) -> int:
    """Delete the temporaries of ``put_if_absent`` in the log of the table in ``folder`` (a local path) that are
    older than ``older_than_seconds``: a writer killed between writing one and linking it left it. A live writer
    holds one for the time of a link. Returns how many were deleted."""
    deadline = time.time() - older_than_seconds
    removed = 0
    try:
        entries = list(os.scandir(f"{folder}/_delta_log"))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if _TEMPORARY.fullmatch(entry.name):
            try:
                if entry.stat().st_mtime < deadline:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:  # its writer linked and removed it meanwhile
                pass
    return removed


def put_if_absent(path: str, data: bytes) -> bool:
    """``data`` as the file ``path`` if no file has that name, whole or not at all; False if one has it.

    Written under a temporary name in the same folder, then hard-linked to ``path`` (``link`` fails on an
    existing name, where a rename would replace it): a reader never sees a partial entry."""
    folder = os.path.dirname(path)
    temporary = os.path.join(folder, f"_commit_{uuid.uuid4()}{_TEMPORARY_SUFFIX}")
    with open(temporary, "wb") as out:
        out.write(data)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)
    return True
