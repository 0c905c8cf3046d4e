"""A DDL of a captured table applied to the lake at its binlog offset, under a ``SchemaChangeBehavior``.

The stream meets a DDL as a ``SchemaStatement`` (``cdc.binlog.reader``): it commits the changes before
it as a batch of their own, then calls ``SchemaChanges.apply`` for the DDL's batch, which

1. merges every table's changes up to the DDL into the current tables (the DDL must act on the state
   the source had at its offset);
2. changes the current tables (``lake.write.current_ddl``): TRUNCATE empties the table; renamed columns keep
   their values under the new name; dropped columns go; added columns appear; a retyped column whose
   values the new type may convert is emptied. Each is a commit at the DDL batch's number, so a run
   killed before its checkpoint does not apply it twice;
3. reads again, at new high watermarks while the stream waits, every row of a table whose existing rows
   got values without row events: an added column with a DEFAULT, a generated column, a NOT NULL column
   (its implicit default), a type conversion, or a table renamed into the captured set. The binlog has
   no row events for these values (INSTANT, INPLACE and COPY alike), and computing them would mean
   evaluating MySQL's DEFAULT expressions, generated-column expressions and conversions exactly as the
   server does: reading them back is exact by construction. It is the repair's re-snapshot
   (``engine.verification.resnapshot``): re-read rows are ordered at their chunk's high watermark, so the stream's
   changes after it win and those before lose, whenever they are merged;
4. returns the changelog records of the DDL (``!T`` for TRUNCATE, ``!S`` for the rest, with the
   statement), which the stream commits with the checkpoint past the DDL.

Under 'ignore' none of 2 and 3 happens: the lake keeps the columns it had (``Checkpoint.kept``) and the
stream writes the changes, decoded with the source's columns, as those.

A table dropped or renamed away stops (its replica kept, the statement in the checkpoint's stopped
table); a table created or renamed under a captured name is captured again, its replica replaced: by a copy
of the replica of the table renamed to it when that one was captured, else by its rows read from the
server. One the server no longer has by the time the stream reads the DDL (online schema change tools drop
their tables right after the cut-over) is passed over until a later DDL brings a table of its name back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.binlog.reader import SchemaStatement
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.ddl import (
    ColumnChange,
    ColumnChangeKind,
    TableChange,
    TableChangeKind,
    keeps_values,
)
from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import SchemaChangeBehavior
from airflow_provider_mysqlcdc.engine.stream.captured_tables import floored
from airflow_provider_mysqlcdc.engine.verification.resnapshot import reread_current
from airflow_provider_mysqlcdc.exceptions import MySqlCdcError, SchemaChangeError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.changelog import table_event_record
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint, StoppedTable
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.current_ddl import replace_current, reshape_current, truncate_current

_log = logging.getLogger(__name__)
_NAMES_NEEDED = ("the binlog's table maps carry no column names (binlog_row_metadata = MINIMAL or NO_LOG), so the "
                 "stream reads rows by position and cannot go on with a schema it does not know exactly; with "
                 "binlog_row_metadata = 'FULL' (SET GLOBAL, and in the server config) such a statement is followed by "
                 "the names of the rows after it")


@dataclass
class AppliedStatement:
    """What a DDL did: the changelog records per table, and the tables captured or released from here on
    (the binlog reader is told)."""

    records: dict[TableId, list[pa.Table]] = field(default_factory=dict)
    captured: list[TableSchema] = field(default_factory=list)
    released: list[TableId] = field(default_factory=list)


class SchemaChanges:
    """Applies DDL statements to ``lake``. ``merge(checkpoint)`` brings the current tables
    up to ``checkpoint``; ``reload_schema`` reads a table's schema from the server; ``selection`` chooses
    the tables the stream captures (a table created or renamed under a name it matches is captured);
    ``reread_server_id()`` gives the binlog reader id of the re-reads (asked for only when one
    is needed: it may refuse a connection with a single server id)."""

    def __init__(self, behavior: SchemaChangeBehavior, lake: Lake, config: ConnectionConfig,
                 merge: Callable[[Checkpoint], Any], reload_schema: Callable[[TableId], TableSchema],
                 selection: TableSelection, reread_server_id: Callable[[], int]) -> None:
        self.behavior = behavior
        self.lake = lake
        self.config = config
        self.merge = merge
        self.reload_schema = reload_schema
        self.selection = selection
        self.reread_server_id = reread_server_id

    def apply(self, statement: SchemaStatement, checkpoint: Checkpoint, target: Checkpoint) -> AppliedStatement:
        """Apply ``statement`` for the batch ``target`` (the checkpoint past the DDL, whose schemas, chunks
        and stopped tables this changes); ``checkpoint`` is the stream's, at the DDL's start."""
        text = statement.ddl.statement
        changes = [c for c in statement.ddl.changes if c.changes_columns]
        if not changes:
            return AppliedStatement()
        if self.behavior is SchemaChangeBehavior.EXCEPTION:
            raise SchemaChangeError(
                f"{text!r} at {statement.offset} changes {', '.join(sorted({str(c.table) for c in changes}))}, and "
                f"schema_change_behavior is 'exception': nothing past it is committed. Set schema_change_behavior "
                f"to 'evolve' to follow it, or re-snapshot the table after the change")
        exact = self.behavior in (SchemaChangeBehavior.EVOLVE, SchemaChangeBehavior.TRY_EVOLVE)
        if exact:
            self.merge(checkpoint)
        applied, rereads = AppliedStatement(), []
        for change in changes:
            try:
                rereads.extend(self._apply(change, statement, target, applied, exact))
            except MySqlCdcError as exc:
                if self.behavior is not SchemaChangeBehavior.TRY_EVOLVE:
                    raise
                _log.warning("%s; schema_change_behavior 'try_evolve' applies it leniently instead", exc)
                rereads.extend(self._apply(change, statement, target, applied, exact=False))
        for table in dict.fromkeys(rereads):
            target.history_from[table] = self._reread(table, statement, target.seq)
        return applied

    def _apply(self, change: TableChange, statement: SchemaStatement, target: Checkpoint,
               applied: AppliedStatement, exact: bool) -> list[TableId]:
        """Apply one table's change; returns the tables to read again."""
        table, kind = change.table, change.kind
        captured = table in target.schemas
        rereads: list[TableId] = []
        if captured and kind is TableChangeKind.ALTER:
            rereads += self._alter(change, statement, target, applied, exact)
        elif captured and kind is TableChangeKind.TRUNCATE:
            if exact:
                truncate_current(self.lake.table(table).current, target.seq, statement.offset)
                target.history_from[table] = target.offset
            else:
                _log.warning("%s: TRUNCATE at %s recorded in the changelog, but its current table keeps its rows "
                             "(schema_change_behavior %s)", table, statement.offset, self.behavior.value)
            self._record(applied, target, table, ChangeKind.TRUNCATE, statement)
        elif captured and kind in (TableChangeKind.DROP, TableChangeKind.RENAME):
            self._record(applied, target, table, ChangeKind.SCHEMA_CHANGE, statement)
            self._stop(table, statement, target, applied)
        elif captured and kind is TableChangeKind.UNKNOWN:
            if not self._names_logged(statement):
                raise SchemaChangeError(
                    f"{statement.ddl.statement!r} at {statement.offset} changes {table} in a way the stream cannot "
                    f"read, so the columns of its rows after it cannot be known; nothing past it is committed. "
                    f"{_NAMES_NEEDED}. Take {table} anew: delete its folder in the lake and run the DAG again")
            if exact:
                raise SchemaChangeError(
                    f"{statement.ddl.statement!r} at {statement.offset} changes {table} in a way the stream cannot "
                    f"read, so it cannot keep the replica exact; nothing past it is committed. Re-snapshot {table}, "
                    f"or set schema_change_behavior to 'try_evolve' to go on with the server's columns, leaving the "
                    f"rows in the lake as they are")
            _log.warning("%s: %r at %s not understood; the stream goes on with the server's columns, the rows "
                         "in the lake as they were (schema_change_behavior %s)", table, statement.ddl.statement,
                         statement.offset, self.behavior.value)
            self._decode_with(target, table, self._server_schema(target.schemas[table]), statement, applied)
        new = change.renamed_to if kind is TableChangeKind.RENAME else table if kind is TableChangeKind.CREATE \
            else None
        if new is not None and self.selection.matches(new) and new not in target.schemas:
            rereads += self._capture(new, statement, target, applied, exact,
                                     renamed_from=table if kind is TableChangeKind.RENAME else None)
        return rereads

    def _alter(self, change: TableChange, statement: SchemaStatement, target: Checkpoint,
               applied: AppliedStatement, exact: bool) -> list[TableId]:
        table = change.table
        old = target.schemas[table]
        new = self._schema_after(old, change, statement, strict=exact)
        renamed = {c.name: c.new_name for c in change.columns if c.new_name}
        converted = [name for c in change.columns if c.kind is ColumnChangeKind.MODIFY
                     if (name := c.name_after) in new.column_names and c.name in old.column_names
                     and not keeps_values(old.column(c.name), new.column(name))]
        filled = [c.name for c in change.columns if c.kind is ColumnChangeKind.ADD and c.fills_rows]
        self._decode_with(target, table, new, statement, applied)
        if self.behavior is SchemaChangeBehavior.IGNORE:
            _log.warning("%s: %r at %s ignored (schema_change_behavior 'ignore'): its lake keeps the columns %s; "
                         "its changes from here on are written as those (a column the source no longer has: NULL)",
                         table, statement.ddl.statement, statement.offset, list(target.kept[table].column_names))
            return []
        if not exact:
            if renamed or converted or filled:
                _log.warning("%s: %r at %s applied leniently (schema_change_behavior %s): renamed columns start "
                             "empty under their new name, and rows unchanged since keep their old values or NULL in "
                             "%s", table, statement.ddl.statement, statement.offset, self.behavior.value,
                             sorted({*renamed.values(), *converted, *filled}))
            return []
        if converted or filled:  # replaced by its rows read again (_reread), in one commit: no reshape first
            _refuse_keyless_reread(new, statement)
            _log.info("%s: %r at %s gave existing rows values the binlog does not carry (%s): its rows are read "
                      "again", table, statement.ddl.statement, statement.offset, ", ".join([*converted, *filled]))
            return [table]
        reshape_current(self.lake.table(table).current, new, renamed, target.seq, known=old.column_names)
        return []

    def _schema_after(self, old: TableSchema, change: TableChange, statement: SchemaStatement,
                      strict: bool) -> TableSchema:
        """The table's schema right after the DDL: ``old`` with the DDL's changes in the DDL's order (``ADD`` last
        or ``FIRST``/``AFTER``, ``MODIFY``/``CHANGE`` in place or moved, as MySQL does), the definitions of the
        columns it adds or redefines taken from the server. The server may be further on (more DDL since, which
        the stream applies when it gets there): columns the DDL leaves alone keep their definitions, and only a
        column the DDL defines that the server no longer has makes the schema in between unknowable (an error,
        when ``strict``; else the server's columns, which the names of the next table maps check). The order comes
        from the DDL because a table map without names (MINIMAL, NO_LOG) is read by position: the server's order
        of today may be a later one, and a same-typed reorder would swap values silently. For the same reason,
        without names, the server's definition of a column the DDL defines must be the DDL's
        (``_check_definitions``): a later change of only its signedness, character set or ENUM members is not in
        a NO_LOG table map, whose rows would decode wrong."""
        current = self.reload_schema(change.table)
        now = {c.name: c for c in current.columns}
        columns = list(old.columns)
        missing: list[str] = []
        defined: list[ColumnChange] = []
        for column in change.columns:
            kind, name = column.kind, column.name_after
            place = next((i for i, c in enumerate(columns) if c.name == column.name), None)
            if kind is ColumnChangeKind.ADD and place is None:
                place = len(columns)  # last, unless FIRST or AFTER
            elif kind is ColumnChangeKind.ADD or place is None or kind is ColumnChangeKind.DEFAULT:
                continue  # IF [NOT] EXISTS: an ADD of a column it has, a change of one it lacks; a DEFAULT changes none
            elif kind is ColumnChangeKind.DROP:
                del columns[place]
                continue
            elif kind is ColumnChangeKind.RENAME:
                columns[place] = replace(columns[place], name=name)
                continue
            else:  # MODIFY, CHANGE: in place, unless FIRST or AFTER
                del columns[place]
            at = _position(columns, column, place)
            if name not in now or at is None:
                missing.append(name)
                continue
            columns.insert(at, now[name])
            defined.append(column)
        if missing:
            if strict or not self._names_logged(statement):
                raise SchemaChangeError(
                    f"{statement.ddl.statement!r} at {statement.offset} defines the column(s) {missing} of "
                    f"{change.table}, which it no longer has or places after a column it lacks (it changed again "
                    f"since): the stream cannot know the columns in between to keep the replica exact. Nothing past "
                    f"it is committed: re-snapshot {change.table}"
                    + (" (or set schema_change_behavior to 'try_evolve' or 'lenient')" if strict else
                       f"; {_NAMES_NEEDED}"))
            return self._server_schema(old, current)
        self._check_definitions(defined, now, change, statement)
        renamed = {c.name: c.name_after for c in change.columns if c.new_name}
        names = {c.name for c in columns}
        key = tuple(renamed.get(k, k) for k in old.primary_key)  # a key change is no column change (cdc.ddl)
        key, index = (key, old.key_index) if set(key) <= names else (current.primary_key, current.key_index)
        chunk_key = renamed.get(old.chunk_key, old.chunk_key)
        return TableSchema(current.id, tuple(columns), key, chunk_key if chunk_key in names else "", index)

    def _check_definitions(self, defined: list[ColumnChange], now: dict[str, Column], change: TableChange,
                           statement: SchemaStatement) -> None:
        """Stop, when the table maps carry no names, if the server's definition of a column the DDL defines is not
        the DDL's (a later DDL changed it since) or the DDL's cannot be read: the rows between would be read by
        position with a type they do not have. With names, the next table map's names and types check them."""
        differ = [(c, now[c.name_after]) for c in defined
                  if c.definition is None or not c.definition.matches(now[c.name_after])]
        if not differ or self._names_logged(statement):
            return
        what = "; ".join(
            f"{column.name_after}: {column.definition or 'a definition the stream cannot read'} in the statement, "
            f"{server.column_type}" + (f" character set {server.charset} collate {server.collation}" if server.charset
                                       else "") + " on the server now"
            for column, server in differ)
        raise SchemaChangeError(
            f"{statement.ddl.statement!r} at {statement.offset} defines columns of {change.table} otherwise than the "
            f"server does now ({what}): a later statement changed them since, or the stream cannot read the "
            f"statement's definition, so it cannot know the type of these columns in the rows after it. Nothing "
            f"past it is committed: re-snapshot {change.table}; {_NAMES_NEEDED}")

    def _names_logged(self, statement: SchemaStatement) -> bool:
        """Whether the binlog's table maps name their columns around ``statement``: the reader's last map says,
        else (none read yet in this run) the server's setting now."""
        if statement.names_logged is not None:
            return statement.names_logged
        conn = self.config.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_row_metadata'")
                row = cur.fetchone()
        finally:
            conn.close()
        return row is not None and str(row[1]).upper() == "FULL"

    def _decode_with(self, target: Checkpoint, table: TableId, schema: TableSchema, statement: SchemaStatement,
                     applied: AppliedStatement) -> None:
        """From the DDL on, ``table``'s changes are decoded with ``schema``; under 'ignore' its lake keeps the
        columns it had (``Checkpoint.kept``), as far as they still identify its rows."""
        if self.behavior is SchemaChangeBehavior.IGNORE:
            kept = target.kept.setdefault(table, target.schemas[table])
            needed = kept.column_names if kept.keyless else kept.state_key
            lost = [c for c in needed if c not in schema.column_names]
            why = (f"it no longer has the columns {lost}, which its lake's rows are told apart by" if lost else
                   f"its rows are now told apart by {list(schema.state_key)}, not {list(kept.state_key)}"
                   if not kept.keyless and schema.state_key != kept.state_key else "")
            if why:
                raise SchemaChangeError(
                    f"{statement.ddl.statement!r} at {statement.offset} changes {table}: {why}, so "
                    f"schema_change_behavior 'ignore' cannot go on writing its changes as the columns its lake keeps. "
                    f"Nothing past it is committed: set schema_change_behavior to 'evolve', or re-snapshot {table}")
        target.schemas[table] = schema
        applied.captured.append(schema)
        self._record(applied, target, table, ChangeKind.SCHEMA_CHANGE, statement)

    def _server_schema(self, old: TableSchema, current: TableSchema | None = None) -> TableSchema:
        """The server's schema of ``old``'s table now, split on ``old``'s chunk key while it has it."""
        current = current or self.reload_schema(old.id)
        return replace(current, chunk_key=old.chunk_key if old.chunk_key in current.column_names else "")

    def _stop(self, table: TableId, statement: SchemaStatement, target: Checkpoint, applied: AppliedStatement) -> None:
        chunks = floored(target.chunks.pop(table, []), statement.offset)
        target.stopped[table] = StoppedTable(target.schemas.pop(table), statement.offset, chunks,
                                             statement.ddl.statement)
        applied.released.append(table)
        _log.warning("%s: %r at %s: its capture stops; its replica stays as of there", table,
                     statement.ddl.statement, statement.offset)

    def _capture(self, table: TableId, statement: SchemaStatement, target: Checkpoint,
                 applied: AppliedStatement, exact: bool, renamed_from: TableId | None) -> list[TableId]:
        """Capture ``table`` from the DDL on, again or for the first time (a name ``selection`` matches): created
        (empty) or renamed to its name from ``renamed_from``. Renamed from a table captured up to this DDL (an
        online schema change tool's cut-over moving the original away: ``RENAME TABLE t TO _t_del``), it is
        that table under another name: its schema and rows are its replica's (``_copy_current``), whether the
        server still has it or not. Renamed from a table not captured (the tool's ghost table: ``_t_gho TO
        t``), its schema is the server's and its rows are read again (``_reread``). A table the server no
        longer has (the stream reads the DDL after a later DROP or RENAME of it) is not captured then: neither
        its columns nor its rows can be known. The stream goes on through the binlog, where the statement
        that removed it comes later; a stopped replica of the name stays as it was."""
        if not exact:
            _log.warning("%s: %r at %s brings it back, but schema_change_behavior %s does not capture it again: "
                         "its replica stays as it was", table, statement.ddl.statement, statement.offset,
                         self.behavior.value)
            return []
        moved = target.stopped.get(renamed_from) if renamed_from is not None else None
        if moved is not None and moved.offset == statement.offset:  # captured up to this statement
            schema = replace(moved.schema, id=table)
        else:
            moved = None
            try:
                schema = self.reload_schema(table)
            except TableNotSupportedError as exc:
                _log.warning("%s: %r at %s makes it, but %s: the server no longer has it (a later statement "
                             "dropped or renamed it away, as online schema change tools do with their tables), "
                             "so it is not captured and its changes until then are passed over", table,
                             statement.ddl.statement, statement.offset, exc)
                return []
        old = target.stopped.pop(table, None)
        if schema.keyless and old is None and moved is None:
            raise SchemaChangeError(
                f"{statement.ddl.statement!r} at {statement.offset} makes {table}, which the stream's tables "
                f"({self.selection.describe()}) match, but it has no key (no primary key, no UNIQUE index on NOT NULL "
                f"columns) to capture it by while streaming. Nothing past it is committed: give it a key, or leave "
                f"it out with exclude_tables")
        target.schemas[table] = schema
        target.chunks.pop(table, None)
        applied.captured.append(schema)
        # created: empty from here on, every row before is gone; renamed in: its rows copied or read again
        self._record(applied, target, table, ChangeKind.TRUNCATE if renamed_from is None else ChangeKind.SCHEMA_CHANGE,
                     statement)
        _log.warning("%s: %r at %s: captured %s from here on", table, statement.ddl.statement, statement.offset,
                     "for the first time" if old is None else "again")
        if moved is not None:
            assert renamed_from is not None  # moved is renamed_from's stopped entry
            target.history_from[table] = self._copy_current(renamed_from, schema, target.seq, target.offset)
            return []
        if renamed_from is None:
            reshape_current(self.lake.table(table).current, schema, {}, target.seq, empty=True)
            target.history_from[table] = target.offset
            return []
        _refuse_keyless_reread(schema, statement)
        return [table]

    def _copy_current(self, source: TableId, schema: TableSchema, seq: int, at: BinlogOffset) -> BinlogOffset:
        """Make ``schema``'s current table a copy of ``source``'s (merged up to the DDL that renamed one to the
        other), in one commit at batch ``seq``, read whole as ``_reread``'s rows are; returns ``at``, from
        where its as-of history is whole (the copy's own commit says so on a killed run's retry)."""
        current = self.lake.table(schema.id).current
        rows = self.lake.table(source).current.open()
        if rows is None:  # nothing merged yet: empty, as a created table
            reshape_current(current, schema, {}, seq, empty=True)
            return at
        return replace_current(current, seq, lambda: (rows.scan().read_all(), at))

    def _reread(self, table: TableId, statement: SchemaStatement, seq: int) -> BinlogOffset:
        """Replace ``table``'s current table with every row read again, in one commit at batch ``seq``; returns
        the highest high watermark of its chunks (from where its as-of history is whole again)."""
        return reread_current(self.config, self.lake, table, self.reload_schema, seq, self.reread_server_id())

    @staticmethod
    def _record(applied: AppliedStatement, target: Checkpoint, table: TableId, kind: ChangeKind,
                statement: SchemaStatement) -> None:
        """The DDL's changelog record of ``table``, with the columns of its lake tables."""
        schema = target.schema_of(table)
        assert schema is not None  # the table is captured or stopped in target
        record = table_event_record(schema, kind, statement.ddl.statement, statement.offset, statement.ts_ms)
        applied.records.setdefault(table, []).append(record)


