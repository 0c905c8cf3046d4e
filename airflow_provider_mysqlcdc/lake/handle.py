"""The lake handle: one object, made once from the base URI and the storage options, that names every
place of the lake and opens it with the same options.

Why one handle (the pyiceberg ``FileIO`` / delta-rs ``storage_options`` way): a lake on an object store
needs its credentials and endpoint at every Delta and pyarrow call, and a place rebuilt from strings in
many modules drifts (one of them forgets ``s3a://``, or the options). So nothing outside this module
builds a lake URI or maps a scheme: every module takes a ``Lake`` and asks it.

Layout under the base URI::

    _stream/checkpoint.json        the stream's checkpoint (``lake.write.stream_commit``)
    _stream/lease.json             the one stream writer's lease (``lake.write.lease``)
    _stream/schemas/<ref>.json     the table schemas the checkpoint names (``lake.documents.schema_documents``)
    _stream/binlog_margin.json     the last check of the checkpoint's binlog margin (``lake.documents.binlog_margin``)
    <db>/<table>/current/          the current-state Delta table (``LakeTable.current``)
    <db>/<table>/changelog/        the changelog Delta table (``LakeTable.changelog``)
    <db>/<table>/snapshot/         the snapshot's plan and batch manifests (``lake.documents.snapshot``)
    <db>/<table>/verify/           verification reports (``engine.verification.verify``)

Schemes: Spark writes ``s3a://`` (and ``s3n://``), pyarrow and delta-rs know the same buckets as
``s3://``; ``gcs://`` is ``gs://``. A new storage scheme is added here (``SCHEMES``, ``SCHEME_ALIASES``,
and ``_filesystem`` when pyarrow needs options of its own for it). Storage options are delta-rs's names
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, the names of the standard AWS variables); without options
delta-rs and pyarrow take the standard AWS variables and the rest of AWS's credential chain. The
options hold secrets: they are never part of a ``repr``.
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.documents import storage
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.maintenance import DEFAULT_POLICY

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable

SCHEMES = ("file", "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "abfs", "abfss")
"""The URI schemes of a lake (as pyarrow and Spark name them), aliases included; a local path has none."""
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
"""Schemes that name the same store as another one (Hadoop's names for S3, GCS's two names)."""
_NEW_TABLE_PROPERTIES = DEFAULT_POLICY.table_properties()
"""The table properties every replica table is made with: those the stream's upkeep keeps
(``lake.write.maintenance``)."""
CURRENT = "current"
CHANGELOG = "changelog"


def canonical_scheme(scheme: str) -> str:
    """The one name of a URI scheme (``s3a`` -> ``s3``), lower case."""
    scheme = scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


def canonical_uri(base_uri: str) -> str:
    """``base_uri`` as delta-rs and pyarrow take it: a plain path made absolute, a URI's scheme in its one name."""
    if "://" not in base_uri:
        return os.path.abspath(base_uri).rstrip("/") or "/"
    scheme, rest = base_uri.split("://", 1)
    return f"{canonical_scheme(scheme)}://{rest}".rstrip("/")


@dataclass(frozen=True)
class LakeTable:
    """The places of one replicated table: its two tables (``lake.format.table_format.ReplicaTable``, Delta Lake
    tables) and its documents' folders (paths of the lake's pyarrow filesystem)."""

    lake: Lake
    id: TableId

    @property
    def folder(self) -> str:
        """The table's folder as a URI: what a user deletes to snapshot the table again."""
        return f"{self.lake.uri}/{self.id.database}/{self.id.table}"

    @property
    def current(self) -> ReplicaTable:
        """The current state: one row per key, deletes applied, partitioned by snapshot batch."""
        return self._format(CURRENT)

    @property
    def changelog(self) -> ReplicaTable:
        """Every change the stream committed, append-only, with the metadata columns."""
        return self._format(CHANGELOG)

    def _format(self, name: str) -> ReplicaTable:
        """The table format of the replica tables (``lake.format.table_format``): the one place another format
        (Iceberg, say) would be chosen instead of Delta Lake, from the lake's options or the URI."""
        return DeltaLocation(f"{self.folder}/{name}", self.lake.storage_options, self.lake,
                             (self.id.database, self.id.table, name), _NEW_TABLE_PROPERTIES)

    def path(self, *parts: str) -> str:
        """A path of the lake's filesystem under the table's folder."""
        return self.lake.path(self.id.database, self.id.table, *parts)

    @property
    def current_dir(self) -> str:
        """The current-state Delta table's folder, as a path of the lake's filesystem."""
        return self.path(CURRENT)

    @property
    def snapshot_dir(self) -> str:
        return self.path("snapshot")

    @property
    def plan(self) -> str:
        return f"{self.snapshot_dir}/_plan.json"

    def batch_dir(self, number: int) -> str:
        return f"{self.snapshot_dir}/batch={number}"

    def manifest(self, number: int) -> str:
        return f"{self.batch_dir(number)}/_manifest.json"

    def verification_dir(self, run: str) -> str:
        """The folder of one verification run's reports (``run``: a file name already)."""
        return self.path("verify", run)


