"""The replica tables as Delta Lake tables, written and read with ``deltalake`` (delta-rs): the one
implementation of ``lake.format.table_format``, and the only module that imports ``deltalake`` (a test checks).

``DeltaLocation`` is a place (``ReplicaTable``), ``DeltaVersion`` an opened version (``TableVersion``).
What is Delta's here and nowhere else:

* every call takes the lake's storage options (credentials, endpoint), so the handle's options reach
  delta-rs the same way for every table;
* a table another writer turned column mapping on for is refused when opened (measured on delta-rs 1.6,
  bench/RESULTS.md: its pyarrow readers return a renamed column of such a table as NULLs, and it cannot
  add columns to one);
* a write or MERGE that brings a DATETIME column (timestamp without time zone) into an existing table
  turns on the ``timestampNtz`` feature first, which delta-rs does when it creates a table but not then;
* the stream's appends are written Snappy without dictionary encoding (measured on the stream benchmark's
  changelog rows: the dictionaries took half the writer's CPU for files no smaller, 4.7 MB instead of
  4.8 MB a 100,000 rows; compaction rewrites the files with the defaults anyway);
* an append through an opened table of rows with the table's own columns and types (every stream batch but
  those after a DDL) writes its Parquet file itself and commits it as an add action with statistics from
  its footer (``file_stats``) and the rows it added in the commit's info: ``write_deltalake`` cost 4.4 ms
  of CPU for an append of 20 rows of 12 columns, the file and the commit 3.2 ms (delta-rs 1.6.6), which a
  batch over 1,000 tables pays 1,000 times. On a local filesystem the commit is a log entry of our own
  (``lake.format.delta_log``: delta-rs replays the log since its last checkpoint at every commit and refresh; a batch
  over 1,000 changelogs 2.55 against 4.45 ms a table, bench/RESULTS.md "Stream batches over many changelogs"),
  elsewhere delta-rs's transaction. Rows that add a
  column or change a type go through ``write_deltalake`` (its schema merge);
* a partition replacement commits the Spark tasks' files as add actions built from their Parquet footers
  (``file_stats``: the statistics Delta readers skip files by), and finds the version it made in the log
  itself: delta-rs's ``history()`` numbers entries by the snapshot it has loaded, which is wrong while
  other batches commit;
* delta-rs's ``CommitFailedError`` (a commit that lost a race, even for disjoint partitions) is
  ``TableCommitConflictError``;
* a table is made with the location's table properties (the maintenance policy's), and properties are changed
  later by a log entry of our own, never by delta-rs's ``set_table_properties``: on a table of writer version 7
  (any with a DATETIME column) delta-rs 1.6 adds the ``variantType`` reader feature with them, and Delta readers
  without variants (delta-spark before 4.0) refuse the table from then on (``DeltaVersion.set_properties``).

``deltalake`` is imported inside the methods: the handle, and so this module, is imported at DAG parse
time, and delta-rs is loaded only when a table is touched.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_mysqlcdc.exceptions import LakeFormatError, SnapshotJobError, TableCommitConflictError
from airflow_provider_mysqlcdc.lake.documents import storage
from airflow_provider_mysqlcdc.lake.format import delta_log
from airflow_provider_mysqlcdc.lake.format.table_format import (
    SCAN_BATCH_BYTES,
    SCAN_BATCH_ROWS,
    Commit,
    CommitTag,
    Compaction,
    DataFile,
    LakeFiles,
    MergeCounts,
    MergeSpec,
    StoredFile,
    quote,
)

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from deltalake import CommitProperties, DeltaTable, WriterProperties
    from deltalake.transaction import AddAction, RemoveAction

MAX_STRING_STAT = 256
"""Longer strings get no min/max statistics: they would bloat the Delta log for little skipping."""
_DELTA_COMMIT_KEYS = frozenset({"operation", "clientVersion", "engineInfo", "userMetadata", "isolationLevel"})
"""commitInfo's own text entries; the others are the writer's metadata (``CommitTag.metadata``)."""
_OWN_COMMIT_TRIES = 10
"""Versions an append of our own log entry tries before giving up to other writers (``DeltaVersion.append``)."""
_APPENDED_ROWS = "appendedRows"
"""commitInfo's entry of the rows an append of our own file added (delta-rs writes ``operationMetrics`` only
for its own writes)."""


@contextmanager
def _conflicts() -> Iterator[None]:
    """delta-rs's lost commit race as the seam's ``TableCommitConflictError``."""
    from deltalake.exceptions import CommitFailedError

    try:
        yield
    except CommitFailedError as error:
        raise TableCommitConflictError(str(error)) from error


def _properties(tag: CommitTag, max_commit_retries: int | None = None) -> CommitProperties:
    from deltalake import CommitProperties, Transaction

    transactions = [Transaction(tag.app_id, tag.app_version)] if tag.app_id is not None else None
    kwargs: dict[str, Any] = {} if max_commit_retries is None else {"max_commit_retries": max_commit_retries}
    return CommitProperties(app_transactions=transactions, custom_metadata=dict(tag.metadata) or None, **kwargs)


def _stream_writer_properties() -> WriterProperties:
    """Snappy without dictionary encoding (module docstring)."""
    from deltalake import ColumnProperties, WriterProperties

    return WriterProperties(compression="SNAPPY", default_column_properties=ColumnProperties(dictionary_enabled=False))


def _needs_ntz(schema: pa.Schema) -> bool:
    return any(pa.types.is_timestamp(f.type) and f.type.tz is None for f in schema)


def allow_types_of(table: DeltaTable, schema: pa.Schema) -> None:
    """Enable the table features ``schema``'s types need on an existing ``table`` before they are written
    to it: a DATETIME column (timestamp without time zone) added by a DDL needs ``timestampNtz``, which
    delta-rs turns on when it creates a table but not when a write or MERGE adds such a column (``table``
    is then loaded again at its newest version: a write through it starts from there)."""
    from deltalake import TableFeatures

    if not _needs_ntz(schema):
        return
    protocol = table.protocol()
    if "timestampNtz" in (protocol.writer_features or []):
        return
    table.alter.add_feature(TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True)
    table.update_incremental()


@dataclass(frozen=True)
class DeltaLocation:
    """One Delta table of the lake: its URI and the storage options every delta-rs call on it takes;
    ``lake`` and ``parts``: the same folder as a path of the lake's filesystem (its log read directly);
    ``properties``: those of a table made here."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    lake: LakeFiles | None = field(default=None, repr=False, compare=False)
    parts: tuple[str, ...] = field(default=(), repr=False, compare=False)
    properties: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """The table properties a table made here starts with (delta-rs takes them only when a write makes it)."""

    def __str__(self) -> str:
        return self.uri

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def _configuration(self) -> dict[str, str | None] | None:
        return {**self.properties} or None

    def open(self, from_log: bool = False) -> DeltaVersion | None:
        """``from_log``: a handle for appends and the schema (the stream's changelogs, lineage, a snapshot batch's
        commit): on a local filesystem its log is read without delta-rs where ``delta_log.read_state`` can (delta-rs
        loads the table at its first other use)."""
        if from_log:
            fs, folder = self.files_at()
            if delta_log.supports(fs):
                try:
                    state = delta_log.read_state(folder)
                except delta_log.LogNotReadable:
                    pass
                else:
                    if state is None:
                        return None
                    self._refuse_column_mapping(state.configuration)
                    return DeltaVersion(self, None, state)
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:  # not is_deltatable() first: that lists the log too, a second round trip per open
            table = DeltaTable(self.uri, storage_options=self._options())
        except TableNotFoundError:
            return None
        self._refuse_column_mapping(table.metadata().configuration)
        return DeltaVersion(self, table)

    def history(self, limit: int | None = None) -> list[Commit] | None:
        """On a local filesystem the newest entries' ``commitInfo`` alone (``delta_log.commit_infos``), where opening
        the table read its last checkpoint and every entry after it first (most of a watcher's poll of a changelog
        100 entries past its checkpoint); elsewhere delta-rs's history of the loaded table."""
        fs, folder = self.files_at()
        if delta_log.supports(fs):
            infos = delta_log.commit_infos(folder, limit)
            return None if infos is None else _commits(infos)
        table = self.open()
        return None if table is None else table.history(limit)

    def commit(self, version: int) -> Commit | None:
        """The log entry of ``version`` alone (``delta_log.commit_info``: one small read, on any filesystem)."""
        fs, folder = self.files_at()
        info = delta_log.commit_info(fs, folder, version)
        return None if info is None else _commits([(version, info)])[0]

    def _refuse_column_mapping(self, configuration: Mapping[str, str | None]) -> None:
        mode = configuration.get("delta.columnMapping.mode") or "none"
        if mode != "none":
            raise LakeFormatError(
                f"the Delta table at {self.uri} has column mapping (delta.columnMapping.mode={mode}), which another "
                f"writer turned on; this provider writes and reads plain Delta tables only: recreate the table "
                f"without column mapping (or re-snapshot the replica into a new base_uri)")

    def create_with_partition(self, column: str, value: int, files: Sequence[DataFile], schema: pa.Schema,
                              tag: CommitTag) -> int:
        """The table created with ``files`` as partition ``value`` in its first commit: one transaction where
        creating the table and then replacing the partition were two, and a third of the time (bench/RESULTS.md:
        a database's small tables are each created by their one batch). On a local filesystem the commit is our
        own entry of version 0 (``_new_table``), elsewhere delta-rs's ``create_table_with_add_actions``."""
        from deltalake import DeltaTable, Schema
        from deltalake.exceptions import DeltaError
        from deltalake.transaction import create_table_with_add_actions

        path = self._first_entry()
        if path is not None:
            entry = delta_log.create_entry(_added(column, value, files), tag.app_id, tag.app_version, tag.metadata,
                                           self._new_table(schema, (column,)))
            if not delta_log.put_if_absent(path, entry):
                raise TableCommitConflictError(f"another writer created the Delta table at {self.uri} first")
            return 0
        try:
            # no commit retries: a retried creation would land as a second CREATE TABLE on top of the winner's
            # (measured), resetting the schema a concurrent writer may have evolved already
            create_table_with_add_actions(self.uri, Schema.from_arrow(schema), _added(column, value, files),
                                          mode="error", partition_by=[column], storage_options=self._options(),
                                          configuration=self._configuration(),
                                          commit_properties=_properties(tag, max_commit_retries=0))
        except DeltaError as error:
            if not DeltaTable.is_deltatable(self.uri, storage_options=self._options()):
                raise
            raise TableCommitConflictError(f"another writer created the Delta table at {self.uri} first") from error
        return 0

    def create_from(self, rows: pa.Table, partition_by: Sequence[str], tag: CommitTag) -> None:
        self._write(rows, True, mode="error", partition_by=list(partition_by), commit_properties=_properties(tag))

    def append(self, rows: pa.Table, tag: CommitTag, *, loaded: DeltaTable | None = None) -> None:
        """Append ``rows``; ``loaded``: the table as already loaded (its features allowed for the rows), written
        through without loading its log again. Without it, on a local filesystem, a table not there yet is made
        by a log entry of our own (``lake.format.delta_log``: 2.8 ms of CPU against 5.9 ms through ``write_deltalake``,
        bench/RESULTS.md "Stream batches over many changelogs"; a stream's first batch over a whole database makes
        hundreds)."""
        if loaded is None and self._create_own(rows, tag):
            return
        self._write(rows, loaded is not None, mode="append", schema_mode="merge", loaded=loaded,
                    writer_properties=_stream_writer_properties(), commit_properties=_properties(tag))

    def _create_own(self, rows: pa.Table, tag: CommitTag) -> bool:
        """The table made with ``rows`` by our own log entry at version 0; False where that path does not apply
        or the table is there (another writer made it first: the caller appends through delta-rs)."""
        path = self._first_entry()
        if path is None:
            return False
        rows = rows.replace_schema_metadata(None)
        metadata = {**tag.metadata, _APPENDED_ROWS: str(rows.num_rows)}
        entry = delta_log.append_entry([self.write_file(rows)], tag.app_id, tag.app_version, metadata,
                                       self._new_table(rows.schema))
        return delta_log.put_if_absent(path, entry)

    def _first_entry(self) -> str | None:
        """Where the entry of version 0 goes if our own entry can make the table: on a local filesystem, and no
        table there (its first entries perhaps removed after a checkpoint); else None."""
        fs, folder = self.files_at()
        if not delta_log.supports(fs):
            return None
        fs.create_dir(f"{folder}/_delta_log", recursive=True)
        path = delta_log.log_path(folder, 0)
        if storage.exists(fs, path) or storage.exists(fs, f"{folder}/_delta_log/_last_checkpoint"):
            return None
        return path

    def _new_table(self, schema: pa.Schema, partition_by: tuple[str, ...] = ()) -> delta_log.NewTable:
        """What our entry of version 0 says of a table of ``schema``: made with the location's properties. Our own
        entry costs 2.8 ms of CPU against 5.9 ms through ``write_deltalake`` (bench/RESULTS.md "Stream batches over
        many changelogs"); delta-rs's ``create_table_with_add_actions`` took 5.3 ms of a snapshot batch's 11 ms
        commit (cProfile, 300 small tables)."""
        from deltalake import Schema

        return delta_log.NewTable(Schema.from_arrow(schema).to_json(), _needs_ntz(schema), self.properties,
                                  partition_by)

    def overwrite(self, rows: pa.Table | pa.RecordBatchReader, tag: CommitTag,
                  partition_by: Sequence[str] = ()) -> None:
        self._write(rows, False, mode="overwrite", schema_mode="overwrite", partition_by=list(partition_by) or None,
                    commit_properties=_properties(tag))

    def _write(self, rows: pa.Table | pa.RecordBatchReader, features_allowed: bool, loaded: DeltaTable | None = None,
               **kwargs: Any) -> None:
        """``write_deltalake`` here (through ``loaded``, the table as loaded, if given: a URI makes delta-rs load
        its log again), the table's features allowed first unless the caller did (module docstring)."""
        from deltalake import write_deltalake

        if _needs_ntz(rows.schema) and not features_allowed:
            existing = self.open()
            if existing is not None:
                allow_types_of(existing.delta, rows.schema)
        with _conflicts():
            if loaded is not None:
                write_deltalake(loaded, rows, **kwargs)  # the storage options are the loaded table's
            else:  # the properties count only where this write makes the table
                write_deltalake(self.uri, rows, storage_options=self._options(), configuration=self._configuration(),
                                **kwargs)

    def write_file(self, rows: pa.Table) -> AddAction:
        """``rows`` as a new Parquet file in the table's folder (Snappy, no dictionaries: module docstring), and
        the add action that commits it, its statistics from the footer the writer made."""
        import pyarrow.parquet as pq  # only here: the stream's appends write Parquet themselves
        from deltalake.transaction import AddAction

        sink = pa.BufferOutputStream()
        footers: list[pq.FileMetaData] = []
        pq.write_table(rows, sink, compression="snappy", use_dictionary=False, metadata_collector=footers)
        data = sink.getvalue()
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        fs, folder = self.files_at()
        with fs.open_output_stream(f"{folder}/{name}") as out:
            out.write(data)
        modified_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        return AddAction(name, data.size, {}, modified_ms, True, file_stats(footers[0]))

    def files_at(self) -> tuple[pafs.FileSystem, str]:
        """The table's folder as a path of a pyarrow filesystem: the lake's, or one from the URI."""
        if self.lake is not None:
            return self.lake.fs, self.lake.path(*self.parts)
        import pyarrow.fs as pafs  # only here: a table opened without its lake (tests, benchmarks)

        fs, path = pafs.FileSystem.from_uri(self.uri)
        return fs, path.rstrip("/")


