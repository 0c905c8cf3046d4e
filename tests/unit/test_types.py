"""The type registry and mapping as a table, and the conversions the MariaDB server cannot exercise (MySQL's JSON
and VECTOR)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.schema.converters import RowConverter, arrow_type, select_expression
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.type_registry import TYPES, UNSUPPORTED, type_of
from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import select_expression as connectorx_expression
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError


def col(data_type: str, column_type: str = "", **kw: object) -> Column:
    return Column("c", data_type, column_type or data_type, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (col("tinyint"), pa.int8()), (col("tinyint", unsigned=True), pa.uint8()),
        (col("smallint"), pa.int16()), (col("mediumint", unsigned=True), pa.uint32()),
        (col("int"), pa.int32()), (col("bigint", unsigned=True), pa.uint64()),
        (col("decimal", precision=38, scale=10), pa.decimal128(38, 10)),
        (col("decimal", precision=65, scale=30), pa.decimal256(65, 30)),
        (col("float"), pa.float32()), (col("double"), pa.float64()),
        (col("bit", "bit(1)", precision=1), pa.bool_()), (col("bit", "bit(9)", precision=9), pa.uint64()),
        (col("year"), pa.int16()), (col("date"), pa.date32()), (col("time"), pa.duration("us")),
        (col("datetime"), pa.timestamp("us")), (col("timestamp"), pa.timestamp("us", tz="UTC")),
        (col("varchar"), pa.string()), (col("enum"), pa.string()), (col("set"), pa.string()),
        (col("json"), pa.string()), (col("longblob"), pa.binary()), (col("point"), pa.binary()),
        (col("vector", "vector(3)"), pa.list_(pa.float32())),
    ],
)
def test_arrow_types(column: Column, expected: pa.DataType) -> None:
    assert arrow_type(column) == expected


def test_unknown_type_is_refused_by_name() -> None:
    with pytest.raises(TableNotSupportedError, match="'c' has type inet6"):
        arrow_type(col("inet6"))


def test_float_is_selected_through_a_double() -> None:
    assert select_expression(col("float")) == "(`c` + 0e0) AS `c`"
    assert select_expression(col("double")) == "`c`"


def test_mysql_binary_json_and_its_text_convert_alike() -> None:
    """SELECT prints MySQL's canonical text, kept as it is; the binlog's binary JSON (a MySQL 8.0.22 server's
    bytes, tests/fixtures/mysql_binlogs/rust_mysql_common/json.binlog.000001) is rendered as the same text, and
    connectorx reads that text as a string."""
    schema = TableSchema(TableId("d", "t"), (Column("id", "int", "int"), Column("j", "json", "json")), ("id",))
    convert = RowConverter(schema)
    text = '{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}'
    binary = bytes.fromhex("000300330019000300" "1c000400200004000518000c24000c2f00616765646174616e616d65"
                           "0a78787878787878787878034a6f65")
    assert convert.from_select((1, text)) == convert.from_binlog({"id": 1, "j": binary}, {}) == (1, text)
    assert connectorx_expression(col("json")) == "CAST(`c` AS CHAR) AS `c`"


def test_mysql_vector_reads_as_float32_values() -> None:
    """SELECT reads a VECTOR as its bytes (CAST AS BINARY), the binlog carries them: both become its floats (the
    bytes the owner of tests/fixtures/mysql_binlogs/rust_mysql_common/vector.binlog asserts)."""
    vector = col("vector", "vector(3)")
    schema = TableSchema(TableId("d", "t"), (Column("id", "int", "int"), vector), ("id",))
    raw = bytes([205, 204, 140, 63, 205, 204, 12, 64, 51, 51, 83, 64])
    floats = [float(pa.scalar(v, pa.float32()).as_py()) for v in (1.1, 2.2, 3.3)]
    convert = RowConverter(schema)
    assert convert.from_select((1, raw)) == convert.from_binlog({"id": 1, "c": raw}, {}) == (1, floats)
    assert select_expression(vector) == connectorx_expression(vector) == "CAST(`c` AS BINARY) AS `c`"
    read = type_of(vector).from_connectorx(pa.chunked_array([pa.array([raw, None])]), arrow_type(vector))
    assert read.to_pylist() == [floats, None]


def test_negative_fractional_time_repair() -> None:
    schema = TableSchema(TableId("d", "t"), (Column("t", "time", "time(6)", datetime_precision=6),), ("t",))
    decoded_by_library = -dt.timedelta(seconds=45296, microseconds=999999)  # for -12:34:56.000001
    assert RowConverter(schema).from_binlog({"t": decoded_by_library}, {}) == (
        -dt.timedelta(seconds=45296, microseconds=1),
    )


def test_each_type_name_has_one_row_of_the_registry() -> None:
    names = [name for spec in TYPES for name in spec.names]
    assert len(names) == len(set(names))
    assert all(type_of(col(name)).names == spec.names for spec in TYPES for name in spec.names)


def test_an_unsupported_type_is_read_as_it_is() -> None:
    inet6 = col("inet6")
    assert type_of(inet6) is UNSUPPORTED
    assert select_expression(inet6) == connectorx_expression(inet6) == "`c`"
    schema = TableSchema(TableId("d", "t"), (Column("id", "int", "int"), inet6), ("id",))
    assert RowConverter(schema).from_binlog({"id": 1, "c": b"\x00"}, {}) == (1, b"\x00")


def test_connectorx_reads_what_it_would_panic_on_through_sql() -> None:
    assert connectorx_expression(col("decimal", precision=65, scale=30)) == "CAST(`c` AS CHAR) AS `c`"
    assert connectorx_expression(col("point")) == "ST_AsWKB(`c`) AS `c`"
    assert connectorx_expression(col("varchar")) == connectorx_expression(col("varchar"), exact=True) == "`c`"


def test_connectorx_reads_dates_as_they_are_until_it_panics_on_one() -> None:
    for name, unit in (("date", "DAY"), ("datetime", "SECOND"), ("timestamp", "SECOND")):
        assert connectorx_expression(col(name)) == "`c`"
        assert connectorx_expression(col(name), exact=True) == f"(`c` + INTERVAL 0 {unit}) AS `c`"
    assert connectorx_expression(col("time"), exact=True) == connectorx_expression(col("time"))


def test_year_0_read_by_connectorx_becomes_null() -> None:
    """connectorx reads year 0 (the proleptic calendar's 1 BC), which Python's dates, SELECT and the binlog
    have not."""
    year_0 = pa.scalar(-62_167_219_200_000_000, pa.int64()).cast(pa.timestamp("us"))
    year_1 = pa.scalar(dt.datetime(1, 1, 1), pa.timestamp("us"))
    values = pa.chunked_array([pa.array([year_0, year_1, None], pa.timestamp("us"))])
    assert type_of(col("datetime")).from_connectorx(values, pa.timestamp("us")).to_pylist() == [
        None, dt.datetime(1, 1, 1), None]
    days = pa.chunked_array([pa.array([-719_528, -719_162, 0], pa.int32()).cast(pa.date32())])
    assert type_of(col("date")).from_connectorx(days, pa.date32()).to_pylist() == [
        None, dt.date(1, 1, 1), dt.date(1970, 1, 1)]
    assert type_of(col("date")).from_connectorx(days[1:], pa.date32()).equals(days[1:])


def test_empty_binary_strings_from_mysql_replication_are_bytes() -> None:
    schema = TableSchema(TableId("d", "t"), (Column("b", "binary", "binary(2)", char_max_length=2),
                                             Column("v", "varbinary", "varbinary(2)")), ("b",))
    assert RowConverter(schema).from_binlog({"b": "", "v": ""}, {}) == (b"\x00\x00", b"")
