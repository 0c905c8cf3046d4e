"""What a re-snapshot is asked to read again: the forms of ``resnapshot``, and the chunks they name."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder
from airflow_provider_mysqlcdc.engine.verification.resnapshot import RequestedRange, ResnapshotRequest, chunk_ranges
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, group_batches

ORDERS = TableId("shop", "orders")
COLUMN = Column("id", "int", "int(11)", nullable=False)
BOUNDS = [None, 10, 20, 30, 40, None]  # (-inf,10) [10,20) [20,30) [30,40) [40,+inf)
CHUNKS = [Chunk(ORDERS, i, BOUNDS[i], BOUNDS[i + 1]) for i in range(5)]
PLAN = Plan(TableSchema(ORDERS, (COLUMN,), ("id",), "id"), CHUNKS, group_batches(ORDERS, CHUNKS, 2))
RANGES = chunk_ranges(PLAN, KeyOrder(COLUMN, list))  # integers order in Python as on the server


def chunks(value: object) -> dict[str, list[int]]:
    return {str(r.table): [c.index for c in r.chunks_of(PLAN, RANGES)] for r in ResnapshotRequest.parse_all(value)}


def test_ranges_name_the_chunks_they_overlap_both_ends_included() -> None:
    assert chunks({"shop.orders": [[10, 19]]}) == {"shop.orders": [1]}
    assert chunks({"shop.orders": [[10, 20]]}) == {"shop.orders": [1, 2]}
    assert chunks({"shop.orders": [[None, 0], [45, None]]}) == {"shop.orders": [0, 4]}
    assert chunks({"shop.orders": {"ranges": [[25, 26]], "chunks": [0]}}) == {"shop.orders": [0, 2]}
    assert chunks({"shop.orders": "all"}) == {"shop.orders": [0, 1, 2, 3, 4]}


def test_a_verification_summary_reads_its_differing_chunks_again() -> None:
    summary = {"shop.orders": {"equal": False, "differing_chunks": [3, 1], "missing": 1},
               "shop.items": {"equal": True, "differing_chunks": []}}
    assert chunks(summary) == {"shop.orders": [1, 3]}  # shop.items is equal: nothing to read
    assert ResnapshotRequest.parse_all({}) == [] and ResnapshotRequest.parse_all(None) == []


def test_a_chunk_the_plan_lacks_is_named() -> None:
    request = ResnapshotRequest(ORDERS, (RequestedRange(1, 2),), chunks=(7,))
    with pytest.raises(InvalidOptionError, match=r"has chunks 0-4, not \[7\]"):
        request.chunks_of(PLAN, RANGES)


@pytest.mark.parametrize(("value", "message"), [
    ({"shop.orders": [[1, 2, 3]]}, "a key range is [low, high]"),
    ({"shop.orders": {"chunks": [-1]}}, "must be chunk indexes"),
    ({"shop.orders": {"rows": [1]}}, "must be 'all', [[low, high], ...]"),
    ({"shop": "all"}, "database.table"),
    (["shop.orders"], "must map 'db.table'"),
])
def test_bad_requests_say_what_to_write(value: object, message: str) -> None:
    with pytest.raises(InvalidOptionError) as error:
        ResnapshotRequest.parse_all(value)
    assert message in str(error.value)
