"""Which index identifies a table's rows, and the refusal of tables without one (docs/design/invariants.md,
invariant 7): the choice among UNIQUE indexes, its round trip through plans and checkpoints, and older documents."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import Column, TableId, TableSchema, row_identity
from airflow_provider_mysqlcdc.exceptions import TableNotSupportedError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.merge import merge_changes
from tests.unit.merge_rows import change, changes, snapshot_rows

T = TableId("shop", "lines")
COLUMNS = (
    Column("region", "varchar", "varchar(8)", nullable=False),
    Column("n", "int", "int(11)", nullable=False),
    Column("code", "varchar", "varchar(12)", nullable=False),
    Column("email", "varchar", "varchar(40)", nullable=True),
    Column("v", "int", "int(11)", nullable=True),
)


def test_the_primary_key_wins_over_any_unique_index() -> None:
    assert row_identity(COLUMNS, {"a_code": ["code"], "PRIMARY": ["region", "n"]}) == ("PRIMARY", ("region", "n"))


def test_the_narrowest_unique_not_null_index_is_the_key_ties_by_name() -> None:
    indexes = {"pair": ["region", "n"], "u_code": ["code"], "t_code_too": ["code"]}
    assert row_identity(COLUMNS, indexes) == ("t_code_too", ("code",))
    # the order information_schema lists them in does not matter
    assert row_identity(COLUMNS, dict(reversed(list(indexes.items())))) == ("t_code_too", ("code",))
    assert row_identity(COLUMNS, {"pair": ["region", "n"], "wide": ["region", "n", "code"]}) == ("pair",
                                                                                                 ("region", "n"))


@pytest.mark.parametrize("indexes", [
    {},
    {"u_email": ["email"]},  # NULLs repeat in a UNIQUE index
    {"u_mixed": ["code", "v"]},  # one nullable column is enough to repeat
    {"u_expr": ["code", None]},  # a functional key part (MySQL 8) names no column
])
def test_no_usable_index_gives_no_key(indexes: dict[str, list[str | None]]) -> None:
    assert row_identity(COLUMNS, indexes) == ("", ())


def test_a_unique_index_key_round_trips_with_its_name() -> None:
    schema = TableSchema(T, COLUMNS, ("region", "n"), "code", key_index="pair")
    again = TableSchema.from_dict(schema.to_dict())
    assert again == schema and again.row_key == ("region", "n") and again.chunk_key == "code"
    assert again.key_description == "UNIQUE index pair (region, n)"
    assert TableSchema(T, COLUMNS, ("code",)).key_description == "primary key (code)"


def test_documents_without_key_index_are_primary_keys() -> None:
    old = TableSchema(T, COLUMNS, ("code",)).to_dict()
    del old["key_index"]
    assert TableSchema.from_dict(old).key_index == "PRIMARY"


def test_a_table_without_key_is_keyless_and_refused_only_where_it_is_split() -> None:
    keyless = TableSchema(T, COLUMNS, ())
    assert keyless.keyless and keyless.key_index == "" and keyless.chunk_key == ""
    with pytest.raises(TableNotSupportedError) as error:
        keyless.chunk_key_column  # noqa: B018 (the property refuses)
    message = str(error.value)
    assert "shop.lines has no primary key and no UNIQUE index whose columns are all NOT NULL" in message
    assert "chunk_key_columns={'shop.lines': '<column>'}" in message and "add a primary key" in message
    with pytest.raises(TableNotSupportedError, match="multiset"):
        keyless.row_key  # noqa: B018 (no upsert path may take a keyless table)


def test_a_keyless_table_split_on_a_column_round_trips_as_keyless() -> None:
    schema = TableSchema(T, COLUMNS, (), "v")
    again = TableSchema.from_dict(schema.to_dict())
    assert again == schema and again.keyless and again.chunk_key == "v"
    assert again.key_description == "whole row (no key; duplicates kept)"


def test_an_older_plan_or_checkpoint_keyed_by_the_chunk_key_alone_is_refused_at_stream_start() -> None:
    """Before the key index existed, a table without a primary key was kept with an empty key and its
    chunk key as the row key: reading such a document (the stream's start reads the plans and its
    checkpoint) refuses it and says what to do with the lake."""
    keyless = {"database": "shop", "table": "lines", "columns": [c.to_dict() for c in COLUMNS],
               "primary_key": [], "chunk_key": "v"}
    with pytest.raises(TableNotSupportedError, match=r"keyed its rows by the chunk key 'v' alone.*delete the "
                                                     r"table's folder in the lake"):
        TableSchema.from_dict(keyless)
    checkpoint = Checkpoint(3, BinlogOffset("mysql-bin.000001", 4), {T: TableSchema(T, COLUMNS, ("code",))})
    document = checkpoint.to_dict()
    assert Checkpoint.from_dict(document).schemas[T].row_key == ("code",)
    document["schemas"]["shop.lines"] = keyless
    with pytest.raises(TableNotSupportedError, match="shop.lines has no primary key"):
        Checkpoint.from_dict(document)


def test_the_merge_retracts_the_image_a_row_had_in_an_earlier_chunk(tmp_path: Path) -> None:
    """A row moved by its chunk key from a chunk read earlier (HW at 100) to one read later (HW at 300) is
    in both snapshots. The stream emits only the earlier image's retraction (at 200), and later the row
    changes again (at 400): matched on the state key (key and chunk key), one row is left, the last one."""
    columns = (Column("id", "bigint", "bigint(20)", nullable=False), Column("name", "varchar", "varchar(9)"),
               Column("code", "varchar", "varchar(9)", nullable=False))
    schema = TableSchema(T, columns, ("id",), "code", key_index="u_id")
    assert schema.state_key == ("id", "code") and TableSchema(T, columns, ("code",)).state_key == ("code",)
    uri = str(tmp_path / "current")
    for code, hw in (("a", (1, 100)), ("m", (1, 300))):
        write_deltalake(uri, snapshot_rows(range(7, 8), hw=hw, code=pa.array([code])), partition_by=["_batch"],
                        mode="append")
    moved = [change("-U", 7, "n7", 200, code="a"), change("-U", 7, "n7", 400, code="m"),
             change("+U", 7, "n7", 400, 1, code="z")]
    merge_changes(DeltaLocation(uri), changes(*moved, extra={"code": pa.string()}), list(schema.state_key),
                  through_seq=1)
    assert DeltaTable(uri).to_pyarrow_table(columns=["id", "code"]).to_pylist() == [{"id": 7, "code": "z"}]
