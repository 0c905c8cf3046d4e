"""Chunk JSON keeps exact key values; the chunk predicate is half-open and puts NULL keys in the first chunk."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId
from airflow_provider_mysqlcdc.cdc.split.chunks import (
    Chunk,
    FinishedChunkInfo,
    chunk_where,
    decode_key,
    encode_key,
    key_parameter,
)

TABLE = TableId("shop", "or.ders")
INT_KEY = Column("id", "bigint", "bigint(20) unsigned", nullable=False, unsigned=True)
TEXT_KEY = Column("k`ey", "varchar", "varchar(40)", nullable=True, charset="utf8mb4", collation="utf8mb4_general_ci")


@pytest.mark.parametrize(
    "value",
    [None, 0, -(2**63), 2**64 - 1, "Émoji 😀", "", Decimal("-12345678901234567890.123456789"), b"\x00\xff",
     dt.date(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.timedelta(hours=-838, microseconds=1),
     0.1],
)
def test_key_json_round_trip_is_exact(value: object) -> None:
    decoded = decode_key(json.loads(json.dumps(encode_key(value))))
    assert decoded == value and type(decoded) is type(value)


def test_chunk_json_is_compact_and_exact() -> None:
    chunk = Chunk(TABLE, 17, 2**64 - 10, None)
    compact = '{"t":"shop.or.ders","i":17,"s":18446744073709551606,"e":null}'
    assert json.dumps(chunk.to_dict(), separators=(",", ":")) == compact
    assert Chunk.from_dict(json.loads(json.dumps(chunk.to_dict()))) == chunk


@pytest.mark.parametrize(
    ("start", "end"),
    [(None, None), (None, 10), (2**64 - 10, None), ("Émoji 😀", "z"), (b"\x00\xff", b"\xff"),
     (Decimal("-1.50"), Decimal("12345678901234567890.123456789")),
     (dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999))],
)
def test_finished_chunk_info_json_round_trip_is_exact(start: object, end: object) -> None:
    high_watermark = BinlogOffset("mysql-bin.000003", 4711, events_to_skip=2, rows_to_skip=1)
    info = FinishedChunkInfo(start, end, high_watermark)
    saved = json.loads(json.dumps(info.to_dict()))
    assert set(saved) == {"s", "e", "hw"} and saved["hw"] == high_watermark.to_dict()
    again = FinishedChunkInfo.from_dict(saved)
    assert again == info and type(again.start) is type(start) and type(again.end) is type(end)
    assert again.high_watermark == high_watermark


def test_finished_chunk_info_of_a_chunk_and_its_floor() -> None:
    low, high = BinlogOffset("bin.000001", 100), BinlogOffset("bin.000001", 300)
    info = FinishedChunkInfo.of(Chunk(TABLE, 3, "a", "m"), low)
    assert info == FinishedChunkInfo("a", "m", low)
    assert info.to_dict()["hw"] == low.to_dict()
    raised = info.with_floor(high)
    assert raised == FinishedChunkInfo("a", "m", high) and raised.to_dict()["hw"] == high.to_dict()
    kept = FinishedChunkInfo("a", "m", high)
    assert kept.with_floor(low) is kept  # never lowered
    assert FinishedChunkInfo.unbounded(high) == FinishedChunkInfo(None, None, high)


def test_chunk_where() -> None:
    assert chunk_where(Chunk(TABLE, 0, None, None), INT_KEY) == ("TRUE", [])
    assert chunk_where(Chunk(TABLE, 0, None, 5), INT_KEY) == ("`id` < %s", [5])
    assert chunk_where(Chunk(TABLE, 1, 5, 9), INT_KEY) == ("`id` >= %s AND `id` < %s", [5, 9])
    assert chunk_where(Chunk(TABLE, 2, 9, None), INT_KEY) == ("`id` >= %s", [9])
    param = "CONVERT(%s USING utf8mb4) COLLATE utf8mb4_general_ci"
    assert chunk_where(Chunk(TABLE, 0, None, "m"), TEXT_KEY) == (f"(`k``ey` < {param} OR `k``ey` IS NULL)", ["m"])
    assert chunk_where(Chunk(TABLE, 1, "m", None), TEXT_KEY) == (f"`k``ey` >= {param}", ["m"])


def test_inline_literals_need_no_escaping() -> None:
    from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import literal

    assert literal("it's \\ é") == "X'" + "it's \\ é".encode().hex() + "'"
    assert literal(b"\x00'") == "X'0027'"
    assert literal(2**64 - 1) == "18446744073709551615" and literal(Decimal("-1.50")) == "-1.50"
    assert literal(dt.datetime(2024, 2, 29, 1, 2, 3, 4)) == "'2024-02-29 01:02:03.000004'"
    assert literal(dt.date(1000, 1, 1)) == "'1000-01-01'"
    assert literal(-dt.timedelta(hours=838, minutes=59, seconds=58, microseconds=999999)) == "'-838:59:58.999999'"
    where, params = chunk_where(Chunk(TABLE, 1, "a'b", None), TEXT_KEY, inline=literal)
    assert (where, params) == ("`k``ey` >= CONVERT(X'612762' USING utf8mb4) COLLATE utf8mb4_general_ci", [])


def test_bad_names_and_keys_are_named_errors() -> None:
    from airflow_provider_mysqlcdc.cdc.source.sql import quote_identifier
    from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError, TableNotSupportedError

    for name in ("orders", ".orders", "shop."):
        with pytest.raises(InvalidOptionError, match=f"table name '{name}' must be written as 'database.table'"):
            TableId.parse(name)
    assert TableId.parse("shop.or.ders") == TABLE
    with pytest.raises(InvalidOptionError, match="name is empty: check the names given in tables"):
        quote_identifier("")
    with pytest.raises(InvalidOptionError, match="NUL character"):
        quote_identifier("a\x00b")
    with pytest.raises(TableNotSupportedError, match="chunk key of type list .*set chunk_key_column"):
        encode_key([1])
    with pytest.raises(TableNotSupportedError, match="no usable charset/collation .*set chunk_key_column"):
        key_parameter(Column("k", "varchar", "varchar(3)"))
    for saved in ({"zz": 1}, {"d": "1", "f": "0x1p+0"}):
        with pytest.raises(SnapshotStateError, match="another version of the provider; run the split task again"):
            decode_key(saved)
