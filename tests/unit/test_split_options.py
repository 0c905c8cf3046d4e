"""SplitOptions: the split's arguments rendered once, with a clear error for each bad value."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.retention import RetentionCheck
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

RENDERED = {
    "base_uri": "/lake", "tables": None, "include_databases": None, "include_tables": None, "exclude_tables": (),
    "chunk_key_columns": None, "chunk_size": 8096, "chunk_max_bytes": 67108864,
    "distribution_factor_lower": 0.05,
    "distribution_factor_upper": 1000.0, "rows_per_batch": 10_000_000, "max_batches": 64, "readers_per_batch": 2,
    "retention_check": "error",
}


def options(**changes: object) -> SplitOptions:
    return SplitOptions.from_values(**{**RENDERED, **changes})  # type: ignore[arg-type]


def test_rendered_text_becomes_typed_values() -> None:
    got = options(tables="['shop.orders', 'shop.items']", rows_per_batch="6000", readers_per_batch="3",
                  chunk_key_columns="{'shop.items': 'sku'}", exclude_tables="['shop\\\\.tmp_.*']",
                  retention_check="warn", chunk_max_bytes="1048576")
    assert got.tables == (TableId("shop", "orders"), TableId("shop", "items"))
    assert (got.rows_per_batch, got.readers_per_batch, got.max_batches) == (6000, 3, 64)
    assert got.chunk_key_columns == {"shop.items": "sku"}
    assert got.exclude_tables == ("shop\\.tmp_.*",)
    assert got.retention_check is RetentionCheck.WARN
    assert got.chunk_max_bytes == 1_048_576
    assert options(tables=["shop.orders"]).chunk_max_bytes == SplitOptions.chunk_max_bytes == 64 * 1024 * 1024


def test_tables_select_exact_names_or_whole_name_patterns() -> None:
    named = options(tables=["shop.orders", "crm.people"], exclude_tables=["crm.*"]).selection()
    assert not named.by_pattern and named.matches(TableId("shop", "orders"))
    assert not named.matches(TableId("shop", "orders2")) and not named.matches(TableId("crm", "people"))
    patterns = options(include_databases="shop_.*", include_tables="shop_.*\\.o.*").selection()
    assert patterns.by_pattern and patterns.matches(TableId("shop_1", "orders"))
    assert not patterns.matches(TableId("shop_1", "people")) and not patterns.matches(TableId("xshop_1", "orders"))
    assert not options(include_databases=".*").selection().matches(TableId("mysql", "user"))  # never a system schema


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "set tables=['db.table', ...] or include_databases"),
        ({"tables": ["shop.orders"], "base_uri": ""}, "base_uri must name the lake"),
        ({"tables": ["shop.orders"], "rows_per_batch": "0"}, "rows_per_batch must be a whole number >= 1, not '0'"),
        ({"tables": ["shop.orders"], "max_batches": 2.5}, "max_batches must be a whole number >= 1, not 2.5"),
        ({"tables": ["shop.orders"], "readers_per_batch": True}, "readers_per_batch must be a whole number >= 1"),
        ({"tables": ["shop.orders"], "chunk_size": 0}, "chunk_size must be a whole number of rows >= 1"),
        ({"tables": ["shop.orders"], "chunk_max_bytes": "64MB"}, "chunk_max_bytes must be a whole number >= 1"),
        ({"tables": ["shop.orders"], "chunk_max_bytes": 0}, "chunk_max_bytes must be a whole number >= 1, not 0"),
        ({"tables": ["shop.orders"], "retention_check": "sometimes"}, "retention_check"),
        ({"tables": ["shop.orders", "shop.orders"]}, "tables names a table twice"),
        ({"tables": ["shop.orders"], "chunk_key_columns": "['sku']"}, "chunk_key_columns must be a mapping"),
    ],
)
def test_bad_values_are_named(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=None) as error:
        options(**changes)
    assert message in str(error.value)


def test_the_operator_takes_its_defaults_from_the_options() -> None:
    import inspect

    from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator

    parameters = inspect.signature(MySqlChunkSplitOperator.__init__).parameters
    for name in ("chunk_size", "distribution_factor_lower", "distribution_factor_upper", "rows_per_batch",
                 "max_batches", "readers_per_batch", "retention_check"):
        assert parameters[name].default == getattr(SplitOptions, name), name


def test_unbounded_chunk_first_is_a_flag() -> None:
    assert options(tables=["shop.orders"]).unbounded_chunk_first is True
    assert options(tables=["shop.orders"], unbounded_chunk_first="False").unbounded_chunk_first is False
    with pytest.raises(InvalidOptionError, match="unbounded_chunk_first must be True or False"):
        options(tables=["shop.orders"], unbounded_chunk_first="sometimes")


def test_the_unbounded_last_chunk_is_read_first() -> None:
    from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableSchema
    from airflow_provider_mysqlcdc.cdc.split.chunks import Chunk
    from airflow_provider_mysqlcdc.engine.snapshot.snapshot_plan import unbounded_first
    from airflow_provider_mysqlcdc.lake.documents.snapshot import Plan, group_batches

    table = TableId("shop", "orders")
    schema = TableSchema(table, (Column("id", "int", "int(11)", nullable=False),), ("id",), "id")
    bounds = [None, 10, 20, 30, 40, None]
    chunks = [Chunk(table, i, bounds[i], bounds[i + 1]) for i in range(5)]
    plan = Plan(schema, chunks, group_batches(table, chunks, 2))  # batches: 0-1, 2-3, 4
    assert [b.number for b in unbounded_first(plan.batches, plan)] == [2, 0, 1]
    assert [b.number for b in unbounded_first(plan.batches[:2], plan)] == [0, 1]  # done already: order kept
    assert [c.index for c in plan.chunks_to_read(plan.batches[2])] == [4]
    two = Plan(schema, chunks, group_batches(table, chunks, 3))  # batches: 0-2, 3-4
    assert [c.index for c in two.chunks_to_read(two.batches[1])] == [4, 3]
    assert [c.index for c in two.chunks_to_read(two.batches[0])] == [0, 1, 2]
