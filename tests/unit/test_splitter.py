"""The even split's arithmetic and the option checks, without a server."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import Column
from airflow_provider_mysqlcdc.cdc.split.splitter import chunk_rows, even_bounds, validate_split_options
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

UNSIGNED = Column("id", "bigint", "bigint(20) unsigned", nullable=False, unsigned=True)
SIGNED = Column("id", "int", "int(11)", nullable=False)
MONEY = Column("m", "decimal", "decimal(12,2)", precision=12, scale=2)
WIDE = Column("w", "decimal", "decimal(65,30)", precision=65, scale=30)
DEFAULTS = (0.05, 1000.0)


def test_bounds_never_pass_the_maximum_near_two_to_the_64() -> None:
    top = 2**64 - 1
    # factor (25 + 1) / 26 = 1, step 10
    assert even_bounds(UNSIGNED, top - 25, top, 26, 10, DEFAULTS) == [top - 15, top - 5]
    # step lands exactly on the maximum: it starts the last chunk, nothing above it
    assert even_bounds(UNSIGNED, top - 20, top, 21, 10, DEFAULTS) == [top - 10, top]


def test_integer_step_is_whole_and_at_least_one() -> None:
    # factor 10 / 1000 = 0.01 -> step 0.1, rounded up to 1
    assert even_bounds(SIGNED, 1, 10, 1000, 10, (0.001, 1000.0)) == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    # factor 100 / 30 -> step 33.3 truncated to 33
    assert even_bounds(SIGNED, -50, 49, 30, 10, DEFAULTS) == [-17, 16, 49]


def test_decimal_step_is_rounded_up_to_the_scale() -> None:
    # factor 1.01 / 303 = 0.00333.. -> step 0.0333.. -> 0.04
    assert even_bounds(MONEY, Decimal("0.00"), Decimal("0.10"), 303, 10, (0.001, 1.0)) == [
        Decimal("0.04"), Decimal("0.08")
    ]


def test_wide_decimal_keys_keep_every_digit() -> None:
    low = Decimal("-99999999999999999999999999999999999.000000000000000000000000000001")
    high = Decimal("-99999999999999999999999999999998999.000000000000000000000000000001")
    bounds = even_bounds(WIDE, low, high, 1001, 250, DEFAULTS)
    assert bounds == [Decimal(f"-9999999999999999999999999999999{n}.000000000000000000000000000001")
                      for n in ("9749", "9499", "9249", "8999")]
    assert all(b.as_tuple().exponent == -30 for b in bounds)  # exact: nothing rounded to 28 digits


@pytest.mark.parametrize(("rows", "low", "high"), [(0, 1, 1000), (10, 1, 10**9), (10**6, 1, 100)])
def test_uneven_keys_and_missing_estimates_give_no_even_split(rows: int, low: int, high: int) -> None:
    assert even_bounds(SIGNED, low, high, rows, 10, DEFAULTS) is None


@pytest.mark.parametrize(
    ("size", "lower", "upper"),
    [(0, 0.05, 1000.0), (1.5, 0.05, 1000.0), (True, 0.05, 1000.0), (8096, 0, 1.0), (8096, 2.0, 1.0),
     (8096, 0.05, float("inf")), (8096, float("nan"), 1.0)],
)
def test_bad_split_options_say_what_to_set(size: object, lower: float, upper: float) -> None:
    with pytest.raises(InvalidOptionError, match="chunk_size|distribution_factor"):
        validate_split_options(size, lower, upper)  # type: ignore[arg-type]


def test_good_split_options_pass() -> None:
    validate_split_options(1, 0.5, 0.5)
    validate_split_options(8096, *DEFAULTS)


def test_wide_rows_make_chunks_of_fewer_rows() -> None:
    mib = 1024 * 1024
    assert chunk_rows(8096, 64 * mib, 160) == 8096  # narrow rows: chunk_size decides
    assert chunk_rows(8096, 64 * mib, 6 * mib) == 10  # 6 MiB rows: 10 fit into 64 MiB
    assert chunk_rows(8096, 64 * mib, 100 * mib) == 1  # a row wider than the budget: one a chunk
    assert chunk_rows(8096, 64 * mib, 0) == 8096  # no estimate: rows only
