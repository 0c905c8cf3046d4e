"""RENAME/DROP COLUMN on a large current-state table (issue 25): what ``lake.write.current_ddl.reshape_current``'s
rewrite costs, against writing the same table once, measured in the same run; and what Delta column
mapping (``delta.columnMapping.mode=name``, a rename or drop without rewriting) can do with the deltalake
in use, and which readers read such a table.

    .venv/bin/python -m bench.ddl_rewrite_vs_column_mapping [--rows 10000000] [--batches 3] [--repeat 2]

The current table is shaped like ours (``lake.changelog.lake_schema`` of a six-column table: a BIGINT key,
INT, VARCHAR, DECIMAL(12,2), DATETIME(3), TEXT with a third NULL; the metadata columns; partitioned by
``_batch`` in ``--batches`` key ranges). Each measured step runs in a process of its own, so its peak resident
memory is the kernel's high-water mark of that step alone (imports included: the row "imports only" gives that
floor): the baseline reads the rows (as read from the table, kept beforehand in an Arrow file) into memory,
not timed, and writes them once; the rename and the drop each run ``reshape_current`` on a fresh copy of that
table. The steps take turns, ``--repeat`` times. Column mapping: the capabilities of deltalake tried one by
one on a small table (what works, the exact error of what does not), the readers tried on a column-mapped
table, and the time of writing the large table column-mapped. No delta-rs API renames or drops a column; the
only way found is a commit written by hand (a ``metaData`` action with the new logical names), timed here for
what a metadata-only rename would cost, not something the provider could ship. No server is needed. Writes its
section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.lake.changelog import lake_schema
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN, stored_type
from bench.common.measure import child_peak_rss_mib
from bench.common.results import write_sections

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = TableSchema(TableId("bench", "orders"), (
    Column("id", "bigint", "bigint", nullable=False), Column("customer", "int", "int"),
    Column("sku", "varchar", "varchar(64)", char_max_length=64),
    Column("amount", "decimal", "decimal(12,2)", precision=12, scale=2),
    Column("created", "datetime", "datetime(3)", datetime_precision=3), Column("note", "text", "text")), ("id",))
RENAMED = {"sku": "sku_code"}
DROPPED = "note"
MAPPING_KEY = "delta.columnMapping.mode"
MAPPING = {MAPPING_KEY: "name"}


def after_rename() -> TableSchema:
    return dataclasses.replace(SCHEMA, columns=tuple(
        dataclasses.replace(c, name=RENAMED.get(c.name, c.name)) for c in SCHEMA.columns))


def after_drop() -> TableSchema:
    return dataclasses.replace(SCHEMA, columns=tuple(c for c in SCHEMA.columns if c.name != DROPPED))


def current_rows(rows: int, batches: int, seed: int = 1) -> pa.Table:
    """``rows`` rows of the current table as the snapshot leaves them (``+I``, one high watermark)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(1, rows + 1, dtype=np.int64)
    text = pa.string()
    cents = (ids * 7919) % 10_000_000
    amount = pa.Array.from_buffers(pa.decimal128(12, 2), rows,
                                   [None, pa.py_buffer(np.stack([cents, np.zeros_like(cents)], axis=1).tobytes())])
    note = pc.binary_join_element_wise("note for order ", pa.array(ids).cast(text), " ",
                                       pa.array(rng.integers(0, 10**9, rows)).cast(text), "")
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids),
        "customer": pa.array((ids % 50_000).astype(np.int32)),
        "sku": pc.binary_join_element_wise("SKU-", pa.array(ids % 9973).cast(text), "-",
                                           pa.array(rng.integers(0, 2**62, rows)).cast(text), ""),
        "amount": amount,
        "created": pa.array(1_704_067_200_000_000 + ids * 1_000_000, pa.timestamp("us")),
        "note": pc.if_else(pa.array(ids % 3 == 0), pa.nulls(rows, text), note),
        "_op": pa.repeat(pa.scalar("+I"), rows), "_database": pa.repeat(pa.scalar("bench"), rows),
        "_table": pa.repeat(pa.scalar("orders"), rows), "_op_ts": pa.repeat(pa.scalar(0, pa.int64()), rows),
        "_binlog_file": pa.repeat(pa.scalar(1, pa.int32()), rows),
        "_binlog_pos": pa.repeat(pa.scalar(4_096, pa.int64()), rows),
        "_row_seq": pa.repeat(pa.scalar(0, pa.int64()), rows),
    }
    fields = [f.with_type(stored_type(f.type)) for f in lake_schema(SCHEMA)]
    per_batch = -(-rows // batches)
    arrays = [columns[f.name].cast(f.type) for f in fields]
    batch = pa.array(((ids - 1) // per_batch).astype(np.int32))
    return pa.Table.from_arrays([*arrays, batch], schema=pa.schema([*fields, pa.field(BATCH_COLUMN, pa.int32())]))


# -- the steps, each in a child process ---------------------------------------------------------------


def hand_metadata_commit(uri: str, renamed: dict[str, str], dropped: tuple[str, ...] = ()) -> None:
    """A commit renaming or dropping columns of a column-mapped table by their logical names only: the
    table's last ``metaData`` action with the schema changed. Not a delta-rs API (it has none)."""
    from deltalake import DeltaTable

    table = DeltaTable(uri)
    metadata: dict[str, Any] = {}
    for log in sorted(Path(uri, "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            metadata = json.loads(line).get("metaData", metadata)
    schema = json.loads(metadata["schemaString"])
    schema["fields"] = [{**f, "name": renamed.get(f["name"], f["name"])} for f in schema["fields"]
                        if f["name"] not in dropped]
    metadata["schemaString"] = json.dumps(schema)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CHANGE COLUMN"}}
    with Path(uri, "_delta_log", f"{table.version() + 1:020d}.json").open("x") as out:
        out.write(json.dumps(info) + "\n" + json.dumps({"metaData": metadata}) + "\n")


def rows_file(uri: str) -> Path:
    """The Arrow IPC file the table's rows are built into once, next to the tables of the run."""
    return Path(uri).parent / "rows.arrow"


def child(step: str, uri: str, rows: int, batches: int) -> float:
    """One measured step; its seconds. ``prepare`` (not measured) builds the rows, writes the table at
    ``uri`` and keeps its rows as ``DeltaTable.to_pyarrow_table`` reads them (the arrays ``reshape_current``
    holds and writes) in ``rows_file``: each measured write reads them whole into memory first (not timed),
    so that it holds and writes what ``reshape_current`` does, and not what building them took."""
    from deltalake import DeltaTable as Dt
    from deltalake import QueryBuilder, write_deltalake

    from airflow_provider_mysqlcdc.lake.write.current_ddl import reshape_current

    if step == "imports":
        return 0.0
    if step == "prepare":
        write_deltalake(uri, current_rows(rows, batches), partition_by=[BATCH_COLUMN])
        table = Dt(uri).to_pyarrow_table()
        with pa.OSFile(str(rows_file(uri)), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return 0.0
    if step in ("write", "write-mapped"):
        with pa.OSFile(str(rows_file(uri))) as source:
            table = pa.ipc.open_file(source).read_all()
        started = time.perf_counter()
        if step == "write":
            write_deltalake(uri, table, mode="overwrite", partition_by=[BATCH_COLUMN])
        else:
            create_mapped(uri, table)
        return time.perf_counter() - started
    started = time.perf_counter()
    if step == "rename":
        assert reshape_current(uri, after_rename(), RENAMED, [], seq=1)
    elif step == "drop":
        assert reshape_current(uri, after_drop(), {}, [], seq=1)
    elif step == "hand-rename-mapped":
        hand_metadata_commit(uri, RENAMED)
    else:
        raise SystemExit(f"unknown step {step}")
    seconds = time.perf_counter() - started
    # the result holds every row, the renamed column with its values (checked outside the timing)
    names = [f.name for f in Dt(uri).schema().fields]
    gone = DROPPED if step == "drop" else "sku"
    assert gone not in names, names
    query = "SELECT count(*) AS n, count(sku_code) AS k FROM t" if step != "drop" else "SELECT count(*) AS n FROM t"
    counts = pa.table(QueryBuilder().register("t", Dt(uri)).execute(query).read_all()).to_pylist()[0]
    assert counts["n"] == rows and counts.get("k", rows) == rows, counts
    return seconds


def run_child(step: str, uri: str, args: argparse.Namespace) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of one step in a process of its own."""
    command = [sys.executable, "-m", "bench.ddl_rewrite_vs_column_mapping", "--child", step, "--uri", uri,
               "--rows", str(args.rows), "--batches", str(args.batches)]
    peak, out = child_peak_rss_mib(command, {**os.environ, "PYTHONPATH": str(ROOT)}, ROOT)
    seconds = float(out.split("seconds=")[1])
    print(f"{step}: {seconds:.2f} s, peak RSS {peak:,.0f} MiB", flush=True)
    return seconds, peak


# -- column mapping: what deltalake can do, and who reads it ------------------------------------------


def outcome(action: Callable[[], Any], said: bool = False) -> str:
    """``works`` (with what ``action`` returned), or ``fails`` with the error's first line; ``said``: the
    action's own text says how it went."""
    try:
        result = action()
    except Exception as error:  # noqa: BLE001 - the error is the finding
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"fails: `{type(error).__name__}: {first[:220]}`"
    if said:
        return str(result)
    return "works" if result is None or result is True else f"works: {result}"


def create_mapped(uri: str, rows: pa.Table) -> None:
    """A column-mapped table holding ``rows``, the way that works with this deltalake: created empty with
    the mode set, the ``columnMapping`` feature added where the protocol lists features (a DATETIME column
    takes it to 3/7 for ``timestampNtz``, and ``create`` leaves ``columnMapping`` out), then appended to."""
    from deltalake import DeltaTable, TableFeatures, write_deltalake

    table = DeltaTable.create(uri, rows.schema, partition_by=[BATCH_COLUMN], configuration=MAPPING)
    protocol = table.protocol()
    if protocol.min_writer_version >= 7 and "columnMapping" not in (protocol.writer_features or []):
        table.alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True)
    write_deltalake(uri, rows, mode="append", partition_by=[BATCH_COLUMN])


def describe(uri: str) -> str:
    """The protocol, the mode, and the names the Parquet files give the columns."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    table = DeltaTable(uri)
    protocol = table.protocol()
    files = table.file_uris()
    names = pq.read_schema(files[0]).names if files else []
    kind = "no file" if not files else "physical (`col-...`)" if names[0].startswith("col-") else "logical"
    return (f"protocol {protocol.min_reader_version}/{protocol.min_writer_version}, features "
            f"{protocol.writer_features or '-'}, mode {table.metadata().configuration.get(MAPPING_KEY, '-')}, "
            f"Parquet column names {kind}")


def renamed_values(uri: str) -> str:
    """After a rename written by hand, how many rows DataFusion reads a value of the renamed column for."""
    from deltalake import DeltaTable, QueryBuilder

    hand_metadata_commit(uri, RENAMED)
    counts = pa.table(QueryBuilder().register("t", DeltaTable(uri)).execute(
        "SELECT count(*) AS n, count(sku_code) AS k FROM t").read_all()).to_pylist()[0]
    return f"after a rename: {counts['k']} of {counts['n']} `sku_code` values read"


def capabilities(folder: str) -> list[tuple[str, str]]:
    """Each column-mapping operation tried on a small table, with what happened."""
    from deltalake import DeltaTable, TableFeatures, write_deltalake
    from deltalake.schema import Field, PrimitiveType
    from deltalake.table import TableAlterer

    small = current_rows(30, 3)
    no_datetime = small.drop_columns(["created"])
    renamed = small.rename_columns([RENAMED.get(n, n) for n in small.column_names])
    plain, flawed, mapped, given, converted = (
        f"{folder}/{n}" for n in ("plain", "flawed", "mapped", "given", "converted"))

    def create_then_rename(uri: str, rows: pa.Table, create: Callable[[str, pa.Table], None] | None = None) -> str:
        if create is None:
            write_deltalake(uri, rows, partition_by=[BATCH_COLUMN], configuration=MAPPING)
        else:
            create(uri, rows)
        return f"{describe(uri)}; {renamed_values(uri)}"

    def create_given() -> None:
        fields = [f.with_metadata({"delta.columnMapping.id": str(i + 1), "delta.columnMapping.physicalName": f"c{i}"})
                  for i, f in enumerate(small.schema)]
        DeltaTable.create(given, pa.schema(fields), partition_by=[BATCH_COLUMN],
                          configuration={**MAPPING, "delta.columnMapping.maxColumnId": str(len(fields))})

    def convert() -> str:
        write_deltalake(converted, small, partition_by=[BATCH_COLUMN])
        DeltaTable(converted).alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True)
        return describe(converted)

    def append_new_column() -> None:
        extra = small.append_column("extra", pa.array(range(small.num_rows), pa.int32()))
        write_deltalake(mapped, extra, mode="append", schema_mode="merge", partition_by=[BATCH_COLUMN])

    def merge() -> str:
        metrics = DeltaTable(mapped).merge(small, "t.id = s.id", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
        return f"{metrics['num_target_rows_updated']} rows updated"

    api = [m for m in dir(TableAlterer) if not m.startswith("_")]
    return [
        ("create: `write_deltalake(..., configuration={'delta.columnMapping.mode': 'name'})`, no DATETIME column",
         outcome(partial(create_then_rename, plain, no_datetime))),
        ("create: the same with a DATETIME column (`timestampNtz` takes the protocol to 3/7)",
         outcome(partial(create_then_rename, flawed, small))),
        ("create: `DeltaTable.create(..., configuration=...)`, `alter.add_feature(TableFeatures.ColumnMapping)`, "
         "then append (`create_mapped`)",
         outcome(partial(create_then_rename, mapped, small, create_mapped))),
        ("create with the fields' ids and physical names given", outcome(create_given)),
        ("convert a plain table: `alter.add_feature(TableFeatures.ColumnMapping)`", outcome(convert)),
        ("... then `alter.set_table_properties({'delta.columnMapping.mode': 'name'})`",
         outcome(lambda: DeltaTable(converted).alter.set_table_properties(MAPPING))),
        ("... the half-converted table (feature on, mode none): `to_pyarrow_table()`",
         outcome(lambda: DeltaTable(converted).to_pyarrow_table().num_rows)),
        ("append (`write_deltalake(mode='append')`)",
         outcome(lambda: write_deltalake(mapped, renamed, mode="append", partition_by=[BATCH_COLUMN]))),
        ("MERGE", outcome(merge)),
        ("DELETE", outcome(lambda: f"{DeltaTable(mapped).delete('id = 1')['num_deleted_rows']} rows deleted")),
        ("overwrite, same schema", outcome(lambda: write_deltalake(mapped, renamed, mode="overwrite",
                                                                   partition_by=[BATCH_COLUMN]))),
        ("ADD COLUMN (`alter.add_columns`)",
         outcome(lambda: DeltaTable(mapped).alter.add_columns([Field("extra", PrimitiveType("integer"))]))),
        ("append with a new column (`schema_mode='merge'`)", outcome(append_new_column)),
        ("rename by overwrite with `schema_mode='overwrite'`",
         outcome(lambda: write_deltalake(mapped, small, mode="overwrite", schema_mode="overwrite",
                                         partition_by=[BATCH_COLUMN]))),
        ("change a field's physical name (`alter.set_column_metadata`)",
         outcome(lambda: DeltaTable(mapped).alter.set_column_metadata(
             "sku_code", {"delta.columnMapping.physicalName": "sku"}))),
        ("a RENAME or DROP COLUMN API (`DeltaTable.alter`'s methods)",
         "none: " + ", ".join(f"`{m}`" for m in api)),
    ]


def readers(folder: str) -> list[tuple[str, str, str]]:
    """The readers our users bring, on column-mapped tables after a rename written by hand (``create_mapped``,
    with and without a DATETIME column: protocol 3/7 and 2/5): do they see the values under the new name?"""
    import duckdb
    import polars as pl
    from deltalake import DeltaTable, QueryBuilder

    small = current_rows(30, 3)
    expected = sorted(small.column("sku").to_pylist(), key=str)
    uris = []
    for name, rows in (("with-datetime", small), ("without", small.drop_columns(["created"]))):
        uris.append(f"{folder}/{name}")
        create_mapped(uris[-1], rows)
        hand_metadata_commit(uris[-1], RENAMED)

    def check(values: list[Any]) -> str:
        if sorted(values, key=str) == expected:
            return "reads the values"
        return f"no error, wrong values: {sum(v is None for v in values)} of {len(values)} `sku_code` NULL"

    def duckdb_dataset(uri: str) -> str:
        connection = duckdb.connect()
        connection.register("dataset", DeltaTable(uri).to_pyarrow_dataset())
        return check([r[0] for r in connection.execute("SELECT sku_code FROM dataset").fetchall()])

    def duckdb_scan(uri: str) -> str:
        connection = duckdb.connect()
        connection.execute("LOAD delta")
        return check([r[0] for r in connection.execute(f"SELECT sku_code FROM delta_scan('{uri}')").fetchall()])

    tries: list[tuple[str, Callable[[str], str]]] = [
        ("deltalake `DeltaTable.to_pyarrow_table()`",
         lambda u: check(DeltaTable(u).to_pyarrow_table().column("sku_code").to_pylist())),
        ("deltalake `QueryBuilder` (DataFusion SQL)",
         lambda u: check(pa.table(QueryBuilder().register("t", DeltaTable(u)).execute(
             "SELECT sku_code FROM t").read_all()).column("sku_code").to_pylist())),
        ("Polars `pl.read_delta`", lambda u: check(pl.read_delta(u)["sku_code"].to_list())),
        ("DuckDB `delta_scan` (delta extension)", duckdb_scan),
        ("DuckDB over `DeltaTable.to_pyarrow_dataset()`", duckdb_dataset),
    ]
    return [(label, outcome(partial(read, uris[0]), said=True), outcome(partial(read, uris[1]), said=True))
            for label, read in tries]


# -- the run -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(f"seconds={child(args.child, args.uri, args.rows, args.batches)}")
        return 0
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-ddl-") as tmp:
        template, work = f"{tmp}/template", f"{tmp}/work"
        figures: dict[str, list[tuple[float, float]]] = {s: [] for s in ("write", "rename", "drop")}
        figures["imports"] = [run_child("imports", work, args)]
        run_child("prepare", template, args)
        arrow_bytes = rows_file(template).stat().st_size
        size = sum(f.stat().st_size for f in Path(template).rglob("*.parquet"))
        for attempt in range(args.repeat):
            shutil.rmtree(work, ignore_errors=True)
            figures["write"].append(run_child("write", work, args))
            for step in ("rename", "drop") if attempt % 2 == 0 else ("drop", "rename"):
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(template, work)
                figures[step].append(run_child(step, work, args))
        shutil.rmtree(work, ignore_errors=True)
        mapped_write = run_child("write-mapped", work, args)
        hand_rename = run_child("hand-rename-mapped", work, args)
        shutil.rmtree(work)
        found = capabilities(f"{tmp}/capabilities")
        read = readers(tmp)
    load_after = os.getloadavg()
    write_s = statistics.median(s for s, _ in figures["write"])
    write_rss = statistics.median(r for _, r in figures["write"])

    def row(label: str, runs: list[tuple[float, float]], what: str) -> str:
        seconds, rss = statistics.median(s for s, _ in runs), statistics.median(r for _, r in runs)
        # per round, against that round's write (the rounds' load differs), then the median
        ratios = [s / w for (s, _), (w, _) in zip(runs, figures["write"], strict=True)]
        ratio = f"{statistics.median(ratios):.2f}x ({', '.join(f'{r:.2f}' for r in ratios)})" if what else ""
        each = ", ".join(f"{s:.1f}" for s, _ in runs)
        return f"| {label} | {seconds:.1f} s ({each}) | {ratio} | {rss:,.0f} MiB | {rss / write_rss:.2f}x |"

    text = f"""## DDL on the current table: rewrite ({args.rows:,} rows) vs Delta column mapping (issue 25)

Written by `.venv/bin/python -m bench.ddl_rewrite_vs_column_mapping --rows {args.rows} --repeat {args.repeat}` (not by \
`bench.peers`). {date.today()}, {args.repeat} round(s); cores {os.cpu_count()}, python \
{platform.python_version()}, deltalake {version('deltalake')}, pyarrow {version('pyarrow')}, polars \
{version('polars')}, duckdb {version('duckdb')}; load average {load[0]:.1f} at the start, {load_after[0]:.1f} at \
the end (the 2 cores are shared with other developers' tests).

The current table: {args.rows:,} rows in {args.batches} `_batch` partitions, {size / 2**20:,.0f} MiB of \
Parquet, {arrow_bytes / 2**20:,.0f} MiB in Arrow; `lake_schema` of (id BIGINT key, customer INT, sku \
VARCHAR(64), amount DECIMAL(12,2), created DATETIME(3), note TEXT a third NULL) and the seven metadata \
columns. Each step in a process of its own; \
peak RSS is that process's high-water mark. Baseline: the table's rows as `to_pyarrow_table` reads them \
(kept beforehand in an Arrow file), read into memory (not timed; their memory counts, as in \
`reshape_current`), then written once (`write_deltalake`, partitioned by `_batch`). Rename (`sku` to \
`sku_code`) and drop (`note`): `reshape_current` on a fresh copy of the baseline's table (read it whole, \
rename or drop, one overwrite), checked afterwards (every row, the renamed column's values). Time: median \
(each round's); the ratio per round, then their median.

| step | time | / the round's write | peak RSS | / the write's |
|---|---|---|---|---|
{row("baseline: write the table once", figures["write"], "")}
{row("RENAME COLUMN: `reshape_current`", figures["rename"], "x")}
{row("DROP COLUMN: `reshape_current`", figures["drop"], "x")}
| imports only (the floor of every row) | | | {figures["imports"][0][1]:,.0f} MiB | |

Column mapping with deltalake {version('deltalake')}: writing the same table column-mapped \
(`create_mapped`, the way that works, below) took {mapped_write[0]:.1f} s \
({mapped_write[0] / write_s:.2f}x the plain write, peak RSS {mapped_write[1]:,.0f} MiB). A rename of it by a \
commit written by hand (a `metaData` action with the new logical name; no API does it) took \
{hand_rename[0] * 1000:.1f} ms, and DataFusion (`QueryBuilder`) then read every row's value under the new \
name. What deltalake does with column mapping, tried on a small table:

| operation | result |
|---|---|
""" + "\n".join(f"| {what} | {result} |" for what, result in found) + """

Readers of a column-mapped table made by `create_mapped` (name mode, `sku` renamed to `sku_code` by the \
hand-written commit), with a DATETIME column (protocol 3/7, features `timestampNtz` and `columnMapping`) and \
without (protocol 2/5):

| reader | with a DATETIME column | without |
|---|---|---|
""" + "\n".join(f"| {what} | {a} | {b} |" for what, a, b in read) + "\n"
    write_sections(args.results, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
