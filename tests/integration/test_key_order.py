"""Sort keys from key_order agree with the server's own comparisons, pair by pair, per collation."""

from __future__ import annotations

import itertools

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import Column
from airflow_provider_mysqlcdc.cdc.split.key_order import KeyOrder, collated_parameter

TRICKY = ["", " ", "a", "A", "a ", "a\t", "a  b", "á", "à", "b", "B", "é", "E", "e", "ß", "ss", "z", "Z",
          "😀", "😁", "\U0010fffd", "日本", "~", "a\x00", "ǅ", "Ǆ", "ǆ"]
LATIN1 = ["", " ", "a", "A", "a ", "a\t", "á", "Á", "ü", "ue", "y", "ÿ", "z", "~", "ß", "ss"]


@pytest.mark.parametrize(
    ("charset", "collation", "values"),
    [
        ("utf8mb4", "utf8mb4_general_ci", TRICKY),
        ("utf8mb4", "utf8mb4_unicode_ci", TRICKY),
        ("utf8mb4", "utf8mb4_bin", TRICKY),
        ("utf8mb4", "utf8mb4_nopad_bin", TRICKY),
        ("utf8mb4", "utf8mb4_unicode_520_nopad_ci", TRICKY),
        ("latin1", "latin1_swedish_ci", LATIN1),
        ("latin1", "latin1_german2_ci", LATIN1),
    ],
)
def test_sort_keys_agree_with_the_server(cdc_conn, charset: str, collation: str, values: list[str]) -> None:
    column = Column("k", "varchar", "varchar(40)", charset=charset, collation=collation)
    keys = dict(zip(values, KeyOrder.for_column(cdc_conn, column).sort_keys(values), strict=True))
    param = collated_parameter(column)
    disagreements = []
    with cdc_conn.cursor() as cur:
        for x, y in itertools.combinations(values, 2):
            cur.execute(f"SELECT {param} < {param}, {param} = {param}", (x, y, x, y))
            less, equal = (bool(v) for v in cur.fetchone())
            if (keys[x] < keys[y], keys[x] == keys[y]) != (less, equal):
                disagreements.append((x, y, less, equal))
            if equal and hash(keys[x]) != hash(keys[y]):
                disagreements.append((x, y, "hash"))
    assert disagreements == []


def test_numbers_need_no_server(cdc_conn) -> None:
    big = Column("n", "bigint", "bigint(20) unsigned", unsigned=True)
    assert KeyOrder.for_column(None, big).sort_keys([2**64 - 1, None, 0]) == [2**64 - 1, None, 0]
