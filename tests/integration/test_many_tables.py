"""A stream of 50 tables whose cost follows the changes (issue 27): writes spread over every table are
committed (each batch's tables at once) until the replica equals the source; the checkpoint names the
tables' schemas instead of holding them, so it does not grow with the columns of tables a batch did not
touch; and a MERGE interval after a batch of two tables opens no other table's current Delta table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.discovery import load_table_schema
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.normalize import row_key_of
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.engine.options.stream_options import CommitLimits, StreamOptions, StreamProgress
from airflow_provider_mysqlcdc.engine.stream.stream_runner import StreamRunner
from airflow_provider_mysqlcdc.lake.handle import DeltaLocation, Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_table
from tests.arrow_rows import canonical_rows
from tests.compared_rows import current_rows, table_contents

TABLES = 50
WIDE = 30
"""Extra columns of every table: written into each checkpoint, 50 such schemas would be ~200 KB."""


@pytest.fixture()
def many(admin: Any, database: str) -> list[TableId]:
    extra = ", ".join(f"w{k} VARCHAR(30) DEFAULT 'w'" for k in range(WIDE))
    with admin.cursor() as cur:
        for i in range(TABLES):
            cur.execute(f"CREATE TABLE many_{i:02d} (id INT PRIMARY KEY, v VARCHAR(20), n INT, {extra})")
    return [TableId(database, f"many_{i:02d}") for i in range(TABLES)]


def run_stream(config: ConnectionConfig, options: StreamOptions, during: Iterator[None] | None = None) -> None:
    """One run of the stream until caught up and idle (a MERGE after every batch, and at its stop); ``during``
    is entered after the runner opened the lake and left when it stopped."""
    runner, control = StreamRunner(options, config), config.connect()
    try:
        checkpoint = runner.open(control)
        if during is not None:
            next(during)
        runner.run(control, checkpoint, StreamProgress.start(), may_wait=False)
    finally:
        control.close()
        if during is not None:
            next(during, None)


def test_a_stream_of_many_tables_commits_and_merges_what_changed(mariadb_server, admin, cdc_conn, many, tmp_path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = ConnectionConfig(mariadb_server.host, mariadb_server.cdc_user, mariadb_server.cdc_password,
                              mariadb_server.port)
    base_uri = str(tmp_path / "lake")
    options = StreamOptions(base_uri, tuple(many), StartupMode.LATEST, stop_after_idle_seconds=0,
                            merge_interval_seconds=0.001, limits=CommitLimits(max_events=700),
                            writer="many tables test")
    run_stream(config, options)  # the first checkpoint, at the binlog's end

    # changes spread over every table, in transactions spanning many of them
    with admin.cursor() as cur:
        for round_ in range(4):
            cur.execute("BEGIN")
            for i, table in enumerate(many):
                cur.execute(f"INSERT INTO {table.quoted} (id, v, n) SELECT seq, CONCAT('r', {round_}), seq * {i} "
                            f"FROM seq_{round_ * 10 + 1}_to_{round_ * 10 + 10}")
            cur.execute("COMMIT")
        for table in many[::3]:
            cur.execute(f"UPDATE {table.quoted} SET v = 'updated', w3 = 'x' WHERE id % 4 = 0")
            cur.execute(f"DELETE FROM {table.quoted} WHERE id % 7 = 0")
    run_stream(config, options)

    lake = Lake.at(base_uri)
    for table in many:
        schema = load_table_schema(cdc_conn, table)
        source, key = table_contents(cdc_conn, schema), row_key_of(schema)
        assert {key(r): r for r in canonical_rows(read_table(base_uri, str(table)))} == source, table
        assert {key(r): r for r in current_rows(base_uri, schema)} == source, f"{table} through deltalake"

    document = lake.read_json(lake.checkpoint)
    size = len(json.dumps(document))
    inline = sum(len(json.dumps(load_table_schema(cdc_conn, t).to_dict())) for t in many)
    refs = document["schemas"].values()
    assert all(isinstance(r, str) for r in refs) and len(set(refs)) == TABLES  # a document per table, named
    assert size < inline / 10, (size, inline)
    schema_files = sorted((Path(lake.root) / "_stream" / "schemas").iterdir())

    # a batch of two tables: the MERGE after it opens their current tables only, the rest keep their versions
    touched = many[7], many[31]
    versions = {t: DeltaTable(lake.table(t).current.uri).version() for t in many}
    opened: list[str] = []
    real_open = DeltaLocation.open

    def recording() -> Iterator[None]:
        monkeypatch.setattr(DeltaLocation, "open",
                            lambda self, from_log=False: opened.append(self.uri) or real_open(self, from_log))
        yield
        monkeypatch.setattr(DeltaLocation, "open", real_open)

    with admin.cursor() as cur:
        for table in touched:
            cur.execute(f"UPDATE {table.quoted} SET n = -n WHERE id < 5")
    run_stream(config, options, recording())
    current_opened = {u for u in opened if u.endswith("/current")}
    assert current_opened == {lake.table(t).current.uri for t in touched}
    assert {t: DeltaTable(lake.table(t).current.uri).version() for t in many if t not in touched} == {
        t: v for t, v in versions.items() if t not in touched}
    for table in touched:
        schema = load_table_schema(cdc_conn, table)
        key = row_key_of(schema)
        assert {key(r): r for r in current_rows(base_uri, schema)} == table_contents(cdc_conn, schema)
    # its checkpoint is no larger (the batch numbers of two tables changed), and no schema was written again
    assert len(json.dumps(lake.read_json(lake.checkpoint))) <= size + 16
    assert sorted((Path(lake.root) / "_stream" / "schemas").iterdir()) == schema_files
