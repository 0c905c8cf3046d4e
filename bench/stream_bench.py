"""The binlog stream into the lake: 1,000,000 row events (updates in 10,000-row transactions) read
by raw mysql-replication iteration (the baseline) and by our stream (filter, convert, Parquet,
checkpoint), in one run; then the commit-to-lake latency of single-row commits on an idle server.

    .venv/bin/python -m bench.stream_bench [--rows 200000] [--events 1000000]

Starts a throwaway MariaDB of its own.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.offset import read_current_offset
from airflow_provider_mysqlcdc.cdc.schema import TableId
from airflow_provider_mysqlcdc.cdc.server_info import ServerInfo
from airflow_provider_mysqlcdc.lake.stream_batches import stream_batches
from airflow_provider_mysqlcdc.lake.stream_store import Checkpoint, StreamStore
from bench.server import bench_arguments, load_orders, throwaway_server

TRANSACTION_ROWS = 10_000


def raw_iteration(config: ConnectionConfig, start: object) -> int:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import UpdateRowsEvent

    stream = BinLogStreamReader(connection_settings=config.replication_settings(), server_id=5551,
                                log_file=start.file, log_pos=start.position, resume_stream=True,  # type: ignore[attr-defined]
                                blocking=False, only_events=[UpdateRowsEvent])
    rows = sum(len(event.rows) for event in stream)
    stream.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv, port=33088, events=True)
    args.rows = min(args.rows, 200_000)
    with throwaway_server(args.port) as server:
        admin = server.admin_connect("bench")
        with admin.cursor() as cur:
            load_orders(cur, args.rows)
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        control = config.connect()
        info = ServerInfo.read(control)
        table = TableId("bench", "orders")
        schema = load_table_schema(control, table)
        start = read_current_offset(control, info, with_gtid=False)
        events = 0
        with admin.cursor() as cur:
            while events < args.events:
                low = events % args.rows
                cur.execute("UPDATE orders SET amount = amount + 1 WHERE id > %s AND id <= %s",
                            (low, low + TRANSACTION_ROWS))
                events += TRANSACTION_ROWS
        print(f"wrote {events:,} row events in {events // TRANSACTION_ROWS} transactions")

        started = time.perf_counter()
        raw = raw_iteration(config, start)
        raw_rate = raw / (time.perf_counter() - started)

        store = StreamStore(tempfile.mkdtemp(prefix="stream-bench-"))
        checkpoint = Checkpoint(0, start, {table: schema})
        store.commit(checkpoint, {})
        started = time.perf_counter()
        written = sum(sum(r.rows.values()) for r in stream_batches(
            config, 5552, store, checkpoint, control, lambda t: load_table_schema(control, t)))
        ours_rate = written / (time.perf_counter() - started)
        print(f"{'raw mysql-replication iteration':36} {raw:>9,} rows {raw_rate:>9,.0f} rows/s")
        print(f"{'our stream into the lake':36} {written:>9,} rows {ours_rate:>9,.0f} rows/s "
              f"({written // 2:,} updates as -U/+U pairs)")
        print(f"ours / raw (row events): {ours_rate / 2 / raw_rate:.2f}x")

        latencies = measure_latency(config, store, checkpoint, control, admin)
        q = statistics.quantiles(latencies, n=20)
        print(f"idle commit-to-lake latency over {len(latencies)} commits: p50 {statistics.median(latencies):.2f} s, "
              f"p95 {q[18]:.2f} s (stream polling every 0.2 s)")
    return 0


def measure_latency(config: ConnectionConfig, store: StreamStore, checkpoint: Checkpoint, control: object,
                    admin: object) -> list[float]:
    stop = threading.Event()

    def follow() -> None:
        conn = config.connect()
        while not stop.is_set():
            for _ in stream_batches(config, 5553, store, checkpoint, conn, lambda t: load_table_schema(conn, t)):
                pass
            time.sleep(0.2)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    latencies = []
    for i in range(30):
        with admin.cursor() as cur:  # type: ignore[attr-defined]
            committed = time.perf_counter()
            cur.execute("UPDATE orders SET note = %s WHERE id = %s", (f"latency {i}", i + 1))
        target = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
        while True:
            current = store.read_checkpoint()
            if current is not None and not current.offset < target:
                latencies.append(time.perf_counter() - committed)
                break
            time.sleep(0.02)
        time.sleep(0.3)
    stop.set()
    thread.join()
    return latencies


if __name__ == "__main__":
    sys.exit(main())
