"""``on_position_lost='archive'`` on the real MariaDB: the binlog range the server purged while the stream was
down, read from a copy of the binlog (``mariadb-binlog --read-from-remote-server --raw``), then the server.

The test server is shared by the whole session: the binlog is purged only up to its newest file, which no other
test's lake needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import BinlogPositionLostError
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.replica import read_changes
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore
from tests import s3_server
from tests.compared_rows import assert_replica
from tests.integration.binlog_admin import purge_to_newest
from tests.integration.binlog_archive import copy_binlog
from tests.integration.source_sql import run
from tests.integration.stream_task import stream_task
from tests.replica import snapshot

pytestmark = pytest.mark.usefixtures("connections")

_LOGGER = "airflow_provider_mysqlcdc.engine.stream.archive_catch_up"
LAKE_CONN_ID = "archive_s3"


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[s3_server.S3Server]:
    """An S3 server reached only through the lake connection ``LAKE_CONN_ID`` (no AWS variable set)."""
    server = s3_server.start(tmp_path / "moto.log")
    s3_server.reach_only_through(server, LAKE_CONN_ID, monkeypatch)
    try:
        yield server
    finally:
        s3_server.stop(server)


def checkpoint_of(base_uri: str) -> Checkpoint:
    checkpoint = StreamStore(Lake.at(base_uri)).read_checkpoint()
    assert checkpoint is not None
    return checkpoint


def changes_after(base_uri: str, table: str, seq: int) -> list[tuple[Any, ...]]:
    """The changelog's rows and table events committed after batch ``seq``, in order: kind, id, v."""
    changes = read_changes(base_uri, table).to_pylist()
    return [(c["_op"], c["id"], c["v"]) for c in changes if c["_stream_seq"] > seq]


