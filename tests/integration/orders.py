"""``orders``: a table of the test database to snapshot and stream (``create_orders``), and a writer that
changes it (``OrdersWriter``)."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from tests.writers import TransactionWriter

ROWS = 6_000


def create_orders(admin: Any, rows: int = ROWS) -> None:
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS orders")
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note TEXT)")
        cur.execute(f"INSERT INTO orders SELECT seq, seq % 97, seq / 100, IF(seq % 5 = 0, NULL, CONCAT('n', seq)) "
                    f"FROM seq_1_to_{rows}")
        cur.execute("ANALYZE TABLE orders")
        cur.fetchall()


class OrdersWriter(TransactionWriter):
    """Random inserts, updates, deletes and delete+reinsert of ``orders``; with ``bulk_every``, every
    n-th transaction also updates 500 keys of 1..3000 at once (a transaction bigger than a batch)."""

    pause = 0.002
    bulk_every = 0

    def write(self, cur: Any, rnd: random.Random) -> None:
        key = rnd.randint(-50, 60_000)
        cur.execute("BEGIN")
        cur.execute("INSERT INTO orders VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE amount = amount + 1",
                    (key, key % 7, Decimal(key) / 100, f"w{key}"))
        cur.execute("UPDATE orders SET note = %s WHERE id = %s", (f"u{rnd.random():.5f}", key + 3))
        cur.execute("DELETE FROM orders WHERE id = %s", (key + 11,))
        if self.bulk_every and self.count % self.bulk_every == 0:
            low = rnd.randint(1, 2500)
            cur.execute("UPDATE orders SET customer = customer + 1 WHERE id BETWEEN %s AND %s", (low, low + 499))
        cur.execute("COMMIT")
