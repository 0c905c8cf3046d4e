"""Threads that commit to the test MariaDB while the code under test reads it: the concurrent source a
snapshot, a stream or a verification must stay exact under.

``TransactionWriter`` is the loop (a connection of its own, a seeded random generator, a count of the
transactions committed, three ways to stop); a test's writer says only what one transaction does.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any


class TransactionWriter(threading.Thread):
    """Commits one transaction of ``write`` after another, ``pause`` seconds apart, until ``stop()``, for
    ``seconds``, or until ``until()`` is true; ``count`` says how many it committed, ``error`` what
    stopped it otherwise."""

    pause = 0.0

    def __init__(self, server: Any, database: str, seconds: float = math.inf, seed: int = 0,
                 until: Callable[[], bool] | None = None) -> None:
        super().__init__(daemon=True)
        self.conn, self.seed, self.count = server.admin_connect(database), seed, 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        deadline = time.monotonic() + seconds
        self.until = until or (lambda: time.monotonic() >= deadline)

    def run(self) -> None:
        rnd = random.Random(self.seed)
        try:
            with self.conn.cursor() as cur:
                while not self.until() and not self.stopping.is_set():
                    self.write(cur, rnd)
                    self.count += 1
                    self.stopping.wait(self.pause)  # after the write: the first one comes at once
        except BaseException as exc:  # kept for the test to assert on, and reported by the thread
            self.error = exc
            raise
        finally:  # a failed statement leaves its transaction open: closing rolls it back and frees the tables
            self.conn.close()

    def write(self, cur: Any, rnd: random.Random) -> None:
        raise NotImplementedError

    def stop(self, timeout: float | None = None) -> None:
        self.stopping.set()
        self.join(timeout)


class KeyValueWriter(TransactionWriter):
    """Updates of ``v``, deletes and inserts of ``(id, v)`` in ``table`` of about ``rows`` rows, a transaction of
    the three at a time, until stopped: the columns no DDL of the schema-change tests removes."""

    pause = 0.003

    def __init__(self, server: Any, database: str, table: str, rows: int, seed: int = 7) -> None:
        super().__init__(server, database, seed=seed)
        self.table, self.rows = table, rows

    def write(self, cur: Any, rnd: random.Random) -> None:
        key = rnd.randint(1, self.rows + 300)
        cur.execute("BEGIN")
        cur.execute(f"UPDATE `{self.table}` SET v = v + 1 WHERE id = %s", (key,))
        cur.execute(f"DELETE FROM `{self.table}` WHERE id = %s", (key + 3,))
        cur.execute(f"INSERT IGNORE INTO `{self.table}` (id, v) VALUES (%s, %s)", (key + 5, key))
        cur.execute("COMMIT")


class Ticker(TransactionWriter):
    """Inserts into a table of its own every 0.1 s: the binlog moves, as on a live server, so a stream's
    checkpoint passes each verified chunk's high watermark."""

    pause = 0.1

    def __init__(self, server: Any, database: str) -> None:
        super().__init__(server, database)
        with self.conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS ticks (id INT AUTO_INCREMENT PRIMARY KEY)")

    def write(self, cur: Any, rnd: random.Random) -> None:
        cur.execute("INSERT INTO ticks VALUES ()")