def streamed(admin: Any, base_uri: str, table: str, *writes: str) -> Checkpoint:
    """A new table ``(id, v)`` streamed from the binlog's end (no snapshot) through ``writes``: the checkpoint."""
    run(admin, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")
    stream_task(base_uri, table, startup_mode="latest-offset")
    run(admin, *writes)
    stream_task(base_uri, table)
    return checkpoint_of(base_uri)


def test_the_lost_range_is_read_from_an_archive_of_the_binlog(
        admin: Any, connections: ConnectionConfig, mariadb_server: Any, database: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    table = f"{database}.archived_while_down"
    run(admin, "CREATE TABLE archived_while_down (id INT PRIMARY KEY, v INT)",
        "INSERT INTO archived_while_down VALUES (1, 1), (2, 2)")
    base_uri = str(tmp_path / "lake")
    snapshot(connections, base_uri, table, chunk_size=1, chunks_per_batch=1)  # two batches, two high watermarks
    stream_task(base_uri, table)
    before = checkpoint_of(base_uri)
    assert before.chunks  # not passed yet: the archive's changes go through the emit filter

    # the stream is down: the server writes across a rotation, a DDL among them, and its binlog is archived
    run(admin, "INSERT INTO archived_while_down VALUES (3, 3)", "INSERT INTO archived_while_down VALUES (4, 4)",
        "UPDATE archived_while_down SET v = 10 WHERE id = 1",
        "FLUSH BINARY LOGS", "DELETE FROM archived_while_down WHERE id = 2",
        "ALTER TABLE archived_while_down ADD COLUMN w INT",
        "BEGIN", "INSERT INTO archived_while_down VALUES (5, 5, 50)",
        "UPDATE archived_while_down SET w = 30 WHERE id = 3", "COMMIT")
    archive = tmp_path / "archive"
    files = copy_binlog(mariadb_server, before.offset.file, archive)
    assert files.names[0] == before.offset.file and len(files.names) >= 2
    newest = purge_to_newest(admin)
    run(admin, "INSERT INTO archived_while_down VALUES (6, 6, 60)")  # on the server only

    with pytest.raises(BinlogPositionLostError):  # the default: fail
        stream_task(base_uri, table)
    with caplog.at_level(logging.INFO, logger=_LOGGER):
        stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(archive))

    assert_replica(connections, base_uri, table)
    kinds = [c for c in changes_after(base_uri, table, before.seq) if c[0] != "!S"]
    assert kinds == [("+I", 3, 3), ("+I", 4, 4), ("-U", 1, 1), ("+U", 1, 10), ("-D", 2, 2), ("+I", 5, 5), ("-U", 3, 3),
                     ("+U", 3, 3), ("+I", 6, 6)]  # every change once, in order: none lost, none twice
    ddl = [c for c in read_changes(base_uri, table).to_pylist() if c["_op"] == "!S"]
    assert len(ddl) == 1 and "ADD COLUMN w" in ddl[0]["_ddl"]
    after = checkpoint_of(base_uri)
    assert after.offset.file == newest and after.offset.server is not None

    lines = [r.getMessage() for r in caplog.records if r.name == _LOGGER]
    assert lines[0].startswith(f"reading the binlog archive at {archive} ({files.names[0]} .. {files.names[-1]}) "
                               f"from {before.offset.file}:{before.offset.position}, the stream's checkpoint")
    assert lines[0].endswith("(found by its GTIDs)")
    assert "to its end at" in lines[1] and "changelog rows committed" in lines[1]
    assert lines[2].startswith(f"the server's binlog takes over from {archive} at {newest}:")


def test_an_archive_under_other_names_is_matched_by_gtids(
        admin: Any, connections: ConnectionConfig, mariadb_server: Any, database: str, tmp_path: Path) -> None:
    table, base_uri = f"{database}.renamed_archive", str(tmp_path / "lake")
    before = streamed(admin, base_uri, table, "INSERT INTO renamed_archive VALUES (1, 1), (2, 2)")

    run(admin, "INSERT INTO renamed_archive VALUES (3, 3)", "UPDATE renamed_archive SET v = 20 WHERE id = 2",
        "DELETE FROM renamed_archive WHERE id = 1")
    copied = tmp_path / "copied"
    files = copy_binlog(mariadb_server, before.offset.file, copied)
    assert files.names == [before.offset.file]  # one file: a file's rotation at its end names its successor
    number = before.offset.file.rsplit(".", 1)[1]
    newest = purge_to_newest(admin)
    run(admin, "INSERT INTO renamed_archive VALUES (4, 4)", "UPDATE renamed_archive SET v = 200 WHERE id = 2")

    # numbered past the server's binlog: its changes would sort after the server's, and are refused unread
    misnumbered = tmp_path / "misnumbered"
    misnumbered.mkdir()
    (misnumbered / "other-host-bin.999999").write_bytes((copied / before.offset.file).read_bytes())
    with pytest.raises(BinlogPositionLostError) as refused:
        stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(misnumbered))
    assert "is not a copy of the checkpoint's own binlog" in str(refused.value)
    assert "its files' numbers do not lie between" in str(refused.value)
    assert checkpoint_of(base_uri).seq == before.seq

    # another base name, the server's numbers: found by its GTIDs, then the server's binlog by them
    archive = tmp_path / "archive"
    archive.mkdir()
    (copied / before.offset.file).rename(archive / f"other-host-bin.{number}")
    stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(archive))
    assert_replica(connections, base_uri, table)
    assert changes_after(base_uri, table, before.seq) == [
        ("+I", 3, 3), ("-U", 2, 2), ("+U", 2, 20), ("-D", 1, 1), ("+I", 4, 4), ("-U", 2, 20), ("+U", 2, 200)]
    after = checkpoint_of(base_uri)
    assert after.offset.file == newest and after.offset.server is not None


