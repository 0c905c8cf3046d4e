"""Splitting real tables: every row lands in exactly one chunk, counted with the reader's own SQL."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection, discover_tables, load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk, chunk_where
from airflow_provider_mysqlcdc.cdc.split.splitter import split_table
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError


def matching(databases: str, **patterns: Any) -> TableSelection:
    """The tables of the databases ``databases`` matches, with ``include_tables``/``exclude_tables``."""
    return TableSelection(include_databases=databases, **patterns)

def make_table(admin: Any, ddl: str, rows_sql: str | None = None, values: list[tuple[Any, ...]] | None = None) -> None:
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS t")
        cur.execute(f"CREATE TABLE t {ddl}")
        if rows_sql:
            cur.execute(rows_sql)
        if values:
            marks = ", ".join(["%s"] * len(values[0]))
            cur.executemany(f"INSERT IGNORE INTO t VALUES ({marks})", values)  # collation-equal duplicates
        cur.execute("ANALYZE TABLE t")
        cur.fetchall()


def assert_exact_cover(conn: Any, schema: TableSchema, chunks: list[Chunk]) -> list[int]:
    """Rows per chunk with chunk_where; every key seen exactly once overall. Returns the counts."""
    key = schema.chunk_key_column.quoted
    row_key = ", ".join(schema.column(k).quoted for k in schema.row_key)
    seen: Counter[Any] = Counter()
    counts = []
    with conn.cursor() as cur:
        for chunk in chunks:
            where, params = chunk_where(chunk, schema.chunk_key_column)
            cur.execute(f"SELECT {row_key} FROM t WHERE {where}", params)
            rows = cur.fetchall()
            counts.append(len(rows))
            seen.update(rows)
        cur.execute(f"SELECT {row_key} FROM t")
        everything = Counter(cur.fetchall())
    assert seen == everything, f"rows in no chunk or in two chunks (key {key})"
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].start is None and chunks[-1].end is None
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    return counts


def split(conn: Any, database: str, chunk_size: int, chunk_key: str | None = None) -> tuple[TableSchema, list[Chunk]]:
    schema = load_table_schema(conn, TableId(database, "t"), chunk_key)
    return schema, split_table(conn, schema, chunk_size)


def test_even_integer_split(admin, cdc_conn, database) -> None:
    make_table(admin, "(id INT PRIMARY KEY, v INT)", "INSERT INTO t SELECT seq, seq FROM seq_1_to_10000")
    schema, chunks = split(cdc_conn, database, 1000)
    counts = assert_exact_cover(cdc_conn, schema, chunks)
    assert 8 <= len(chunks) <= 12 and max(counts) <= 1300  # TABLE_ROWS is an estimate
    assert split_table(cdc_conn, schema, 1000) == chunks  # stable for the same table state


def test_unsigned_bigint_near_two_to_the_64(admin, cdc_conn, database) -> None:
    make_table(admin, "(id BIGINT UNSIGNED PRIMARY KEY)",
               "INSERT INTO t SELECT 18446744073709551615 - seq FROM seq_0_to_4999")
    schema, chunks = split(cdc_conn, database, 700)
    assert max(assert_exact_cover(cdc_conn, schema, chunks)) <= 1000 and len(chunks) >= 5
    assert all(c.end is None or c.end <= 2**64 - 1 for c in chunks)


def test_sparse_keys_split_unevenly_by_rows(admin, cdc_conn, database) -> None:
    make_table(admin, "(id BIGINT PRIMARY KEY)", "INSERT INTO t SELECT seq * seq * seq FROM seq_1_to_3000")
    schema, chunks = split(cdc_conn, database, 500)
    counts = assert_exact_cover(cdc_conn, schema, chunks)
    assert counts == [500] * 6


def test_decimal_key(admin, cdc_conn, database) -> None:
    make_table(admin, "(d DECIMAL(12,2) PRIMARY KEY)", "INSERT INTO t SELECT seq / 100 FROM seq_1_to_2000")
    schema, chunks = split(cdc_conn, database, 300)
    assert len(chunks) >= 6 and max(assert_exact_cover(cdc_conn, schema, chunks)) <= 400


def test_composite_key_splits_on_first_column(admin, cdc_conn, database) -> None:
    make_table(admin, "(a INT, b VARCHAR(10), PRIMARY KEY (a, b))",
               "INSERT INTO t SELECT seq DIV 10, CONCAT('x', seq MOD 10) FROM seq_0_to_1999")
    schema, chunks = split(cdc_conn, database, 100)
    assert schema.chunk_key == "a" and schema.primary_key == ("a", "b")
    assert len(chunks) > 5
    assert_exact_cover(cdc_conn, schema, chunks)


TRICKY = ["a", "B", "é", "E", "z", "😀", "Zebra", "zèbre", "ábc", "ABD", "ß", "sss", " lead", "日本語", "~"]


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin"])
def test_string_key_chunks_follow_the_collation(admin, cdc_conn, database, collation: str) -> None:
    values = TRICKY + [f"{p}{i:03d}" for i in range(300) for p in ("k", "K", "ké")]
    make_table(admin, f"(k VARCHAR(40) COLLATE {collation} PRIMARY KEY)", values=[(v,) for v in values])
    for size in (1, 7, 64):
        schema, chunks = split(cdc_conn, database, size)
        counts = assert_exact_cover(cdc_conn, schema, chunks)
        assert counts[:-1] == [size] * (len(chunks) - 1) and 1 <= counts[-1] <= size


def test_latin1_key(admin, cdc_conn, database) -> None:
    values = [(v,) for v in ["a", "Á", "ü", "ue", "ÿ", "y", "z", "Z1", "ß", "ss1"]]
    make_table(admin, "(k VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci PRIMARY KEY)", values=values)
    schema, chunks = split(cdc_conn, database, 2)
    assert len(chunks) >= 4
    assert_exact_cover(cdc_conn, schema, chunks)


def test_wide_decimal_key(admin, cdc_conn, database) -> None:
    make_table(admin, "(d DECIMAL(65,30) PRIMARY KEY)",
               "INSERT INTO t SELECT -99999999999999999999999999999999999.000000000000000000000000000001 "
               "+ seq FROM seq_1_to_1000")
    schema, chunks = split(cdc_conn, database, 100)
    assert len(chunks) >= 8 and max(assert_exact_cover(cdc_conn, schema, chunks)) <= 130


def test_empty_and_one_row_tables_are_one_chunk(admin, cdc_conn, database) -> None:
    make_table(admin, "(id INT PRIMARY KEY)")
    schema, chunks = split(cdc_conn, database, 10)
    assert [(c.start, c.end) for c in chunks] == [(None, None)]
    make_table(admin, "(id INT PRIMARY KEY)", values=[(42,)])
    schema, chunks = split(cdc_conn, database, 1)
    assert [(c.start, c.end) for c in chunks] == [(None, None)]


def test_chunk_size_one_gives_one_row_per_chunk(admin, cdc_conn, database) -> None:
    make_table(admin, "(id INT PRIMARY KEY)", values=[(i * 100_000,) for i in range(20)])  # too sparse to split evenly
    schema, chunks = split(cdc_conn, database, 1)
    assert assert_exact_cover(cdc_conn, schema, chunks) == [1] * 20


def test_nullable_chunk_key_puts_nulls_in_the_first_chunk(admin, cdc_conn, database) -> None:
    make_table(admin, "(id INT PRIMARY KEY, v INT NULL, note VARCHAR(5))",
               values=[(i, None, "n") for i in range(3)] + [(3 + i, i, "x") for i in range(50)])
    schema, chunks = split(cdc_conn, database, 10, chunk_key="v")
    assert schema.chunk_key == "v" and schema.row_key == ("id",)
    with cdc_conn.cursor() as cur:
        where, params = chunk_where(chunks[0], schema.chunk_key_column)
        cur.execute(f"SELECT COUNT(*) FROM t WHERE {where} AND v IS NULL", params)
        assert cur.fetchone()[0] == 3
        total = 0
        for chunk in chunks:
            where, params = chunk_where(chunk, schema.chunk_key_column)
            cur.execute(f"SELECT COUNT(*) FROM t WHERE {where}", params)
            total += cur.fetchone()[0]
    assert total == 53


@pytest.mark.parametrize("ddl", ["(v INT)", "(v INT, UNIQUE KEY (v))", "(v INT NOT NULL, w INT, UNIQUE KEY (v, w))"])
def test_table_without_row_identity_is_refused_naming_the_option(admin, cdc_conn, database, ddl: str) -> None:
    """No primary key and no UNIQUE index on NOT NULL columns only (a UNIQUE index repeats NULLs): a keyless
    table (a multiset of whole rows), refused by the split without chunk_key_columns, split on the column
    it names (not unique: the splitter does not care)."""
    make_table(admin, ddl)
    with pytest.raises(TableNotSupportedError, match=rf"{database}.t has no primary key .*chunk_key_columns="):
        discover_tables(cdc_conn, matching(database, include_tables=rf"{database}\.t"))
    schema = load_table_schema(cdc_conn, TableId(database, "t"))
    assert schema.keyless and schema.chunk_key == ""
    with pytest.raises(TableNotSupportedError, match="set chunk_key_columns"):
        split_table(cdc_conn, schema, 10)
    (schema,) = discover_tables(cdc_conn, matching(database, include_tables=rf"{database}\.t"),
                                chunk_key_columns={f"{database}.t": "v"})
    assert schema.keyless and schema.chunk_key == "v" and split_table(cdc_conn, schema, 10)


def test_unique_not_null_index_keys_a_table_without_primary_key(admin, cdc_conn, database) -> None:
    """The narrowest UNIQUE index whose columns are all NOT NULL (ties by name) is the key, and the table is
    split on its first column; nullable and wider unique indexes are passed over."""
    make_table(admin, "(a INT NOT NULL, b VARCHAR(8) NOT NULL, c INT NOT NULL, email VARCHAR(20) NULL, "
                      "UNIQUE KEY `a email` (email), UNIQUE KEY wide (a, b, c), UNIQUE KEY pair (b, a), "
                      "UNIQUE KEY pair2 (c, a), KEY single (c))",
               "INSERT INTO t SELECT seq MOD 7, CONCAT('b', seq), seq, NULL FROM seq_1_to_500")
    schema, chunks = split(cdc_conn, database, 50)
    assert (schema.key_index, schema.row_key, schema.chunk_key) == ("pair", ("b", "a"), "b")
    assert assert_exact_cover(cdc_conn, schema, chunks) and len(chunks) > 5


def test_unsplittable_key_type_names_the_option(admin, cdc_conn, database) -> None:
    make_table(admin, "(e ENUM('x','y') PRIMARY KEY)", values=[("x",)])
    schema = load_table_schema(cdc_conn, TableId(database, "t"))
    with pytest.raises(TableNotSupportedError, match="set chunk_key_column"):
        split_table(cdc_conn, schema)


@pytest.mark.parametrize("group", ["'g'", "IF(seq MOD 2, 'g', 'G')", "ELT(1 + seq MOD 3, 'g', 'G', 'ĝ')"])
def test_non_unique_chunk_key_still_progresses(admin, cdc_conn, database, group: str) -> None:
    # mixed case and accents are one value under general_ci: the split must see them as equal
    make_table(admin, "(id INT PRIMARY KEY, grp VARCHAR(5) COLLATE utf8mb4_general_ci, KEY (grp))",
               f"INSERT INTO t SELECT seq, CONCAT({group}, seq DIV 50) FROM seq_1_to_500")
    schema, chunks = split(cdc_conn, database, 10, chunk_key="grp")
    assert len(chunks) == 11  # one chunk per group of equal keys: g0 .. g10
    assert_exact_cover(cdc_conn, schema, chunks)
