"""Where a table's Delta tables live, and the one type Delta cannot store as is."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from airflow_provider_mysqlcdc.exceptions import LakeFormatError
from airflow_provider_mysqlcdc.lake.format.delta_schema import for_delta, stored_type
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.handle import changelog_uri, table_uri


def test_each_table_has_a_current_state_and_a_changelog_under_its_database_folder() -> None:
    assert table_uri("s3a://bucket/lake/", "shop.orders") == "s3://bucket/lake/shop/orders/current"
    assert changelog_uri("s3://bucket/lake", "shop.orders") == "s3://bucket/lake/shop/orders/changelog"
    assert table_uri("lake", "shop.orders") == os.path.join(os.getcwd(), "lake", "shop", "orders", "current")


def test_types_delta_lacks_are_stored_in_forms_that_hold_every_value_and_cast_back() -> None:
    values = [Decimal("-0.000000000000000000000000000001"), None, Decimal("9" * 35 + "." + "9" * 30)]
    rows = pa.table({
        "d": pa.array(values, pa.decimal256(65, 30)),
        "n": pa.array([1, 2, 3], pa.decimal128(10, 0)),
        "u": pa.array([0, 2**64 - 1, None], pa.uint64()),
        "t": pa.array([-1, 0, 3_020_399_000_000], pa.duration("us")),
    })
    stored = for_delta(rows)
    assert [stored.schema.field(c).type for c in "dnut"] == [pa.string(), pa.decimal128(10, 0),
                                                            pa.decimal128(20, 0), pa.int64()]
    assert [stored_type(rows.schema.field(c).type) for c in "dnut"] == [stored.schema.field(c).type for c in "dnut"]
    assert stored.column("d").to_pylist()[0] == "-0.000000000000000000000000000001"  # plain, not 1E-30
    assert all(f.nullable for f in stored.schema)
    assert stored.cast(rows.schema).equals(rows)


class _Conf:
    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)


class _Session:
    def __init__(self, **settings: str) -> None:
        self.conf = _Conf(settings)


def test_spark_views_use_deltas_own_reader_only_in_a_session_set_up_for_delta() -> None:
    from airflow_provider_mysqlcdc.lake.read.spark_views import has_delta_reader

    assert has_delta_reader(_Session(**{"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}))
    assert not has_delta_reader(_Session())
    assert not has_delta_reader(_Session(**{"spark.sql.extensions": "org.example.Other"}))


def test_a_table_with_column_mapping_is_refused(tmp_path: Any) -> None:
    """delta-rs reads a renamed column of a column-mapped table as NULLs: never read or write one."""
    uri = str(tmp_path / "mapped")
    write_deltalake(uri, pa.table({"a": [1]}), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(LakeFormatError, match="column mapping.*recreate the table without"):
        DeltaLocation(uri).open()
    write_deltalake(str(tmp_path / "plain"), pa.table({"a": [1]}))
    assert DeltaLocation(str(tmp_path / "plain")).open() is not None
