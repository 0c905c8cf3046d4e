"""Do MySQL's row images decode as fast as MariaDB's? The rows events a real MySQL 8.0.28 server wrote (an
insert, an update and a delete of ``t(f1 CHAR(128), f2 VARCHAR(300), f3 ENUM, f4 SET, f5 TEXT)``:
``tests/fixtures/mysql_binlogs/rust_mysql_common/mysql-enum-string-set.000001``), against the same rows a
throwaway MariaDB writes of the same table, each replayed in a loop through the stream's columnar path:
the row decoder locating the images (``RowDecoders.locate``), ``ImageBuffer`` gathering them and
``rows_table`` reading them into the lake's Arrow rows, a table per 100,000 images. MySQL sets the unused
bits of a rows event's column bitmaps, which sent every MySQL row to mysql-replication until the decoder
ignored them: for reference the MySQL events also go through mysql-replication (``LegacyRows``), the path
they took before.

    .venv/bin/python -m bench.mysql_images_vs_mariadb [--images 300000] [--repeat 5]

Starts a throwaway MariaDB of its own; runs alternate between the two servers' events.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles
from airflow_provider_mysqlcdc.cdc.binlog.change_columns import ImageBuffer
from airflow_provider_mysqlcdc.cdc.binlog.dump import BinlogDump, EventStream
from airflow_provider_mysqlcdc.cdc.binlog.events import Format, Rows
from airflow_provider_mysqlcdc.cdc.binlog.legacy_rows import LegacyRows
from airflow_provider_mysqlcdc.cdc.binlog.reader import ChangeRows
from airflow_provider_mysqlcdc.cdc.binlog.row_decoder import RowDecoders
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.lake.changelog import rows_table
from bench.common.results import RESULTS, write_sections
from bench.common.server import throwaway_server

ROOT = RESULTS.parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mysql_binlogs" / "rust_mysql_common" / "mysql-enum-string-set.000001"
TABLE = ("CREATE TABLE t (f1 CHAR(128), f2 VARCHAR(300), f3 ENUM('var1', 'variant2', 'foo'), "
         "f4 SET('one', 'two', 'three', 'four'), f5 TEXT) DEFAULT CHARSET = utf8mb4")
BATCH_IMAGES = 100_000


def rows_events(stream: EventStream) -> tuple[list[Rows], Format]:
    try:
        return [e for e in stream if isinstance(e, Rows)], stream.format
    finally:
        stream.close()


def mysql_events() -> tuple[list[Rows], Format]:
    return rows_events(BinlogFiles([FIXTURE]).open(FIXTURE.name, 4))


def mariadb_events(server: Any, config: ConnectionConfig) -> tuple[list[Rows], TableSchema]:
    """The fixture's insert, update and delete (the owner's published values), written by the throwaway MariaDB."""
    expected = json.loads((FIXTURE.parents[1] / "catalogue.json").read_text())["files"]
    written, updated = (row["after"] for row in expected[f"{FIXTURE.parent.name}/{FIXTURE.name}"]["expected"][:2])
    control = config.connect()
    start = read_current_offset(control, ServerInfo.read(control), with_gtid=False)
    with server.admin_connect("bench").cursor() as cur:
        cur.execute(TABLE)
        cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s)", _values(written))
        cur.execute("UPDATE t SET f1 = %s, f2 = %s, f3 = %s, f4 = %s, f5 = %s", _values(updated))
        cur.execute("DELETE FROM t")
    schema = load_table_schema(control, TableId("bench", "t"))
    events, _ = rows_events(BinlogDump(config.replication_settings(), 5571, start.file, start.position))
    return [e for e in events if e.table_map.table.table == "t"], schema


def _values(row: list[Any]) -> tuple[Any, ...]:
    """The owner's values as the INSERT takes them: the ENUM by its index, the SET (``0b00000101 (SET
    one,three)``) by its members."""
    f1, f2, index, bits, f5 = row
    return f1, f2, index, bits.split("SET ", 1)[1].rstrip(")"), f5


def replay_columnar(events: list[Rows], schema: TableSchema, images: int) -> int:
    """``images`` images of ``events`` (replayed in turn) through the columnar path; the images read."""
    decoders, base, batch, taken, done = RowDecoders(), BinlogOffset("mysql-bin.000001", 4), [], 0, 0
    while done < images:
        for event in events:
            located = decoders.locate(event, schema)
            if located is None:
                raise AssertionError(f"the row decoder left a rows event of {schema.id} to mysql-replication")
            batch.append(ChangeRows(event.kinds, schema.id, located, located.count, base, 0))
            taken += located.count
        if taken >= BATCH_IMAGES or done + taken >= images:
            done += rows_table(ImageBuffer.of(schema, batch)).num_rows
            batch, taken = [], 0
    return done


def replay_legacy(events: list[Rows], fmt: Format, images: int) -> int:
    """The same through mysql-replication's decoding, values only (no Arrow): what MySQL's images cost before."""
    legacy, done = LegacyRows({"host": "127.0.0.1"}), 0
    while done < images:
        for event in events:
            done += sum(len(event.kinds) for _ in legacy.rows(event, fmt))
    return done


def rate(run: Callable[[], int]) -> float:
    started = time.perf_counter()
    images = run()
    return images / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=300_000, help="row images decoded per run and server")
    parser.add_argument("--repeat", type=int, default=5, help="alternating runs")
    parser.add_argument("--port", type=int, default=33093)
    parser.add_argument("--results", type=Path, default=None, help="write the section into this RESULTS.md")
    args = parser.parse_args(argv)
    mysql, fmt = mysql_events()
    with throwaway_server(args.port) as server:
        config = ConnectionConfig(server.host, server.cdc_user, server.cdc_password, server.port)
        mariadb, schema = mariadb_events(server, config)
    mysql_schema = replace(schema, id=mysql[0].table_map.table)
    assert [e.kinds for e in mysql] == [e.kinds for e in mariadb], "the two servers' events differ in kind"
    assert all(not set(e.present) <= {0x1F} for e in mysql), "MySQL's bitmaps were expected with their unused bits set"
    runs: dict[str, list[float]] = {"MySQL 8.0.28": [], "MariaDB": [], "MySQL 8.0.28 through mysql-replication": []}
    for _ in range(args.repeat):
        runs["MySQL 8.0.28"].append(rate(lambda: replay_columnar(mysql, mysql_schema, args.images)))
        runs["MariaDB"].append(rate(lambda: replay_columnar(mariadb, schema, args.images)))
        legacy = rate(lambda: replay_legacy(mysql, fmt, args.images // 10))
        runs["MySQL 8.0.28 through mysql-replication"].append(legacy)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    baseline = medians["MariaDB"]
    lines = ["| events | row images/s (median) | runs | vs MariaDB |", "|---|---|---|---|"]
    for name, median in medians.items():
        each = ", ".join(f"{v:,.0f}" for v in runs[name])
        lines.append(f"| {name} | {median:,.0f} | {each} | {median / baseline:.2f}x |")
    for line in lines:
        print(line)
    if args.results is not None:
        write_sections(args.results, "\n".join([
            "## MySQL's row images against MariaDB's (the columnar decoder)", "",
            f"`bench.mysql_images_vs_mariadb --images {args.images} --repeat {args.repeat}`: the insert, update and "
            "delete a real MySQL 8.0.28 wrote of a CHAR/VARCHAR/ENUM/SET/TEXT table (fixture "
            "`rust_mysql_common/mysql-enum-string-set.000001`) and the same statements' events from a throwaway "
            "MariaDB, replayed through the row decoder, `ImageBuffer` and `rows_table` (Arrow), runs alternating; "
            "mysql-replication on the MySQL events for reference (a tenth of the images: it is slow).", "", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