@dataclass
class DeltaVersion:
    """A Delta table as delta-rs loaded it (``delta``), at the place ``location``.

    Appends committed by log entries of our own (``lake.format.delta_log``) move the table past the version delta-rs
    loaded without loading it again: ``version`` counts them, and ``delta`` brings delta-rs's table up to date
    before any other use, so every read sees them. A handle opened for appends from the log alone (``_log``)
    has no delta-rs table until such a use loads it."""

    location: DeltaLocation
    _table: DeltaTable | None
    """delta-rs's table; None while the handle holds the log's state instead (``_log``)."""
    _log: delta_log.LogState | None = None
    """The table's state as read from its log and moved on by our own entries, until delta-rs loads it."""
    _head: int = field(default=-1, init=False)
    """When ``_behind``: the version of our own last entry, past delta-rs's."""
    _behind: bool = field(default=False, init=False)

    @property
    def delta(self) -> DeltaTable:
        """delta-rs's table, at least at ``version``."""
        if self._table is None or self._behind:
            self.refresh()
        return self._loaded()

    @property
    def uri(self) -> str:
        return self.location.uri

    def version(self) -> int:
        if self._log is not None:
            return self._log.version
        return self._head if self._behind else int(self._loaded().version())

    def schema(self) -> pa.Schema:
        # our own entries add files, never columns: delta-rs's table as loaded (or the log's) has the schema
        if self._log is not None:
            return _arrow_schema(self._log.schema_json)
        return pa.schema(self._loaded().schema().to_arrow())

    def _schema_json(self) -> str:
        return self._log.schema_json if self._log is not None else str(self._loaded().schema().to_json())

    def _loaded(self) -> DeltaTable:
        """delta-rs's table as loaded, perhaps behind our own entries (there is one unless ``_log`` is)."""
        assert self._table is not None
        return self._table

    def count(self) -> int:
        return int(self.delta.count())

    def files(self) -> list[StoredFile]:
        actions = pa.table(self.delta.get_add_actions(flatten=True))
        uris = {uri.rsplit("/", 1)[-1]: uri for uri in self.delta.file_uris()}
        names = actions.column_names

        def prefixed(row: Mapping[str, Any], prefix: str) -> dict[str, Any]:
            return {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix) and v is not None}

        return [StoredFile(uris[row["path"].rsplit("/", 1)[-1]], int(row["size_bytes"]),
                           {k[len("partition."):]: row[k] for k in names if k.startswith("partition.")},
                           prefixed(row, "min."), prefixed(row, "max."))
                for row in actions.to_pylist()]

    def append(self, rows: pa.Table, tag: CommitTag) -> None:
        """Rows of the table's own columns (or some of them) and types go in a Parquet file of ours, committed
        as an add action (module docstring); rows that change the schema, or of a table with a column invariant
        or a variant column (``delta_log.plain_schema``), through ``write_deltalake``."""
        stored = self.schema()
        types = {f.name: f.type for f in stored}
        if any(types.get(f.name) != f.type for f in rows.schema) or not delta_log.plain_schema(self._schema_json()):
            allow_types_of(self.delta, rows.schema)
            self.location.append(rows, tag, loaded=self.delta)
            self.refresh()
            return
        if rows.schema != stored:
            names = set(rows.column_names)  # every column of the table, in its order
            rows = pa.Table.from_arrays([rows.column(f.name) if f.name in names else pa.nulls(rows.num_rows, f.type)
                                         for f in stored], schema=stored)
        add = self.location.write_file(rows)
        tag = replace(tag, metadata={**tag.metadata, _APPENDED_ROWS: str(rows.num_rows)})
        if self._commit_own(add, tag, stored):
            return
        with _conflicts():
            self.delta.create_write_transaction([add], mode="append", schema=self.delta.schema(),
                                                commit_properties=_properties(tag))
        self.refresh()  # delta-rs's commit leaves its table at the version it had loaded

    def _commit_own(self, add: AddAction, tag: CommitTag, schema: pa.Schema) -> bool:
        """``add`` committed by a log entry of our own (``lake.format.delta_log``) at the next version, or False where
        that path does not apply (an object store, a protocol asking more of a writer). A lost race reads the
        log again and takes the version after, unless the entry of ``tag`` landed already (True) or the
        other writer changed the schema the file was written for (``TableCommitConflictError``)."""
        fs, folder = self.location.files_at()
        if not delta_log.supports(fs):
            return False
        if self._log is None and not delta_log.appendable(*self._protocol()):
            return False  # (a state read from the log is of an appendable protocol: ``read_state``)
        entry = delta_log.append_entry([add], tag.app_id, tag.app_version, tag.metadata)
        for _ in range(_OWN_COMMIT_TRIES):
            version = self.version() + 1
            if delta_log.put_if_absent(delta_log.log_path(folder, version), entry):
                configuration = self._configuration()
                if self._log is not None:
                    self._log.appended(version, tag.app_id, tag.app_version)
                else:
                    self._head, self._behind = version, True
                self._checkpoint_if_due(version, configuration)
                return True
            self.refresh()  # another writer took the version: read its entry
            if tag.app_id is not None and self.applied(tag.app_id) >= tag.app_version:
                return True
            if self.schema() != schema:
                raise TableCommitConflictError(f"another writer changed the schema of {self.uri} while a batch "
                                               f"was appended to it; the batch is committed again")
            if not delta_log.appendable(*self._protocol()):
                return False  # the other writer asked more of writers: delta-rs commits the file
        raise TableCommitConflictError(f"{_OWN_COMMIT_TRIES} commits to {self.uri} in a row lost to other writers")

    def _checkpoint_if_due(self, version: int, configuration: Mapping[str, str | None]) -> None:
        """After our own entry of ``version``, as delta-rs's post-commit hook: a checkpoint at the table's
        interval, then the expired entries removed."""
        if delta_log.checkpoint_due(version, configuration):
            table = self.delta  # loaded at the entry just written
            table.create_checkpoint()
            if str(configuration.get("delta.enableExpiredLogCleanup", "true")).lower() != "false":
                table.cleanup_metadata()

    def _protocol(self) -> tuple[int, list[str] | None]:
        """The table's writer version and features, from delta-rs's table as loaded (the protocol our entries
        were appended under: a change of it by another writer loses them their race)."""
        protocol = self._loaded().protocol()
        return protocol.min_writer_version, protocol.writer_features

    def _configuration(self) -> Mapping[str, str | None]:
        return self._log.configuration if self._log is not None else self._loaded().metadata().configuration

    def read(self, columns: Sequence[str] | None = None, where: pc.Expression | None = None) -> pa.Table:
        return self.delta.to_pyarrow_dataset().to_table(columns=None if columns is None else list(columns),
                                                        filter=where)

    def scan(self, columns: Sequence[str] | None = None, where: pc.Expression | None = None) -> pa.RecordBatchReader:
        import pyarrow.fs as pafs  # only here: the rest of the module needs no filesystem classes

        # batches of about SCAN_BATCH_BYTES by the files' bytes per row
        actions = pa.table(self.delta.get_add_actions(flatten=True))
        rows, stored = (sum(actions.column(c).to_pylist()) if actions.num_rows else 0
                        for c in ("num_records", "size_bytes"))
        size = max(1, min(SCAN_BATCH_ROWS, SCAN_BATCH_BYTES * max(1, rows) // max(1, stored)))
        # the files through pyarrow's filesystem, not delta-rs's handler: a scan may feed a write of the same
        # table (``overwrite`` from a reader), and the handler cannot run inside delta-rs's writing runtime
        fs, path = self.location.files_at()
        dataset = self.delta.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(path, fs))
        names = None if columns is None else list(columns)
        schema = dataset.schema if names is None else pa.schema([dataset.schema.field(c) for c in names])

        def batches() -> Iterator[pa.RecordBatch]:
            # one row group at a time, without threads: a scanner over whole files reads ahead many row groups
            # (measured: 145 MB of Arrow memory for 8 MB row groups with every read-ahead option at its least;
            # 37 MB this way)
            for fragment in dataset.get_fragments(filter=where):
                for group in fragment.split_by_row_group(filter=where):
                    yield from group.to_batches(schema=dataset.schema, columns=names, filter=where, batch_size=size,
                                                use_threads=False, batch_readahead=0, fragment_readahead=0)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def applied(self, app_id: str) -> int:
        if self._log is not None:
            return self._log.transactions.get(app_id, -1)
        version: int | None = self.delta.transaction_version(app_id)
        return -1 if version is None else version

    def history(self, limit: int | None = None) -> list[Commit]:
        """A handle opened from the log alone takes its location's history (the newest entries' ``commitInfo``: a
        few small files, where delta-rs would load the table first)."""
        if self._log is not None:
            return self.location.history(limit) or []
        return _commits([(int(info["version"]), info) for info in self.delta.history(limit)])

    def delete(self, predicate: str, tag: CommitTag) -> int:
        with _conflicts():
            metrics = self.delta.delete(predicate=predicate, commit_properties=_properties(tag))
        return int(metrics.get("num_deleted_rows", 0))

    def merge(self, spec: MergeSpec) -> MergeCounts:
        assignments = {quote(c): f"s.{quote(c)}" for c in spec.source.column_names}
        allow_types_of(self.delta, spec.source.schema)  # a column the MERGE adds (merge_schema) may need a feature
        merger = self.delta.merge(spec.source, spec.on, source_alias="s", target_alias="t", merge_schema=True,
                                  commit_properties=_properties(spec.tag))
        if spec.delete_when is not None:
            merger = merger.when_matched_delete(spec.delete_when)
        if spec.update_when is not None:
            merger = merger.when_matched_update(assignments, spec.update_when)
        if spec.insert_when is not None:
            merger = merger.when_not_matched_insert(assignments, spec.insert_when)
        with _conflicts():
            m = merger.execute()
        return MergeCounts(
            inserted=int(m.get("num_target_rows_inserted", 0)), updated=int(m.get("num_target_rows_updated", 0)),
            deleted=int(m.get("num_target_rows_deleted", 0)), files_scanned=int(m.get("num_target_files_scanned", 0)),
            files_added=int(m.get("num_target_files_added", 0)),
            files_removed=int(m.get("num_target_files_removed", 0)),
        )

    def replace_partition(self, column: str, value: int, files: Sequence[DataFile], schema: pa.Schema,
                          tag: CommitTag) -> int:
        read_version = self.version()
        actions: list[AddAction | RemoveAction] = [*_added(column, value, files)]
        with _conflicts():
            self.delta.create_write_transaction(
                actions, mode="overwrite", schema=schema, partition_by=[column],
                partition_filters=[(column, "=", str(value))], commit_properties=_properties(tag),
            )
        return self._version_of(read_version, tag.metadata)

    def _version_of(self, after: int, metadata: Mapping[str, str]) -> int:
        """The version our commit made: the first after ``after`` whose commitInfo carries our metadata (other
        writers commit around it), read from the log directly (module docstring)."""
        import pyarrow.fs as pafs

        fs, table_dir = self.location.files_at()
        version = after + 1
        while True:
            path = delta_log.log_path(table_dir, version)
            if fs.get_file_info(path).type == pafs.FileType.NotFound:
                raise SnapshotJobError(f"the commit with {dict(metadata)} is not in the Delta log of {table_dir} after "
                                       f"version {after}: the table was replaced meanwhile; retry the task")
            with fs.open_input_stream(path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    info = json.loads(line).get("commitInfo")
                    if info is not None and all(info.get(k) == v for k, v in metadata.items()):
                        return version
            version += 1

    def differing_types(self, schema: pa.Schema) -> list[str]:
        from deltalake import Schema

        current = {f.name: f for f in self.delta.schema().fields}
        return [f"{f.name} {_type_name(current[f.name].type)} -> {_type_name(f.type)}"
                for f in Schema.from_arrow(schema).fields if f.name in current and current[f.name].type != f.type]

    def add_columns(self, schema: pa.Schema) -> pa.Schema:
        from deltalake import Field, Schema

        current = {f.name for f in self.delta.schema().fields}
        new = [Field(f.name, f.type, nullable=True) for f in Schema.from_arrow(schema).fields if f.name not in current]
        if new:
            with _conflicts():
                self.delta.alter.add_columns(new)
        return self.schema()

    def properties(self) -> Mapping[str, str]:
        return dict(self.delta.metadata().configuration)

    def set_properties(self, properties: Mapping[str, str]) -> bool:
        """Properties that need no table feature (the maintenance policy's), the protocol left as it is: on a
        table of writer version 7 by a log entry of our own (module docstring: delta-rs would add the
        ``variantType`` reader feature), so only where our entries can be written and the log read
        (``delta_log.read_state``); False, nothing set, on any other such table (on an object store)."""
        if self.delta.protocol().min_writer_version < 7:  # delta-rs leaves a protocol without features as it is
            with _conflicts():
                self.delta.alter.set_table_properties(dict(properties))
            return True
        fs, folder = self.location.files_at()
        if not delta_log.supports(fs):
            return False
        try:
            state = delta_log.read_state(folder)
        except delta_log.LogNotReadable:
            return False
        if state is None:
            raise LakeFormatError(f"the Delta log of {self.uri} went away while its properties were set")
        version = state.version + 1
        entry = delta_log.properties_entry(state, properties)
        if not delta_log.put_if_absent(delta_log.log_path(folder, version), entry):
            raise TableCommitConflictError(f"another writer committed to {self.uri} while its properties were set")
        self.refresh()
        self._checkpoint_if_due(version, {**state.configuration, **properties})
        return True

    def refresh(self) -> None:
        if self._table is None:
            from deltalake import DeltaTable

            self._table = DeltaTable(self.uri, storage_options=self.location._options())
        else:
            self._table.update_incremental()
        self._log, self._behind = None, False

    def compact(self, target_file_bytes: int) -> Compaction:
        with _conflicts():
            metrics = self.delta.optimize.compact(target_size=target_file_bytes)
        return Compaction(int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0)), metrics)

    def vacuum(self, retention_hours: int, full: bool) -> list[str]:
        options: dict[str, Any] = {"retention_hours": retention_hours, "enforce_retention_duration": False,
                                   "full": full}
        with _conflicts():
            if not self.delta.vacuum(dry_run=True, **options):
                return []  # nothing to delete: no VACUUM START/END commits in the log
            return list(self.delta.vacuum(dry_run=False, **options))

    def checkpoint(self) -> None:
        self.delta.create_checkpoint()

    def cleanup_log(self) -> None:
        self.delta.cleanup_metadata()
        fs, folder = self.location.files_at()
        if delta_log.supports(fs):  # where our own entries are written: the temporaries a killed writer left
            delta_log.remove_stale_temporaries(folder)