def test_a_checkpoint_before_its_files_first_transaction_is_found_in_a_copy_of_that_file(
        admin: Any, connections: ConnectionConfig, mariadb_server: Any, database: str, tmp_path: Path) -> None:
    table, base_uri = f"{database}.fresh_file", str(tmp_path / "lake")
    run(admin, "CREATE TABLE fresh_file (id INT PRIMARY KEY, v INT)", "FLUSH BINARY LOGS")
    stream_task(base_uri, table, startup_mode="latest-offset")
    before = checkpoint_of(base_uri)  # after the new file's first events, before any transaction in it
    run(admin, "INSERT INTO fresh_file VALUES (1, 1)", "UPDATE fresh_file SET v = 2 WHERE id = 1")
    files = copy_binlog(mariadb_server, before.offset.file, tmp_path / "archive")
    assert files.names == [before.offset.file] and before.offset.position > 4
    newest = purge_to_newest(admin)

    stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(tmp_path / "archive"))
    assert_replica(connections, base_uri, table)
    assert changes_after(base_uri, table, before.seq) == [("+I", 1, 1), ("-U", 1, 1), ("+U", 1, 2)]
    assert checkpoint_of(base_uri).offset.file == newest


def test_an_archive_that_stops_short_of_the_server_fails_naming_both_ends(
        admin: Any, mariadb_server: Any, database: str, tmp_path: Path) -> None:
    table, base_uri = f"{database}.short_archive", str(tmp_path / "lake")
    before = streamed(admin, base_uri, table, "INSERT INTO short_archive VALUES (1, 1)")

    run(admin, "INSERT INTO short_archive VALUES (2, 2)")
    archive = tmp_path / "archive"
    files = copy_binlog(mariadb_server, before.offset.file, archive)
    run(admin, "FLUSH BINARY LOGS", "INSERT INTO short_archive VALUES (3, 3)")  # in no archived file
    newest = purge_to_newest(admin)

    with pytest.raises(BinlogPositionLostError) as failed:
        stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(archive))
    # what the archive held is committed, and the checkpoint is its end
    reached = checkpoint_of(base_uri)
    assert reached.seq > before.seq and reached.offset.file == files.names[-1]
    assert changes_after(base_uri, table, before.seq) == [("+I", 2, 2)]
    message = str(failed.value)
    assert message.startswith(f"the binlog archive at {archive} ({files.names[0]} .. {files.names[-1]}) ends at "
                              f"{reached.offset}, and the server's binlog starts at {newest}:4: the changes between "
                              f"them are in neither")
    assert failed.value.checkpoint == str(reached.offset) and failed.value.oldest == f"{newest}:4"

    # an archive that begins after the checkpoint does not hold it: nothing read, nothing written
    run(admin, "INSERT INTO short_archive VALUES (4, 4)")
    later = copy_binlog(mariadb_server, newest, tmp_path / "later")
    with pytest.raises(BinlogPositionLostError) as refused:
        stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=str(tmp_path / "later"))
    assert str(refused.value).startswith(
        f"on_position_lost is 'archive', but the binlog archive at {tmp_path / 'later'} ({later.names[0]} .. "
        f"{later.names[-1]}) does not hold the stream's checkpoint {reached.offset}: none of its transactions is one "
        f"the checkpoint's GTIDs ({reached.offset.gtid}) cover")
    assert checkpoint_of(base_uri).seq == reached.seq


def test_an_archive_on_an_object_store_is_read_with_the_lake_connection(
        admin: Any, connections: ConnectionConfig, mariadb_server: Any, database: str, tmp_path: Path,
        s3: s3_server.S3Server) -> None:
    table, base_uri = f"{database}.archive_on_s3", str(tmp_path / "lake")
    before = streamed(admin, base_uri, table, "INSERT INTO archive_on_s3 VALUES (1, 1)")
    run(admin, "INSERT INTO archive_on_s3 VALUES (2, 2)", "UPDATE archive_on_s3 SET v = 10 WHERE id = 1")
    files = copy_binlog(mariadb_server, before.offset.file, tmp_path / "archive")
    for name in files.names:
        s3.client().upload_file(str(tmp_path / "archive" / name), s3.bucket, f"binlogs/{name}")  # type: ignore[attr-defined]
    purge_to_newest(admin)

    stream_task(base_uri, table, on_position_lost="archive", binlog_archive_uri=f"s3a://{s3.bucket}/binlogs",
                lake_conn_id=LAKE_CONN_ID)
    assert_replica(connections, base_uri, table)
    assert changes_after(base_uri, table, before.seq) == [("+I", 2, 2), ("-U", 1, 1), ("+U", 1, 10)]
