"""Chunks read by one SELECT (``ArrowSelect.query_many``: neighbours as one key range) are parted in
Arrow (``arrow_select.part_by_key``) exactly as each chunk's own WHERE (``chunks.chunk_where``) would select
them: every row in one chunk, the bounds half-open, the unsigned 64-bit extremes compared exactly, a NULL
key in the first chunk only (and in none when the key is NOT NULL); rows in key order as slices of the
SELECT's table, rows in any other order filtered, with the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import ArrowSelect, part_by_key
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk

TABLE = TableId("shop", "orders")
TOP = 2**64 - 1
CHUNKS = [Chunk(TABLE, 0, None, 5), Chunk(TABLE, 1, 5, 2**63), Chunk(TABLE, 2, 2**63, TOP), Chunk(TABLE, 3, TOP, None)]


def parted(keys: list[int | None], nullable: bool) -> list[list[int | None]]:
    table = pa.table({"id": pa.array(keys, pa.uint64()), "row": pa.array(range(len(keys)))})
    parts = part_by_key(table, "id", CHUNKS, nullable)
    assert all(p.column("id").to_pylist() == [keys[r] for r in p.column("row").to_pylist()] for p in parts)
    return [p.column("id").to_pylist() for p in parts]


KEYS = [0, 4, 5, 6, 2**63 - 1, 2**63, TOP - 1, TOP]
PARTED = [[0, 4], [5, 6, 2**63 - 1], [2**63, TOP - 1], [TOP]]


@pytest.mark.parametrize("keys", [KEYS, KEYS[::-1], [*KEYS[4:], *KEYS[:4]]], ids=["in key order", "reversed", "turned"])
def test_each_row_lands_in_the_chunk_whose_half_open_range_holds_it(keys: list[int | None]) -> None:
    assert [sorted(p) for p in parted(keys, nullable=False)] == PARTED


def test_rows_in_key_order_are_slices_of_the_selected_table() -> None:
    table = pa.table({"id": pa.array(KEYS, pa.uint64())})
    parts = part_by_key(table, "id", CHUNKS, nullable=False)
    assert [p.column("id").to_pylist() for p in parts] == PARTED
    assert all(p.column("id").chunk(0).buffers()[1].address == table.column("id").chunk(0).buffers()[1].address
               for p in parts)  # no copy: the same buffer


def test_a_null_key_goes_to_the_first_chunk_of_a_nullable_key_only() -> None:
    assert parted([None, 3, 7], nullable=True) == [[None, 3], [7], [], []]
    assert parted([None, 3, 7], nullable=False) == [[3], [7], [], []]


def test_neighbouring_chunks_are_one_key_range_of_the_select() -> None:
    schema = TableSchema(TABLE, (Column("id", "bigint", "bigint(20)", nullable=False),), ("id",))
    select = ArrowSelect(ConnectionConfig("db", "cdc"), schema)
    chunks = [Chunk(TABLE, 0, None, 5), Chunk(TABLE, 1, 5, 9), Chunk(TABLE, 3, 12, 20), Chunk(TABLE, 4, 20, None)]
    where = select.query_many(chunks).split(" WHERE ", 1)[1]
    assert where == "(`id` < 9) OR (`id` >= 12)"
