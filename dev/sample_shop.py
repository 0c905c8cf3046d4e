"""The sample ``shop`` database of the quickstart: a few hundred thousand rows over three key kinds.

``orders`` has a BIGINT auto-increment key (even split), ``customers`` an INT key with gaps, and
``products`` a ``utf8mb4_general_ci`` string key with mixed case and accents (uneven split, where
collation matters). Rows come from MariaDB's sequence engine, so loading takes seconds.

    python dev/sample_shop.py --socket .local/mariadb/mysqld.sock --orders 300000
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time

import pymysql

SCHEMA = [
    "CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
    """CREATE TABLE shop.customers (
        id INT UNSIGNED PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200),
        country CHAR(2) NOT NULL,
        created_at DATETIME(3) NOT NULL
    )""",
    """CREATE TABLE shop.products (
        sku VARCHAR(40) COLLATE utf8mb4_general_ci PRIMARY KEY,
        title VARCHAR(200) NOT NULL,
        price DECIMAL(12,2) NOT NULL,
        stock INT NOT NULL
    )""",
    """CREATE TABLE shop.orders (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        customer_id INT UNSIGNED NOT NULL,
        sku VARCHAR(40) NOT NULL,
        quantity SMALLINT NOT NULL,
        amount DECIMAL(12,2) NOT NULL,
        status ENUM('new','paid','shipped','cancelled') NOT NULL,
        ordered_at TIMESTAMP(6) NOT NULL,
        note TEXT NULL
    )""",
]

# Rows derived from the sequence number so every load gives the same data.
LOAD = [
    """INSERT INTO shop.customers
       SELECT seq * 3, CONCAT(ELT(1 + seq % 5, 'Ana', 'Björn', 'Chloé', 'Dmitri', 'Eun-ji'), ' #', seq),
              IF(seq % 7 = 0, NULL, CONCAT('c', seq, '@example.com')),
              ELT(1 + seq % 4, 'DE', 'FR', 'KR', 'US'),
              TIMESTAMP('2024-01-01') + INTERVAL seq MINUTE
       FROM seq_1_to_{customers}""",
    """INSERT INTO shop.products
       SELECT CONCAT(ELT(1 + seq % 4, 'sku-', 'SKU-', 'Sku-é', 'ſku-'), LPAD(seq, 6, '0')),
              CONCAT('Product ', seq, IF(seq % 11 = 0, ' 🚀', '')),
              ROUND(1 + (seq * 37 % 10000) / 100, 2), seq % 500
       FROM seq_1_to_{products}""",
    """INSERT INTO shop.orders (customer_id, sku, quantity, amount, status, ordered_at, note)
       SELECT 3 * (1 + seq % {customers}), CONCAT('sku-', LPAD(1 + seq % {products}, 6, '0')),
              1 + seq % 5, ROUND((seq * 7919 % 100000) / 100, 2), 1 + seq % 4,
              TIMESTAMP('2025-01-01') + INTERVAL seq SECOND,
              IF(seq % 10 = 0, CONCAT('gift note ', seq), NULL)
       FROM seq_1_to_{orders}""",
]


def load(conn: pymysql.connections.Connection, orders: int, customers: int, products: int) -> None:
    """Create ``shop`` afresh with the given row counts."""
    with conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS shop")
        for statement in SCHEMA:
            cur.execute(statement)
        cur.execute("USE shop")  # the sequence tables (seq_1_to_N) resolve in the current database
        for statement in LOAD:
            cur.execute(statement.format(orders=orders, customers=customers, products=products))
        cur.execute("ANALYZE TABLE shop.customers, shop.products, shop.orders")
        cur.fetchall()


class ShopWriter(threading.Thread):
    """A light load while the pipeline runs: new orders, paid and shipped ones, cancelled ones deleted,
    price and stock changes; ``per_second`` small transactions until ``stop`` is set."""

    def __init__(self, conn: pymysql.connections.Connection, per_second: float = 50, seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.conn, self.pause, self.rnd = conn, 1 / per_second, random.Random(seed)
        self.stop, self.transactions = threading.Event(), 0

    def run(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT MAX(id) FROM shop.orders")
            (top,) = cur.fetchone()
            while not self.stop.wait(self.pause):
                order = self.rnd.randint(1, top or 1)
                cur.execute("BEGIN")
                cur.execute(
                    "INSERT INTO shop.orders (customer_id, sku, quantity, amount, status, ordered_at) "
                    "VALUES (%s, %s, %s, %s, 'new', NOW(6))",
                    (3 * self.rnd.randint(1, 1000), f"sku-{self.rnd.randint(1, 999):06d}", self.rnd.randint(1, 5),
                     round(self.rnd.uniform(1, 500), 2)),
                )
                cur.execute("UPDATE shop.orders SET status = IF(status = 'new', 'paid', 'shipped'), note = %s "
                            "WHERE id = %s", (f"updated {time.strftime('%H:%M:%S')}", order))
                if self.rnd.random() < 0.2:
                    cur.execute("DELETE FROM shop.orders WHERE id = %s", (order + 1,))
                if self.rnd.random() < 0.1:
                    cur.execute("UPDATE shop.products SET price = price + 0.01, stock = stock - 1 "
                                "WHERE sku = %s", (f"SKU-{self.rnd.randint(1, 999):06d}",))
                cur.execute("COMMIT")
                self.transactions += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True, help="the server's socket (root over the socket loads)")
    parser.add_argument("--orders", type=int, default=300_000)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--products", type=int, default=5_000)
    args = parser.parse_args(argv)
    conn = pymysql.connect(unix_socket=args.socket, user="root", autocommit=True, charset="utf8mb4")
    load(conn, args.orders, args.customers, args.products)
    print(f"loaded shop: {args.orders} orders, {args.customers} customers, {args.products} products")
    return 0


if __name__ == "__main__":
    sys.exit(main())
