"""Row decoding: the row events of ``bench.orders`` (inserts, then updates in 10,000-row transactions)
iterated by raw mysql-replication (``event.rows``, the baseline), by our ``BinlogReader`` with its
row decoder (a record per image), and by the stream's columnar path (``BinlogReader.rows`` and
``rows_table``: Arrow columns per 100,000 images), in one run; for reference also ``BinlogReader``
leaving rows to mysql-replication. ``--profile`` then shows where the columnar path spends its time.

    .venv/bin/python -m bench.row_decoder_vs_replication [--rows 100000] [--events 200000] [--profile]

Starts a throwaway MariaDB of its own.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable

from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader, ChangeRows
from airflow_provider_mysqlcdc.cdc.changes import ChangeKind, ChangeRecord
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.lake.changelog import rows_table
from bench.common.server import load_orders, raw_replication_rows, throwaway_server

TRANSACTION_ROWS = 10_000
# one per row event: an update's -U/+U count once
ROW_EVENT_KINDS = frozenset({ChangeKind.INSERT, ChangeKind.UPDATE_AFTER, ChangeKind.DELETE})


def reader_iteration(config: ConnectionConfig, start: BinlogOffset, schema: TableSchema, decode_rows: bool) -> int:
    reader = BinlogReader(config.replication_settings(), 5562, config.server_id, {schema.id: schema}, start,
                          reload_schema=lambda t: schema, decode_rows=decode_rows)
    return sum(1 for item in reader if isinstance(item, ChangeRecord) and item.op in ROW_EVENT_KINDS)


def columnar(config: ConnectionConfig, start: BinlogOffset, schema: TableSchema) -> int:
    """Row events decoded into the lake's Arrow rows, a table per 100,000 images (the stream's batches)."""
    reader = BinlogReader(config.replication_settings(), 5563, config.server_id, {schema.id: schema}, start,
                          reload_schema=lambda t: schema)
    events: list[ChangeRows] = []
    row_events = images = 0

    def flush() -> int:
        table = rows_table(ImageBuffer.of(schema, events))  # the stream's way: a table's events gathered, then read
        events.clear()
        return sum(1 for op in table.column("_op").to_pylist() if op in ROW_EVENT_KINDS)

    for item in reader.rows():
        if isinstance(item, ChangeRows):
            events.append(item)
            images += item.count
            if images >= 100_000:
                row_events, images = row_events + flush(), 0
    return row_events + flush()


def timed(run: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    events = run()
    return events, events / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rows inserted (one row event each)")
    parser.add_argument("--events", type=int, default=200_000, help="update row events after the inserts")
    parser.add_argument("--port", type=int, default=33089)
    parser.add_argument("--profile", action="store_true", help="profile the decoding reader afterwards")
    args = parser.parse_args(argv)
    with throwaway_server(args.port) as server:
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        control = config.connect()
        start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            load_orders(cur, args.rows)
            updates = 0
            while updates < args.events:
                low = updates % args.rows
                high = min(low + TRANSACTION_ROWS, args.rows, low + args.events - updates)
                cur.execute("UPDATE orders SET amount = amount + 1 WHERE id > %s AND id <= %s", (low, high))
                updates += high - low
        schema = load_table_schema(control, TableId("bench", "orders"))
        print(f"wrote {args.rows:,} insert and {updates:,} update row events")

        raw, raw_rate = timed(lambda: raw_replication_rows(config, start, 5561))
        ours, ours_rate = timed(lambda: reader_iteration(config, start, schema, decode_rows=True))
        arrow, arrow_rate = timed(lambda: columnar(config, start, schema))
        old, old_rate = timed(lambda: reader_iteration(config, start, schema, decode_rows=False))
        for name, events, rate in (("raw mysql-replication event.rows", raw, raw_rate),
                                   ("BinlogReader, row decoder", ours, ours_rate),
                                   ("BinlogReader.rows, Arrow columns", arrow, arrow_rate),
                                   ("BinlogReader, mysql-replication rows", old, old_rate)):
            print(f"{name:38} {events:>9,} row events {rate:>10,.0f} row events/s")
        print(f"row decoder / raw mysql-replication: {ours_rate / raw_rate:.1f}x, "
              f"Arrow columns / raw: {arrow_rate / raw_rate:.1f}x")

        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(columnar, config, start, schema)
            pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
