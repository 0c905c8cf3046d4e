"""The snapshot's Parquet writing: seconds and bytes per setting, on the chunks the chunk reader returns.

Each Spark task writes its chunks into one Parquet file, a row group per chunk (``engine.snapshot.snapshot_batch``).
Dictionary encoding pays off for columns with few distinct values and costs CPU for the others (a
chunk's unique strings are hashed into a dictionary that does not shrink them). This benchmark reads
``--rows`` rows of the benchmark table once with the chunk reader, turns each chunk into the rows its
file holds (``file_rows``), then writes them with the snapshot's setting (``parquet_options``, the
baseline) and with the alternatives, taking turns, five times each, on a local disk, in CPU seconds (the
figure a machine shared with other jobs keeps steady). It does it twice: on the table
as it is (unique SKUs and notes, 50,000 customers) and with the ``sku`` column replaced by one of five
status strings at random, where a dictionary is worth most.

    .venv/bin/python -m bench.parquet_settings [--rows 2000000]

Starts a throwaway MariaDB of its own and stops it afterwards; writes its section of bench/RESULTS.md.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.chunk_reader import ChunkReader
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.engine.snapshot.snapshot_batch import file_rows, file_schema, parquet_options
from bench.common.measure import machine
from bench.common.results import write_sections
from bench.common.server import bench_arguments, load_orders, throwaway_server

RESULTS = Path(__file__).with_name("RESULTS.md")
ALTERNATIVES: dict[str, dict[str, Any]] = {
    "Snappy, dictionaries (pyarrow's default, 1 MiB limit)": {"compression": "snappy"},
    "Snappy, dictionary pages up to 64 KiB": {"compression": "snappy", "dictionary_pagesize_limit": 64 * 1024},
    "Snappy, dictionary pages up to 16 KiB": {"compression": "snappy", "dictionary_pagesize_limit": 16 * 1024},
    "Snappy, dictionary pages up to 4 KiB, every column": {"compression": "snappy",
                                                           "dictionary_pagesize_limit": 4 * 1024},
    "Snappy, no dictionaries": {"compression": "snappy", "use_dictionary": False},
}
ROUNDS = 5
STATUSES = pa.array(["new", "paid", "shipped", "delivered", "cancelled"])


def write_seconds(chunks: list[pa.Table], schema: pa.Schema, folder: Path) -> dict[str, tuple[float, int]]:
    """Per setting, the median CPU seconds of ``ROUNDS`` writes of ``chunks`` (a row group each) into one file,
    and its size; the settings take turns in every round, so that a slower minute of the machine falls on
    all of them alike. The snapshot's setting is the one its task takes from the first chunk."""
    snapshot = parquet_options(chunks[0])
    settings = {"the snapshot's (parquet_options)": snapshot,
                **{label: options for label, options in ALTERNATIVES.items() if options != snapshot}}
    times: dict[str, list[float]] = {label: [] for label in settings}
    sizes: dict[str, int] = {}
    path = folder / "part.parquet"
    for _ in range(ROUNDS):
        for label, options in settings.items():
            started = time.process_time()
            with pq.ParquetWriter(str(path), schema, **options) as writer:
                for chunk in chunks:
                    writer.write_table(chunk)
            times[label].append(time.process_time() - started)
            sizes[label] = path.stat().st_size
    return {label: (statistics.median(times[label]), sizes[label]) for label in settings}


def with_statuses(chunk: pa.Table, rnd: random.Random) -> pa.Table:
    """The chunk with ``sku`` replaced by one of five statuses at random (a low-cardinality string column)."""
    index = chunk.schema.get_field_index("sku")
    statuses = STATUSES.take(pa.array([rnd.randrange(len(STATUSES)) for _ in range(chunk.num_rows)]))
    return chunk.set_column(index, chunk.schema.field(index), statuses.cast(chunk.schema.field(index).type))


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv, port=33084)
    with throwaway_server(args.port) as server:
        with server.admin_connect("bench").cursor() as cur:
            load_orders(cur, args.rows)
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        control = config.connect()
        schema = load_table_schema(control, TableId("bench", "orders"))
        version = control.get_server_info()
        with ChunkReader(config, schema, server_id=5460) as reader:
            chunks = [file_rows(s.table, schema, s.high_watermark) for s in reader.read(split_table(
                control, schema, args.chunk_size))]
        control.close()
    rows, arrow_schema, rnd = sum(c.num_rows for c in chunks), file_schema(schema), random.Random(5)
    tables = {"the benchmark table": chunks,
              "the same with five statuses in sku": [with_statuses(c, rnd) for c in chunks]}
    lines = [f"## Snapshot Parquet writing: {rows:,} rows in {len(chunks)} chunks, by setting", "",
             f"`bench.parquet_settings` (pyarrow {pa.__version__}, {machine(version)['cpu']}, local disk): each "
             f"chunk as the rows its file holds, written into one file a row group each; the settings take turns, "
             f"median CPU seconds of {ROUNDS} writes.", ""]
    for name, table in tables.items():
        lines += [f"**{name}**", "",
                  "| setting | CPU s per 1M rows | MB | time / the snapshot's | size / the snapshot's |",
                  "|---|---|---|---|---|"]
        with tempfile.TemporaryDirectory(prefix="bench-parquet-") as folder:
            measured = write_seconds(table, arrow_schema, Path(folder))
        base_seconds, base_size = next(iter(measured.values()))
        for label, (seconds, size) in measured.items():
            lines.append(f"| {label} | {seconds / rows * 1e6:.3f} | {size / 1e6:.1f} | "
                         f"{seconds / base_seconds:.2f}x | {size / base_size:.2f}x |")
            print(f"{name}: {label:55} {seconds / rows * 1e6:6.3f} CPU s/1M rows {size / 1e6:7.1f} MB", flush=True)
        lines.append("")
    write_sections(RESULTS, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
