"""The snapshot's read over TLS beside the plain one: the same table, the same server, the same run.

One throwaway MariaDB with TLS enabled (certificates made with ``openssl``, ``dev/tls_certs.py``) but not
required, so a plain connection and a TLS one reach the same table. Each round reads every chunk with
the chunk reader (LW, connectorx SELECT into Arrow, HW; the source idle, so no fix-up) once plain and
once over TLS (CA and host name verified), in alternating order; then one plain connectorx SELECT of the
whole table each way. Once, as the baseline of before: the chunk reader over TLS through pymysql, the
path a TLS connection took when connectorx could not be told to use TLS.

    .venv/bin/python -m bench.snapshot_over_tls [--rows 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.tls import TlsSettings
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from bench.common.server import connectorx_select_rate, load_orders, throwaway_server
from dev.tls_certs import make_tls_files


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=33088)
    return parser.parse_args(argv)


def cpu_seconds(server_pid: int) -> float:
    """CPU time of this process and of the server so far: unlike wall time, not stretched by other load."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    fields = Path(f"/proc/{server_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return usage.ru_utime + usage.ru_stime + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chunk_reader_rate(config: ConnectionConfig, schema: TableSchema, chunks: list[Chunk], server_pid: int,
                      use_connectorx: bool | None = None) -> tuple[float, float]:
    """Rows/s, and CPU seconds (reader and server) per million rows."""
    started, cpu, rows = time.perf_counter(), cpu_seconds(server_pid), 0
    with ChunkReader(config, schema, server_id=5590, use_connectorx=use_connectorx) as reader:
        for snap in reader.read(chunks):
            rows += snap.table.num_rows
    return rows / (time.perf_counter() - started), (cpu_seconds(server_pid) - cpu) / rows * 1e6


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as folder:
        tls = make_tls_files(Path(folder))
        server_tls = [f"--ssl-ca={tls.ca}", f"--ssl-cert={tls.server_cert}", f"--ssl-key={tls.server_key}"]
        with throwaway_server(args.port, server_tls) as server:
            with server.admin_connect("bench").cursor() as cur:
                load_orders(cur, args.rows)
            # by the name the server's certificate holds, both ways
            plain = ConnectionConfig("localhost", server.cdc_user, server.cdc_password, server.port)
            over_tls = ConnectionConfig("localhost", server.cdc_user, server.cdc_password, server.port,
                                        ssl=TlsSettings(ca=tls.ca))
            with plain.connect() as control:
                schema = load_table_schema(control, TableId("bench", "orders"))
                chunks = split_table(control, schema, args.chunk_size)
            rates: dict[str, list[float]] = {"plain": [], "tls": [], "select plain": [], "select tls": []}
            cpu: dict[str, list[float]] = {"plain": [], "tls": []}
            for round_ in range(args.repeat):
                order = ("plain", "tls") if round_ % 2 == 0 else ("tls", "plain")
                for name in order:
                    rate, cpu_per_million = chunk_reader_rate(plain if name == "plain" else over_tls, schema, chunks,
                                                              server.pid)
                    rates[name].append(rate)
                    cpu[name].append(cpu_per_million)
                for name in order:
                    rates[f"select {name}"].append(connectorx_select_rate(plain if name == "plain" else over_tls))
                print(f"round {round_ + 1}: chunk reader plain {rates['plain'][-1]:,.0f}, TLS {rates['tls'][-1]:,.0f} "
                      f"rows/s ({rates['tls'][-1] / rates['plain'][-1]:.2f}x); CPU s per 1M rows plain "
                      f"{cpu['plain'][-1]:.2f}, TLS {cpu['tls'][-1]:.2f}", flush=True)
            # the path of before, on a sample of chunks (it is slow)
            pymysql_tls, _ = chunk_reader_rate(over_tls, schema, chunks[:25], server.pid, use_connectorx=False)
    report(args, len(chunks), rates, cpu, pymysql_tls)
    return 0


def report(args: argparse.Namespace, chunks: int, rates: dict[str, list[float]], cpu: dict[str, list[float]],
           pymysql_tls: float) -> None:
    def ratios(tls: list[float], plain: list[float]) -> tuple[str, str]:
        per_round = [t / p for t, p in zip(tls, plain, strict=True)]
        return f"{statistics.median(per_round):.2f}x", ", ".join(f"{r:.2f}" for r in per_round)

    median = {name: statistics.median(values) for name, values in rates.items()}
    reader, select = ratios(rates["tls"], rates["plain"]), ratios(rates["select tls"], rates["select plain"])
    cpu_ratio = ratios(cpu["plain"], cpu["tls"])  # plain / TLS: the rows/s CPU alone would allow
    print(f"{args.rows:,} rows in {chunks} chunks; medians of {args.repeat} rounds, ratios per round")
    print("| read | plain | TLS | TLS / plain | per round |")
    print("|---|---|---|---|---|")
    print(f"| chunk reader (LW, connectorx SELECT, HW), rows/s | {median['plain']:,.0f} | {median['tls']:,.0f} | "
          f"{reader[0]} | {reader[1]} |")
    print(f"| the same, CPU s per 1M rows (reader + server) | {statistics.median(cpu['plain']):.2f} | "
          f"{statistics.median(cpu['tls']):.2f} | {cpu_ratio[0]} (rows/s by CPU) | {cpu_ratio[1]} |")
    print(f"| one connectorx SELECT of the table, rows/s | {median['select plain']:,.0f} | "
          f"{median['select tls']:,.0f} | {select[0]} | {select[1]} |")
    print(f"| chunk reader over TLS through pymysql (before), rows/s | | {pymysql_tls:,.0f} | "
          f"{pymysql_tls / median['plain']:.2f}x of plain | |")


if __name__ == "__main__":
    sys.exit(main())