def _position(columns: list[Column], change: ColumnChange, default: int) -> int | None:
    """Where ``change`` puts its column among ``columns`` (the others, in order): first, after the column it names
    (None if there is none of that name), else at ``default`` (ADD: last; MODIFY: its place)."""
    if change.first:
        return 0
    if change.after is None:
        return default
    return next((i + 1 for i, c in enumerate(columns) if c.name == change.after), None)


def _refuse_keyless_reread(schema: TableSchema, statement: SchemaStatement) -> None:
    """A DDL that gives rows values without row events is followed by reading the rows again at new high
    watermarks; the stream's changes between the DDL and those watermarks then lose to the re-read rows by
    their order keys. A keyless table's changes count without order keys (``lake.write.multiset``): they would
    count twice, so the stream stops before anything past the DDL is committed."""
    if schema.keyless:
        raise SchemaChangeError(
            f"{statement.ddl.statement!r} at {statement.offset} gave the rows of {schema.id} values the binlog does "
            f"not carry, which the stream follows by reading the rows again; {schema.id} has no key (its rows are "
            f"a multiset of whole images, whose later changes cannot be told apart from the re-read rows). Nothing "
            f"past it is committed: "
            f"re-snapshot {schema.id} (delete its folder in the lake and run the DAG again), or set "
            f"schema_change_behavior='lenient' to keep the rows as they are"
        )
