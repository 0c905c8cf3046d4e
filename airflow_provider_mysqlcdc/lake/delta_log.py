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
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow.fs as pafs

ENGINE = "airflow-provider-mysqlcdc"
"""``commitInfo.engineInfo`` of our entries."""
APPENDABLE_FEATURES = frozenset({"timestampNtz", "appendOnly"})
"""Writer features that ask nothing of an append of a file with the table's own columns and types."""
DEFAULT_CHECKPOINT_INTERVAL = 100
"""``delta.checkpointInterval`` when the table does not set it (the Delta protocol's default)."""


def supports(fs: pafs.FileSystem) -> bool:
    """Whether our entries can be written to ``fs`` with put-if-absent: a local filesystem."""
    return bool(fs.type_name == "local")


def appendable(min_writer_version: int, writer_features: list[str] | None) -> bool:
    """Whether a table of this protocol takes an append by our own log entry."""
    return min_writer_version <= 2 or (min_writer_version == 7 and set(writer_features or ()) <= APPENDABLE_FEATURES)


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


def append_entry(add: Any, app_id: str | None, app_version: int, metadata: Mapping[str, str],
                 create: tuple[str, bool] | None = None) -> bytes:
    """The log entry of one append: its commit info (``metadata`` as its own keys, as delta-rs writes a commit's
    custom metadata), the application's transaction version if any, and ``add`` (a delta-rs ``AddAction``).
    ``create``: the entry makes the table (version 0), of this Delta schema JSON and whether a column is a
    timestamp without time zone: its protocol and metadata come first."""
    now = int(time.time() * 1000)
    info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"},
            "engineInfo": ENGINE, "clientVersion": ENGINE, **metadata}
    actions: list[dict[str, Any]] = [{"commitInfo": info}]
    if create is not None:
        schema_json, timestamp_ntz = create
        actions += [{"protocol": protocol(timestamp_ntz)},
                    {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                  "schemaString": schema_json, "partitionColumns": [], "configuration": {},
                                  "createdTime": now}}]
    if app_id is not None:
        actions.append({"txn": {"appId": app_id, "version": app_version, "lastUpdated": now}})
    actions.append({"add": {"path": add.path, "partitionValues": dict(add.partition_values), "size": add.size,
                            "modificationTime": add.modification_time, "dataChange": add.data_change,
                            "stats": add.stats}})
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def put_if_absent(path: str, data: bytes) -> bool:
    """``data`` as the file ``path`` if no file has that name, whole or not at all; False if one has it.

    Written under a temporary name in the same folder, then hard-linked to ``path`` (``link`` fails on an
    existing name, where a rename would replace it): a reader never sees a partial entry."""
    folder = os.path.dirname(path)
    temporary = os.path.join(folder, f"_commit_{uuid.uuid4()}.json.tmp")
    with open(temporary, "wb") as out:
        out.write(data)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)
    return True