@functools.lru_cache(maxsize=1024)
def _arrow_schema(schema_json: str) -> pa.Schema:
    """A Delta schema's JSON as Arrow's (a whole database's changelogs share a few)."""
    from deltalake import Schema

    return pa.schema(Schema.from_json(schema_json).to_arrow())


def _commits(infos: list[tuple[int, dict[str, Any]]]) -> list[Commit]:
    """Commit information (delta-rs's ``history`` or the log's own), newest first, as ``Commit``s."""
    commits = []
    for version, info in infos:
        parameters = info.get("operationParameters") or {}
        appended = None
        if info.get("operation") == "WRITE" and parameters.get("mode") == "Append":
            appended = int((info.get("operationMetrics") or {}).get("num_added_rows", info.get(_APPENDED_ROWS, 0)))
        metadata = {k: v for k, v in info.items()
                    if isinstance(v, str) and k not in _DELTA_COMMIT_KEYS and k != _APPENDED_ROWS}
        commits.append(Commit(version, int(info.get("timestamp", 0)), appended, metadata))
    return commits


def _type_name(kind: Any) -> str:
    """A Delta type as its protocol name (``long``, ``decimal(12,2)``, ``struct``...)."""
    return str(getattr(kind, "type", kind))


def _added(column: str, value: int, files: Sequence[DataFile]) -> list[AddAction]:
    """The add actions of ``files`` in partition ``value`` of ``column``, with their footers' statistics."""
    from deltalake.transaction import AddAction

    return [AddAction(f.path, f.size, {column: str(value)}, f.modified_ms, True, file_stats(f.footer)) for f in files]


