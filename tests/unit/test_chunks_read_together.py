"""Chunks read by one SELECT (``ArrowSelect.query_many``: neighbours as one key range) are parted in
Arrow (``arrow_select._in_range``) exactly as each chunk's own WHERE (``chunks.chunk_where``) would select
them: every row in one chunk, the bounds half-open, the unsigned 64-bit extremes compared exactly, a NULL
key in the first chunk only (and in none when the key is NOT NULL)."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.arrow_select import ArrowSelect, _in_range
from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.schema import Column, TableId, TableSchema

TABLE = TableId("shop", "orders")
TOP = 2**64 - 1
CHUNKS = [Chunk(TABLE, 0, None, 5), Chunk(TABLE, 1, 5, 2**63), Chunk(TABLE, 2, 2**63, TOP), Chunk(TABLE, 3, TOP, None)]


def parted(keys: list[int | None], nullable: bool) -> list[list[int | None]]:
    key = pa.chunked_array([pa.array(keys, pa.uint64())])
    return [key.filter(_in_range(key, chunk, nullable)).to_pylist() for chunk in CHUNKS]


def test_each_row_lands_in_the_chunk_whose_half_open_range_holds_it() -> None:
    keys = [0, 4, 5, 6, 2**63 - 1, 2**63, TOP - 1, TOP]
    assert parted(keys, nullable=False) == [[0, 4], [5, 6, 2**63 - 1], [2**63, TOP - 1], [TOP]]


def test_a_null_key_goes_to_the_first_chunk_of_a_nullable_key_only() -> None:
    assert parted([None, 3, 7], nullable=True) == [[None, 3], [7], [], []]
    assert parted([None, 3, 7], nullable=False) == [[3], [7], [], []]


def test_neighbouring_chunks_are_one_key_range_of_the_select() -> None:
    schema = TableSchema(TABLE, (Column("id", "bigint", "bigint(20)", nullable=False),), ("id",))
    select = ArrowSelect(ConnectionConfig("db", "cdc"), schema)
    chunks = [Chunk(TABLE, 0, None, 5), Chunk(TABLE, 1, 5, 9), Chunk(TABLE, 3, 12, 20), Chunk(TABLE, 4, 20, None)]
    where = select.query_many(chunks).split(" WHERE ", 1)[1]
    assert where == "(`id` < 9) OR (`id` >= 12)"
