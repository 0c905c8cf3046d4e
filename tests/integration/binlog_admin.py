"""The test server's binlog as an administrator sees it: its files, a purge, a global's value.

Shared by the tests that purge or rotate the binlog under a stream (the server is the whole session's:
they purge only up to its newest file, which no other test's lake needs).
"""

from __future__ import annotations

import time
from typing import Any


def binlog_files(admin: Any) -> list[str]:
    with admin.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [row[0] for row in cur.fetchall()]


def purge_to_newest(admin: Any) -> str:
    """Rotate, then purge every binlog file but the new one; its name. The server keeps a file a binlog
    dump still reads (a stream's connection closed a moment ago), so the purge is tried again a while."""
    with admin.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        newest = binlog_files(admin)[-1]
        deadline = time.monotonic() + 10
        while True:
            cur.execute("PURGE BINARY LOGS TO %s", (newest,))
            if binlog_files(admin) == [newest] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert binlog_files(admin) == [newest]
    return newest


def global_value(admin: Any, name: str) -> Any:
    with admin.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{name}")
        return cur.fetchone()[0]
