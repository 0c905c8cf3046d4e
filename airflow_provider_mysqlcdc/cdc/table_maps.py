"""Table map events parsed once per table definition, not once per transaction.

The binlog repeats a table's TABLE_MAP event before its rows events in every transaction, and
mysql-replication parses each one anew: column objects, the optional metadata (names, charsets,
keys) and a ``Table`` whose primary key it finds by building a dict per column. When the writes are
spread over many tables (a few rows per table per transaction), that parse costs more than reading the
rows: measured in a profile of the stream over 200 tables (bench.stream_spread), half of the stream's
time went to table maps.

A table map's parse depends only on its bytes after the event header, the reader's options (its table
filters are applied again to a cached table) and the server's flavour, except where the column names
are not in the event (``binlog_row_metadata`` other than FULL: mysql-replication then asks
``information_schema``, which may have changed). So the state a parse leaves on the event is kept by
those bytes and options (only for events that carried their column names), and an equal table map
later gets that state without being parsed: the same ``Table`` and column objects, which
``RowDecoders`` and ``BinlogReader`` then also recognise by identity.
A DDL changes the table map's bytes, so a changed table is parsed again.

mysql-replication chooses the event's class by type code and checks it against the reader's allowed
classes by identity, so a subclass cannot stand in for ``TableMapEvent`` without breaking other
readers; ``install`` wraps ``TableMapEvent.__init__`` itself instead (once per process), for every
reader alike, and the wrapper falls back to the full parse for whatever it cannot recognise.
"""

from __future__ import annotations

import threading
from typing import Any

from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.row_event import TableMapEvent

MAX_ENTRIES = 4096
"""Table definitions kept (tables × their versions): the cache starts over when it would hold more."""

_HEADER = 20
"""The packet's OK byte and the 19-byte event header, which the packet wrapper reads before the event."""
_parse = TableMapEvent.__init__
_cache: dict[tuple[Any, ...], dict[str, Any]] = {}
_installed = threading.Lock()


def _key(from_packet: Any, event_size: int, ctl_connection: Any, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The event's body (after the header the packet wrapper read) with what else its parse depends on
    but the table filters (``_passes``); None where the body cannot be told (the wrapper holds bytes
    pushed back)."""
    packet = getattr(from_packet, "packet", None)
    if packet is None or getattr(from_packet, "read_bytes", None) != 0:  # read nothing past the header yet
        return None
    body = packet.get_bytes(_HEADER, event_size)
    if len(body) != event_size:
        return None
    return (bytes(body), kwargs.get("freeze_schema"), kwargs.get("optional_meta_data"), kwargs.get("mysql_version"),
            ctl_connection._get_dbms())


def _passes(state: dict[str, Any], kwargs: dict[str, Any]) -> bool:
    """Whether the reader's table filters take the cached table (as mysql-replication's parse decides it:
    a table map filtered out is not processed, and its rows events are skipped)."""
    schema, table = state["schema"], state["table"]
    only_tables, ignored_tables = kwargs.get("only_tables"), kwargs.get("ignored_tables")
    only_schemas, ignored_schemas = kwargs.get("only_schemas"), kwargs.get("ignored_schemas")
    return ((only_tables is None or table in only_tables) and (ignored_tables is None or table not in ignored_tables)
            and (only_schemas is None or schema in only_schemas)
            and (ignored_schemas is None or schema not in ignored_schemas))


def _init(self: Any, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any, **kwargs: Any) -> None:
    key = _key(from_packet, event_size, ctl_connection, kwargs)
    state = _cache.get(key) if key is not None else None
    if state is None or not _passes(state, kwargs):
        _parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        if key is not None and self._processed and _names_in_event(self, kwargs):
            if len(_cache) >= MAX_ENTRIES:
                _cache.clear()
            _cache[key] = dict(vars(self))
        return
    # the header's fields are this event's (its packet, time, checksum check); the rest is the parse's
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
    own = vars(self)
    own.update({k: v for k, v in state.items() if k not in own})
    table_map[self.table_id] = self.table_obj


def _names_in_event(event: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the column names came from the event's optional metadata, not from a query."""
    metadata = getattr(event, "optional_metadata", None)
    return bool(kwargs.get("optional_meta_data")) and metadata is not None and bool(metadata.column_name_list)


def install() -> None:
    """Wrap ``TableMapEvent.__init__`` with the cache (idempotent)."""
    with _installed:
        if TableMapEvent.__init__ is not _init:
            TableMapEvent.__init__ = _init