@dataclass(frozen=True)
class Lake:
    """The lake at ``base_uri`` (a local path, ``s3://``/``s3a://``, ``gs://``, ``hdfs://``...), reached with
    ``storage_options`` (delta-rs's names; empty: the standard AWS variables and credential chain).
    Cheap to make: the filesystem is opened on first use. Picklable (Spark tasks get it in their closure)."""

    base_uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)

    @classmethod
    def at(cls, base_uri: str, storage_options: Mapping[str, str] | None = None) -> Lake:
        return cls(base_uri, dict(storage_options or {}))

    @classmethod
    def of(cls, lake: Lake | str) -> Lake:
        """A public reader's argument: a handle, or a base URI reached through the standard AWS variables."""
        return lake if isinstance(lake, Lake) else cls.at(lake)

    @functools.cached_property
    def uri(self) -> str:
        """The base URI as delta-rs and pyarrow take it (``canonical_uri``)."""
        return canonical_uri(self.base_uri)

    def table(self, table: str | TableId) -> LakeTable:
        return LakeTable(self, table if isinstance(table, TableId) else TableId.parse(table))

    @functools.cached_property
    def _filesystem(self) -> tuple[pafs.FileSystem, str]:
        import pyarrow.fs as pafs  # pyarrow waits for the first use: operators and assets make handles at parse time

        uri = self.uri
        if "://" not in uri:
            return pafs.LocalFileSystem(), uri
        if uri.startswith("s3://") and self.storage_options:
            return _s3_filesystem(self.storage_options), uri[len("s3://"):]
        fs, root = pafs.FileSystem.from_uri(uri)
        return fs, root.rstrip("/")

    @property
    def fs(self) -> pafs.FileSystem:
        """The lake's pyarrow filesystem, with the storage options."""
        return self._filesystem[0]

    @property
    def root(self) -> str:
        """The base URI as a path of ``fs``."""
        return self._filesystem[1]

    def path(self, *parts: str) -> str:
        """A path of ``fs`` under the base URI."""
        return "/".join([self.root, *parts])

    @property
    def checkpoint(self) -> str:
        return self.path("_stream", "checkpoint.json")

    @property
    def lease(self) -> str:
        return self.path("_stream", "lease.json")

    @property
    def binlog_margin(self) -> str:
        """The last check of the checkpoint's binlog retention (``lake.documents.binlog_margin``)."""
        return self.path("_stream", "binlog_margin.json")

    def schema_document(self, ref: str) -> str:
        """A table schema the checkpoint names by ``ref`` (``lake.documents.schema_documents``)."""
        return self.path("_stream", "schemas", f"{ref}.json")

    @property
    def object_store(self) -> bool:
        """True for S3, GCS and Azure: objects are uploaded whole, folders are only key prefixes."""
        return storage.is_object_store(self.fs)

    @property
    def local(self) -> bool:
        """True for a lake on this machine's filesystem."""
        return storage.is_local(self.fs)

    def exists(self, path: str) -> bool:
        return storage.exists(self.fs, path)

    def read_json(self, path: str) -> Any | None:
        """The document at ``path``, or None (``storage.read_json``)."""
        return storage.read_json(self.fs, path)

    def write_json(self, path: str, document: Any) -> None:
        """Replace the document at ``path`` atomically (``storage.write_json``)."""
        storage.write_json(self.fs, path, document)

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_dir(path)

    def spark_uri(self, file_uri: str) -> str:
        """A file URI from a Delta log as Spark reads it: local paths as ``file://``, ``s3://`` in the base
        URI's own scheme when it was Hadoop's (``s3a://``)."""
        if "://" not in file_uri:
            return "file://" + file_uri
        given = self.base_uri.split("://", 1)[0].lower() if "://" in self.base_uri else ""
        scheme = file_uri.split("://", 1)[0]
        if given != scheme and canonical_scheme(given) == scheme:
            return f"{given}://{file_uri.split('://', 1)[1]}"
        return file_uri


def _s3_filesystem(options: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem from delta-rs's storage options; what they leave out comes from AWS's
    credential chain (variables, profile, instance role), as without options."""
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {
        "access_key": options.get("AWS_ACCESS_KEY_ID"),
        "secret_key": options.get("AWS_SECRET_ACCESS_KEY"),
        "session_token": options.get("AWS_SESSION_TOKEN"),
        "region": options.get("AWS_REGION"),
    }
    endpoint = options.get("AWS_ENDPOINT_URL")
    if endpoint:
        parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs.update(endpoint_override=parsed.netloc + parsed.path.rstrip("/"), scheme=parsed.scheme)
    return pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None})


def table_uri(base_uri: str, table: str | TableId) -> str:
    """The URI of the table's current-state Delta table under ``base_uri`` (``DeltaTable(table_uri(...))``
    reads it): for a user's own Delta reader."""
    return Lake.at(base_uri).table(table).current.uri


def changelog_uri(base_uri: str, table: str | TableId) -> str:
    """The URI of the table's changelog Delta table under ``base_uri``: for a user's own Delta reader."""
    return Lake.at(base_uri).table(table).changelog.uri
