"""mysql-replication's decoding of the rows events the row decoder does not read.

The reader reads every event itself (``binlog.dump``, ``binlog.events``); only the values of some
rows events are left to mysql-replication: the pre-5.6 temporal formats, a table map without FULL
metadata, row images that are not FULL, and every event of a reader built with ``decode_rows=False``
(the reference ``test_type_matrix`` compares the row decoder with). Those events are the same typed
``Rows`` events as the others, in the same loop; ``LegacyRows.rows`` hands their packets, with their
table map's, to mysql-replication's event classes, which parse them as its own stream would have. That
keeps one loop and one notion of position, and the fallback costs nothing where it is not taken.

mysql-replication's events want a control connection: this version of it only reads its character
set and asks it which server it is (column names come from ``information_schema`` only with its
column-name cache on, which the reader never turned on), so it is a pymysql connection object that
never connects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pymysql
from pymysql.protocol import MysqlPacket
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from airflow_provider_mysqlcdc.cdc.binlog.events import Format, Rows, TableMap
from airflow_provider_mysqlcdc.exceptions import RowDecodeError

_EVENTS = frozenset({TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent})
_TYPE_CODES = frozenset({23, 24, 25, 30, 31, 32})  # their WRITE/UPDATE/DELETE_ROWS events, v1 and v2


class LegacyRows:
    """Decodes rows events with mysql-replication (see the module's docstring)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = dict(settings)
        self._control: Any = None  # made on first use: most readers never need it
        self._tables: dict[TableMap, Any] = {}  # mysql-replication's table of each table map

    def rows(self, event: Rows, fmt: Format) -> list[dict[str, Any]]:
        """The event's rows as mysql-replication decodes them: dicts of ``values`` and ``none_sources``
        (``before_``/``after_`` for an update)."""
        if event.type_code not in _TYPE_CODES:
            raise RowDecodeError(f"the rows event of type {event.type_code} ending at binlog position {event.log_pos} "
                                 f"has a column of {event.table_map.table} that the row decoder does not read, and "
                                 f"mysql-replication does not read events of its type")
        if self._control is None:
            self._control = pymysql.connect(**self._settings, defer_connect=True)
        self._control._get_dbms = lambda: fmt.dbms  # what mysql-replication's stream sets on it
        checksum = len(event.data) > event.end
        table = self._tables.get(event.table_map)
        if table is None:
            if len(self._tables) >= 1024:
                self._tables.clear()
            table = self._decode(event.table_map.packet, {}, fmt, checksum).get_table()
            self._tables[event.table_map] = table
        decoded = self._decode(event.data, {event.table_map.table_id: table}, fmt, checksum)
        rows: list[dict[str, Any]] = decoded.rows
        return rows

    def _decode(self, data: bytes, tables: dict[int, Any], fmt: Format, checksum: bool) -> Any:
        wrapper = BinLogPacketWrapper(
            MysqlPacket(data, self._control.encoding), tables, self._control, fmt.version, checksum, _EVENTS,
            None, None, None, None, False, False, False, True, False,
            post_header_lengths=list(fmt.post_header_lengths) or None,
        )
        return wrapper.event
