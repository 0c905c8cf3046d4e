"""The commit-visibility race: every transaction before the low watermark must be visible to a
SELECT that starts after it.

It cannot be staged deterministically on a release MariaDB (no debug sync points to hold a commit
between its binlog write and its engine commit), so this test hunts for it: writers commit single
inserts as fast as they can while the low watermark is taken again and again, each followed at
once by a SELECT on another connection. Afterwards the binlog tells which inserts were before each
watermark; all of them must be in that SELECT. The consistent-snapshot watermark must never miss
one. Flink CDC's ``SHOW MASTER STATUS`` watermark is measured the same way and only reported.
"""

from __future__ import annotations

import bisect
import threading
from itertools import pairwise
from typing import Any

import numpy as np

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.changes import ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import (
    BinlogOffset,
    read_current_offset,
    read_snapshot_offset,
)
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo

TRIALS = 150
WINDOW = 400  # ids below (highest visible id - WINDOW) are certainly committed: not checked


def snapshot_watermark(conn: Any) -> BinlogOffset:
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        offset = read_snapshot_offset(conn)
        cur.execute("COMMIT")
    return offset


def missed_inserts(inserts: list[tuple[BinlogOffset, int]], ids: np.ndarray, low: BinlogOffset, top: int,
                   visible: set[int]) -> int:
    """How many ``inserts`` (offset, id; in binlog order, ``ids`` their ids) before ``low`` with an id above
    ``top - WINDOW`` are not in ``visible``. Those before ``low`` are a prefix of the binlog order, found by
    bisection with the offsets' own order, and the ids above the window are picked out as an array: a trial
    costs about its window rather than a pass over every insert in Python (which, the writers being faster than
    the trials on a loaded machine, grew to most of the test's time)."""
    before = bisect.bisect_left(inserts, low, key=lambda insert: insert[0])
    above = ids[:before][ids[:before] > top - WINDOW]
    return sum(1 for id_ in above.tolist() if id_ not in visible)


def test_nothing_before_the_snapshot_watermark_is_invisible(mariadb_server, admin, cdc_conn, database) -> None:
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE race (id BIGINT AUTO_INCREMENT PRIMARY KEY, w INT)")
    start = read_current_offset(cdc_conn, ServerInfo.read(cdc_conn))
    stopping = threading.Event()

    def write(n: int) -> None:
        conn = mariadb_server.admin_connect(database)
        with conn.cursor() as cur:
            while not stopping.is_set():
                cur.execute("INSERT INTO race (w) VALUES (%s)", (n,))

    writers = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(3)]
    for w in writers:
        w.start()
    control, reader = mariadb_server.cdc_connect(database), mariadb_server.cdc_connect(database)
    server = ServerInfo.read(control)
    trials: list[tuple[str, BinlogOffset, int, set[int]]] = []
    try:
        for i in range(TRIALS):
            kind = "snapshot" if i % 2 == 0 else "master status"
            low = snapshot_watermark(control) if kind == "snapshot" else read_current_offset(control, server)
            with reader.cursor() as cur:
                cur.execute("SELECT MAX(id) FROM race")
                top = cur.fetchone()[0] or 0
                cur.execute("SELECT id FROM race WHERE id > %s", (top - WINDOW,))
                trials.append((kind, low, top, {r[0] for r in cur.fetchall()}))
    finally:
        stopping.set()
        for w in writers:
            w.join(10)
    end = read_current_offset(control, server)

    table = TableId(database, "race")
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    inserts = [
        (r.offset, r.values[0])
        for r in BinlogReader(config.replication_settings(), 5430, config.server_id,
                              {table: load_table_schema(cdc_conn, table)}, start,
                              reload_schema=lambda t: load_table_schema(cdc_conn, t), stop=end)
        if isinstance(r, ChangeRecord)
    ]
    assert len(inserts) > 1000
    assert all(a <= b for (a, _), (b, _) in pairwise(inserts)), "the reader's offsets in binlog order"
    ids = np.fromiter((id_ for _, id_ in inserts), dtype=np.int64, count=len(inserts))
    missed = {"snapshot": 0, "master status": 0}
    for kind, low, top, visible in trials:
        missed[kind] += missed_inserts(inserts, ids, low, top, visible)
    print(f"\ninserts before the watermark but invisible to the SELECT after it: {missed} "
          f"({len(inserts)} inserts, {TRIALS} trials)")
    assert missed["snapshot"] == 0
