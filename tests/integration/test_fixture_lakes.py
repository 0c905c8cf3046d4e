"""Lakes written by earlier code are read and streamed on by this code (issue 26: formats that upgrade).

``tests/fixtures/lakes/<name>/`` holds lakes that ``dev/fixture_lakes.py`` wrote (its docstring says how):
``current`` by this version, ``4ed330d`` by that commit (stream checkpoint of format 3, its schemas inside it),
``ae74a61`` by that commit (stream checkpoint of format 2 without ``ddl``, ``visible_seq``, ``history_from`` and
``kept``; schemas without ``key_index``; changelogs without ``_ddl``).
Each is the replica of ``dev.fixture_lakes.HISTORY`` on a fresh MariaDB, ``shop.tags`` stopped in its
last stream batch. The test replays that history's statements on a fresh server of its own, which
gives the same binlog, so each lake's offsets name the same transactions; checks that each lake reads
as the source stood where the lake last streamed each table; then changes the source (inserts,
updates, a key moved, deletes, a column added) and streams each lake on from its checkpoint with both
tables (``shop.tags`` resumes where it stopped): the replica equals the source, and the checkpoint is
written in the current format. A lake whose checkpoint a newer version wrote is refused before the stream
commits anything.
"""

from __future__ import annotations

import shutil
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import row_key_of
from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo
from airflow_provider_mysqlcdc.exceptions import NewerLakeFormatError
from airflow_provider_mysqlcdc.lake.changelog import DDL_COLUMN
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes, read_table
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from dev import mariadb
from dev.fixture_lakes import TABLES, Stream, config_of, replay, run_sql
from dev.ports import free_port
from tests import replica
from tests.arrow_rows import canonical_rows
from tests.compared_rows import current_rows, table_contents

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lakes"
LAKES = sorted(p.name for p in FIXTURES.iterdir())

AFTER = [
    "BEGIN",
    "UPDATE shop.orders SET note = 'after', amount = NULL WHERE id IN (1, 2, 200)",
    "UPDATE shop.orders SET id = 201 WHERE id = 3",
    "DELETE FROM shop.orders WHERE id IN (5, 44)",
    "INSERT INTO shop.orders VALUES (300, 6, 12.5, 'after', '2026-03-01 00:00:00.5')",
    "COMMIT",
    "ALTER TABLE shop.tags ADD COLUMN color VARCHAR(10) NULL",
    "INSERT INTO shop.tags VALUES ('T100', 'after', 1.5, 'red')",
    "UPDATE shop.tags SET color = 'blue', weight = weight * 2 WHERE code IN ('T001', 'T010')",
    "DELETE FROM shop.tags WHERE code = 't046'",
]
"""What the source does after the history, which each lake streams on through."""


@dataclass(frozen=True)
class Source:
    server: mariadb.MariaDbServer
    end: BinlogOffset
    """Where the history ended: the fixture lakes' checkpoints."""
    streamed: dict[str, dict[Hashable, tuple[Any, ...]]]
    """Each table's rows where the history last streamed it: what its lake holds."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A fresh MariaDB (``server_id`` 1, as the lakes' source) with the history replayed, then ``AFTER``."""
    base = tmp_path_factory.mktemp("fixture-lakes-source")
    server = mariadb.start(base, free_port())
    conn = server.cdc_connect()
    streamed: dict[str, dict[Hashable, tuple[Any, ...]]] = {}

    def keep(step: Stream) -> None:
        streamed.update({t: table_contents(conn, load_table_schema(conn, TableId.parse(t))) for t in step.tables})

    try:
        replay(server, keep)
        end = read_current_offset(conn, ServerInfo.read(conn))
        run_sql(server, AFTER)
        yield Source(server, end, streamed)
    finally:
        conn.close()
        mariadb.stop(base)


def lake_rows(base_uri: str, schema: TableSchema) -> dict[Hashable, tuple[Any, ...]]:
    key = row_key_of(schema)
    rows = canonical_rows(read_table(base_uri, str(schema.id)))
    by_key = {key(r): r for r in rows}
    assert len(by_key) == len(rows), f"read_table gives a key of {schema.id} twice"
    return by_key


@pytest.mark.parametrize("name", LAKES)
def test_a_fixture_lake_is_read_and_streamed_on(name: str, source: Source, tmp_path: Path) -> None:
    base_uri = str(tmp_path / "lake")
    shutil.copytree(FIXTURES / name, base_uri)
    store = StreamStore(Lake.at(base_uri))
    checkpoint = store.read_checkpoint()
    assert checkpoint is not None
    found, expected = checkpoint.offset, source.end
    assert (found.file, found.position, found.gtid) == (expected.file, expected.position, expected.gtid), (
        f"the lake {name} ends at {found}, the replayed history at {expected}: this MariaDB writes another binlog "
        "than the one that made the fixture; regenerate it as dev/fixture_lakes.py says")

    # read as the source stood where the lake last streamed each table (the last batch is not merged yet),
    # the changelog with this version's columns
    assert list(checkpoint.stopped) == [TableId("shop", "tags")]
    for table in TABLES:
        schema = checkpoint.schema_of(TableId.parse(table))
        assert schema is not None
        assert lake_rows(base_uri, schema) == source.streamed[table], f"{name}: {table} where it was streamed"
        assert DDL_COLUMN in read_changes(base_uri, table).column_names

    replica.stream(config_of(source.server), base_uri, list(TABLES), merge=True)

    conn = source.server.cdc_connect()
    try:
        for table in TABLES:
            schema = load_table_schema(conn, TableId.parse(table))
            rows = table_contents(conn, schema)
            assert lake_rows(base_uri, schema) == rows, f"{name}: {table} through read_table"
            key = row_key_of(schema)
            assert {key(r): r for r in current_rows(base_uri, schema)} == rows, f"{name}: {table} through deltalake"
    finally:
        conn.close()
    assert store.lake.read_json(store.checkpoint_path)["format_version"] == Checkpoint.FORMAT.version
    streamed_on = store.read_checkpoint()
    assert streamed_on is not None and streamed_on.stopped == {}


def test_a_lake_of_a_newer_version_is_refused_before_the_stream_commits(source: Source, tmp_path: Path) -> None:
    base_uri = str(tmp_path / "lake")
    shutil.copytree(FIXTURES / "current", base_uri)
    store = StreamStore(Lake.at(base_uri))
    newer = {**store.lake.read_json(store.checkpoint_path), "format_version": Checkpoint.FORMAT.version + 1}
    store.lake.write_json(store.checkpoint_path, newer)
    versions = {t: DeltaTable(store.lake.table(t).changelog.uri).version() for t in TABLES}

    with pytest.raises(NewerLakeFormatError, match=r"checkpoint\.json has format_version 5, written by a newer version "
                                                   r"of airflow-provider-mysqlcdc; this one reads formats 2 to 4\. "
                                                   r"Upgrade airflow-provider-mysqlcdc"):
        replica.stream(config_of(source.server), base_uri, list(TABLES), merge=True)
    assert store.lake.read_json(store.checkpoint_path) == newer
    assert {t: DeltaTable(store.lake.table(t).changelog.uri).version() for t in TABLES} == versions
