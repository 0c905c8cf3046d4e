"""engine.options.rendered: an operator argument means the same native or rendered to text, on every operator."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

ORDERS, ITEMS = TableId("shop", "orders"), TableId("shop", "items")


@pytest.mark.parametrize("value", [["shop.orders", "shop.items"], "['shop.orders', 'shop.items']",
                                   '["shop.orders", "shop.items"]', "shop.orders, shop.items", ("shop.orders", ITEMS)])
def test_table_lists_in_every_form(value: Any) -> None:
    assert rendered.table_list(value) == (ORDERS, ITEMS)


@pytest.mark.parametrize("value", [None, "None", "", "[]", []])
def test_no_tables_is_allowed_only_when_optional(value: Any) -> None:
    assert rendered.table_list(value, required=False) == ()
    with pytest.raises(InvalidOptionError, match="tables must be a non-empty list of 'database.table'"):
        rendered.table_list(value)


def test_literals_from_json_or_python_text() -> None:
    summary = "{'shop.orders': {'equal': False, 'differing_chunks': [3], 'note': None}}"
    assert rendered.literal("resnapshot", summary) == {"shop.orders": {"equal": False, "differing_chunks": [3],
                                                                       "note": None}}
    assert rendered.literal("resnapshot", '{"shop.orders": [[1, null]]}') == {"shop.orders": [[1, None]]}
    assert rendered.literal("resnapshot", {"shop.orders": "all"}) == {"shop.orders": "all"}
    assert rendered.literal("resnapshot", "None") is None


def test_scalars() -> None:
    assert rendered.whole_number("n", "12") == 12
    assert rendered.number("x", "2.5", float) == 2.5
    assert rendered.optional_seconds("s", "None") is None
    assert rendered.optional_seconds("s", "30") == 30.0
    assert (rendered.flag("f", "True"), rendered.flag("f", False)) == (True, False)
    assert rendered.optional_text("None") is None
    assert rendered.text_list("p", "['a.*', 'b']") == ("a.*", "b")
    assert rendered.text_list("p", "a.*") == ("a.*",)
    assert rendered.text_mapping("m", "{'shop.items': 'sku'}", "{}") == {"shop.items": "sku"}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rendered.whole_number("rows_per_batch", "0"), "rows_per_batch must be a whole number >= 1, not '0'"),
    (lambda: rendered.whole_number("readers_per_batch", True), "readers_per_batch must be a whole number >= 1"),
    (lambda: rendered.number("poll_interval", "soon", float), "poll_interval must be a number, not 'soon'"),
    (lambda: rendered.optional_seconds("wait_seconds", "-1"), "wait_seconds must be >= 0"),
    (lambda: rendered.flag("fail_on_difference", "0"), "fail_on_difference must be True or False, not '0'"),
    (lambda: rendered.literal("resnapshot", "{'shop.orders': "), "resnapshot must be a list or mapping"),
    (lambda: rendered.table_list("['shop.orders', 'shop.orders']"), "tables names a table twice"),
    (lambda: rendered.text_mapping("chunk_key_columns", "['sku']", "{'db.table': 'column'}"),
     "chunk_key_columns must be a mapping like {'db.table': 'column'}"),
])
def test_bad_values_name_the_argument(call: Any, message: str) -> None:
    with pytest.raises(InvalidOptionError) as error:
        call()
    assert message in str(error.value)