def file_stats(metadata: pq.FileMetaData) -> str:
    """Delta's per-file statistics JSON from a Parquet footer: row count, null counts, and min/max of
    the columns whose Parquet statistics mean the same in Delta."""
    schema = metadata.schema.to_arrow_schema()
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    # an empty row group (a chunk of no rows written) has no statistics and says nothing of the file's values:
    # counted, it left the file without any, and delta-rs then skipped the file for every filter on the column
    # (its rows were missing from filtered reads: verification's key ranges, as-of reads)
    groups = [g for g in range(metadata.num_row_groups) if metadata.row_group(g).num_rows > 0]
    for index, column in enumerate(schema):
        stats = [metadata.row_group(g).column(index).statistics for g in groups]
        if any(s is None for s in stats):
            continue
        if all(s.has_null_count for s in stats):
            nulls[column.name] = sum(s.null_count for s in stats)
        bounds = _bounds(column.type, stats)
        if bounds is not None:
            minimum[column.name], maximum[column.name] = bounds
    return json.dumps({"numRecords": metadata.num_rows, "minValues": minimum, "maxValues": maximum,
                       "nullCount": nulls}, separators=(",", ":"))


def _bounds(kind: pa.DataType, stats: list[Any]) -> tuple[Any, Any] | None:
    """The file's (min, max) of one column, or None when any row group has none or they are unsafe."""
    form = _stat_form(kind)
    if form is None:
        return None  # its Parquet bounds not even read (a timestamp's or decimal's become Python objects first)
    with_values = [s for s in stats if s.has_min_max]
    if not with_values:
        return None
    if len(with_values) < len(stats) and not all(s.null_count == s.num_values for s in stats if not s.has_min_max):
        return None  # a row group with values but without bounds
    low, high = form(min(s.min for s in with_values)), form(max(s.max for s in with_values))
    return None if low is None or high is None else (low, high)


def _stat_form(kind: pa.DataType) -> Callable[[Any], Any] | None:
    """How a Parquet statistic of a column of ``kind`` becomes Delta's JSON value (None for a value that could
    mislead a reader), or None for the types that get no bounds: unsigned integers (Delta's are signed; a
    BIGINT UNSIGNED max would wrap), floats (NaN is left out of Parquet bounds), decimals, timestamps (Delta
    keeps milliseconds, which would cut a max below its value), binary and booleans."""
    if pa.types.is_signed_integer(kind):
        return lambda value: value if isinstance(value, int) else None
    if pa.types.is_string(kind):
        return lambda value: value if isinstance(value, str) and len(value) <= MAX_STRING_STAT else None
    if pa.types.is_date32(kind):
        return lambda value: value.isoformat() if isinstance(value, dt.date) else None
    return None
