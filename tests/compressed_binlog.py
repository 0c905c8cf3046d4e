"""MariaDB's compressed binlog (``log_bin_compress``) for a test, and a check that it really was.

The server is shared by the whole test session, so compression is turned on only around a test's
writes and the old global values are put back however the block ends. ``log_bin_compress_min_len``
goes down to its minimum (10 bytes), so that small rows and statements are compressed too; a test
then asks ``event_types_since`` whether the binlog holds compressed events, so that it cannot pass
with compression silently off.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

COMPRESSED_ROWS_EVENTS = frozenset({"Write_rows_compressed_v1", "Update_rows_compressed_v1",
                                    "Delete_rows_compressed_v1"})
PLAIN_ROWS_EVENTS = frozenset({"Write_rows_v1", "Update_rows_v1", "Delete_rows_v1"})


@contextlib.contextmanager
def compressed_binlog(server: Any, on: bool = True) -> Iterator[None]:
    """``log_bin_compress = ON`` (with the smallest minimum length) for the block; nothing if not ``on``."""
    if not on:
        yield
        return
    conn = server.admin_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.log_bin_compress, @@GLOBAL.log_bin_compress_min_len")
            was_on, min_len = cur.fetchone()
            cur.execute("SET GLOBAL log_bin_compress = ON, GLOBAL log_bin_compress_min_len = 10")
        try:
            yield
        finally:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL log_bin_compress = %s, GLOBAL log_bin_compress_min_len = %s",
                            (was_on, min_len))
    finally:
        conn.close()


def event_types_since(server: Any, file: str, position: int) -> Counter[str]:
    """How many events of each type (as SHOW BINLOG EVENTS names them) the binlog holds from
    ``file:position`` to its end, across files."""
    conn = server.admin_connect()
    counts: Counter[str] = Counter()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall() if row[0] >= file]
            for name in files:
                cur.execute(f"SHOW BINLOG EVENTS IN '{name}' FROM {position if name == file else 4}")
                counts.update(row[2] for row in cur.fetchall())
    finally:
        conn.close()
    return counts
