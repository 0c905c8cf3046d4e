"""Appends committed by log entries of our own (``lake.format.delta_log``): read back by delta-rs as its own commits,
ordered against other writers by put-if-absent, checkpointed at the table's interval."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake
from deltalake.transaction import create_table_with_add_actions

from airflow_provider_mysqlcdc.exceptions import LakeFormatError, TableCommitConflictError
from airflow_provider_mysqlcdc.lake.format import delta_log
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation, DeltaVersion, _added
from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag, DataFile

APP = "test-app"


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})


def tag(version: int) -> CommitTag:
    return CommitTag(APP, version, {"stream_seq": str(version)})


def opened(path: Path, configuration: dict[str, str | None] | None = None) -> DeltaVersion:
    write_deltalake(str(path), rows(0), configuration=configuration)
    table = DeltaLocation(str(path)).open()
    assert table is not None
    return table


def engines(path: Path) -> list[str]:
    """Each commit's engine, oldest first."""
    return [str(c.get("engineInfo", "")) for c in reversed(DeltaTable(str(path)).history())]


def test_appends_are_entries_of_our_own_that_delta_rs_reads_back(tmp_path: Path) -> None:
    table = opened(tmp_path)
    for version in (1, 2, 3):
        table.append(rows(version), tag(version))
    assert engines(tmp_path)[1:] == [delta_log.ENGINE] * 3
    fresh = DeltaTable(str(tmp_path))
    assert (fresh.version(), fresh.transaction_version(APP)) == (3, 3)
    assert sorted(fresh.to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]
    # the handle moved past what delta-rs loaded without loading again, and its reads see the appends
    assert table.version() == 3
    assert sorted(table.read().column("id").to_pylist()) == [0, 1, 2, 3]
    assert [(c.version, c.appended_rows, c.metadata["stream_seq"]) for c in table.history(2)] == [(3, 1, "3"),
                                                                                                  (2, 1, "2")]


def test_a_version_another_writer_took_is_read_and_the_next_one_taken(tmp_path: Path) -> None:
    mine, other = opened(tmp_path), DeltaLocation(str(tmp_path)).open()
    assert other is not None
    mine.append(rows(1), tag(1))
    other.refresh()
    other.append(rows(2), CommitTag(None, -1, {}))  # version 2, unknown to ``mine``
    mine.append(rows(3), tag(3))
    assert mine.version() == 3
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]


def test_a_batch_whose_entry_landed_already_is_not_appended_again(tmp_path: Path) -> None:
    """A commit that landed and then failed (its caller saw an error) is retried through a handle loaded before:
    the version it tries is taken, and the taken one holds the batch."""
    stale, first = opened(tmp_path), DeltaLocation(str(tmp_path)).open()
    assert first is not None
    first.append(rows(1), tag(1))
    stale.append(rows(1), tag(1))
    assert DeltaTable(str(tmp_path)).to_pyarrow_table().num_rows == 2
    assert stale.version() == 1


def test_a_schema_another_writer_changed_stops_the_append(tmp_path: Path) -> None:
    stale = opened(tmp_path)
    write_deltalake(str(tmp_path), rows(1).append_column("extra", pa.array([1], pa.int64())), mode="append",
                    schema_mode="merge")
    with pytest.raises(TableCommitConflictError, match="changed the schema"):
        stale.append(rows(2), tag(2))
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1]


def test_a_checkpoint_at_the_tables_interval(tmp_path: Path) -> None:
    table = opened(tmp_path, {"delta.checkpointInterval": "4"})
    for version in range(1, 6):
        table.append(rows(version), tag(version))
    log = tmp_path / "_delta_log"
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [f"{4:020d}.checkpoint.parquet"]
    assert not list(log.glob("_commit_*"))
    fresh = DeltaTable(str(tmp_path))
    assert (fresh.version(), fresh.transaction_version(APP), fresh.to_pyarrow_table().num_rows) == (5, 5, 6)


def test_a_protocol_asking_more_of_a_writer_commits_through_delta_rs(tmp_path: Path) -> None:
    table = opened(tmp_path)
    table.delta.alter.add_constraint({"positive": "id >= 0"})  # writer version 3: CHECK constraints
    table.refresh()
    table.append(rows(1), tag(1))
    assert engines(tmp_path)[-1].startswith("delta-rs")
    assert table.version() == 2 and table.applied(APP) == 1


def ntz_rows(*ids: int) -> pa.Table:
    """Rows with a DATETIME column: a table of them is of writer version 7 (``timestampNtz``)."""
    return rows(*ids).append_column("at", pa.array(list(ids), pa.timestamp("us")))


def features(path: Path) -> tuple[int, int, list[str] | None, list[str] | None]:
    protocol = DeltaTable(str(path)).protocol()
    return (protocol.min_reader_version, protocol.min_writer_version, protocol.reader_features,
            protocol.writer_features)


NTZ_PROTOCOL = (3, 7, ["timestampNtz"], ["timestampNtz"])


def test_properties_are_set_without_raising_the_protocol(tmp_path: Path) -> None:
    """delta-rs 1.6 adds the variantType reader feature (and invariants, appendOnly) when it sets a property of a
    table of writer version 7, which Delta readers without variants (delta-spark before 4.0) then refuse; our
    entry sets the properties alone, checkpointed at the new interval, and appends stay our entries."""
    write_deltalake(str(tmp_path / "theirs"), ntz_rows(0))
    DeltaTable(str(tmp_path / "theirs")).alter.set_table_properties({"delta.checkpointInterval": "2"})
    assert "variantType" in (features(tmp_path / "theirs")[2] or [])  # why: delta-rs's way
    raised = DeltaLocation(str(tmp_path / "theirs")).open()  # such a table still takes our appends
    assert raised is not None
    raised.append(ntz_rows(1), tag(1))
    assert engines(tmp_path / "theirs")[-1] == delta_log.ENGINE

    path = tmp_path / "ours"
    write_deltalake(str(path), ntz_rows(0), configuration={"delta.logRetentionDuration": "interval 2 days"})
    table = DeltaLocation(str(path)).open()
    assert table is not None
    table.append(ntz_rows(1), tag(1))
    assert table.set_properties({"delta.checkpointInterval": "2",
                                 "delta.deletedFileRetentionDuration": "interval 1 days"})
    assert features(path) == NTZ_PROTOCOL
    assert DeltaTable(str(path)).metadata().configuration == {
        "delta.logRetentionDuration": "interval 2 days", "delta.checkpointInterval": "2",
        "delta.deletedFileRetentionDuration": "interval 1 days"}
    assert engines(path)[-1] == delta_log.ENGINE and table.version() == 2
    assert (path / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()  # version 2, at the new interval
    state = same_state_as_delta_rs(path)  # the checkpoint's metadata read back as its entry wrote it
    assert state.metadata["format"] == {"provider": "parquet", "options": {}}
    table.append(ntz_rows(2), tag(2))
    assert engines(path)[-1] == delta_log.ENGINE and features(path) == NTZ_PROTOCOL
    made = DeltaTable(str(path)).metadata()
    assert table.set_properties({"delta.checkpointInterval": "100"})  # from the checkpoint's metadata this time
    again = DeltaTable(str(path)).metadata()
    assert (again.id, again.created_time, again.configuration["delta.checkpointInterval"]) == (
        made.id, made.created_time, "100")
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2]


def test_properties_of_a_protocol_without_features_are_set_by_delta_rs(tmp_path: Path) -> None:
    table = opened(tmp_path)
    assert table.set_properties({"delta.checkpointInterval": "50"})
    assert features(tmp_path) == (1, 2, None, None) and engines(tmp_path)[-1].startswith("delta-rs")
    assert DeltaTable(str(tmp_path)).metadata().configuration == {"delta.checkpointInterval": "50"}


def test_properties_lost_to_another_writer_are_not_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer commits between our reading of the log and our entry: ours is not written over theirs."""
    write_deltalake(str(tmp_path), ntz_rows(0))
    table = DeltaLocation(str(tmp_path)).open()
    assert table is not None
    entry = delta_log.properties_entry

    def after_another_commit(state: delta_log.LogState, properties: dict[str, str]) -> bytes:
        write_deltalake(str(tmp_path), ntz_rows(1), mode="append")
        return entry(state, properties)

    monkeypatch.setattr(delta_log, "properties_entry", after_another_commit)
    with pytest.raises(TableCommitConflictError, match="while its properties were set"):
        table.set_properties({"delta.checkpointInterval": "50"})
    assert DeltaTable(str(tmp_path)).metadata().configuration == {}
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1]


def test_tables_are_made_with_the_locations_properties(tmp_path: Path) -> None:
    """Every way a table is made here, so upkeep never needs to set them; an existing table keeps its own."""
    properties = {"delta.checkpointInterval": "7", "delta.logRetentionDuration": "interval 3600 seconds"}

    def place(name: str) -> DeltaLocation:
        return DeltaLocation(str(tmp_path / name), properties=properties)

    place("own_entry").append(ntz_rows(1), tag(1))
    place("written").create_from(rows(1), [], tag(1))
    place("overwritten").overwrite(ntz_rows(1), tag(1))
    folder = tmp_path / "partitioned"
    (folder / "part=1").mkdir(parents=True)
    pq.write_table(rows(1), folder / "part=1" / "f.parquet")
    footer = pq.read_metadata(folder / "part=1" / "f.parquet")
    size = (folder / "part=1" / "f.parquet").stat().st_size
    place("partitioned").create_with_partition("part", 1, [DataFile("part=1/f.parquet", size, 0, footer)],
                                               rows(1).schema.append(pa.field("part", pa.int64())), CommitTag())
    for name in ("own_entry", "written", "overwritten", "partitioned"):
        assert DeltaTable(str(tmp_path / name)).metadata().configuration == properties, name
    assert engines(tmp_path / "own_entry") == [delta_log.ENGINE]
    assert features(tmp_path / "overwritten") == NTZ_PROTOCOL

    DeltaLocation(str(tmp_path / "written"), properties={"delta.checkpointInterval": "9"}).overwrite(rows(2), tag(2))
    assert DeltaTable(str(tmp_path / "written")).metadata().configuration == properties


def test_a_column_invariant_is_checked_by_delta_rs(tmp_path: Path) -> None:
    """Writer version 2 asks a writer to check the columns' invariants: our entries would not."""
    checked = pa.schema([pa.field("id", pa.int64(), metadata={"delta.invariants": '{"expression": {"expression": '
                                                                                   '"id >= 0"}}'}), ("v", pa.string())])
    write_deltalake(str(tmp_path), rows(0).cast(checked))
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    with pytest.raises(Exception, match="failed validation"):
        table.append(rows(-1).cast(checked), tag(1))
    table.append(rows(1).cast(checked), tag(1))
    assert engines(tmp_path)[-1].startswith("delta-rs")
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1]


def test_put_if_absent_keeps_an_existing_entry(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000001.json")
    assert delta_log.put_if_absent(path, b"first\n")
    assert not delta_log.put_if_absent(path, b"second\n")
    assert Path(path).read_bytes() == b"first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000001.json"]


def test_a_table_made_by_our_first_entry_is_the_table_delta_rs_would_make(tmp_path: Path) -> None:
    first = rows(1, 2).append_column("at", pa.array([1, 2], pa.timestamp("us")))  # a DATETIME: timestampNtz
    DeltaLocation(str(tmp_path / "ours")).append(first, tag(1))
    write_deltalake(str(tmp_path / "theirs"), first)
    ours, theirs = DeltaTable(str(tmp_path / "ours")), DeltaTable(str(tmp_path / "theirs"))
    assert engines(tmp_path / "ours") == [delta_log.ENGINE]
    assert ours.schema() == theirs.schema()
    assert (ours.protocol().min_reader_version, ours.protocol().min_writer_version) == (3, 7)
    assert ours.protocol().writer_features == theirs.protocol().writer_features == ["timestampNtz"]
    assert ours.to_pyarrow_table() == theirs.to_pyarrow_table()
    assert ours.transaction_version(APP) == 1
    table = DeltaLocation(str(tmp_path / "ours")).open()
    assert table is not None
    table.append(rows(3).append_column("at", pa.array([3], pa.timestamp("us"))), tag(2))  # and appends by ours
    assert engines(tmp_path / "ours") == [delta_log.ENGINE] * 2
    assert sorted(DeltaTable(str(tmp_path / "ours")).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]


def partition_file(table: Path, part: int, ids: tuple[int, ...]) -> DataFile:
    """A Parquet file of ``ntz_rows(*ids)`` written into partition ``part`` of ``table``, as a Spark task does."""
    folder = table / f"part={part}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"f{ids[0]}.parquet"
    pq.write_table(ntz_rows(*ids), path)
    return DataFile(f"part={part}/{path.name}", path.stat().st_size, 0, pq.read_metadata(path))


def test_a_partitioned_table_made_by_our_first_entry_is_the_table_delta_rs_would_make(tmp_path: Path) -> None:
    """A snapshot batch's first commit: the table made with the batch's files as its partition."""
    schema = ntz_rows(1).schema.append(pa.field("part", pa.int32()))
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert DeltaLocation(str(ours)).create_with_partition("part", 1, [partition_file(ours, 1, (1, 2))], schema,
                                                          CommitTag(metadata={"mysql_cdc.batch": "1"})) == 0
    create_table_with_add_actions(str(theirs), Schema.from_arrow(schema), _added("part", 1, [partition_file(theirs, 1,
                                                                                                           (1, 2))]),
                                  mode="error", partition_by=["part"])
    mine, delta_rs = DeltaTable(str(ours)), DeltaTable(str(theirs))
    assert engines(ours) == [delta_log.ENGINE]
    assert mine.schema() == delta_rs.schema()
    assert mine.metadata().partition_columns == delta_rs.metadata().partition_columns == ["part"]
    assert features(ours) == features(theirs) == NTZ_PROTOCOL
    assert mine.to_pyarrow_table() == delta_rs.to_pyarrow_table()
    assert mine.get_add_actions(flatten=True).select(["min.id", "max.id", "num_records"]) == \
        delta_rs.get_add_actions(flatten=True).select(["min.id", "max.id", "num_records"])
    assert mine.history()[0]["operation"] == "CREATE TABLE"
    assert mine.history()[0]["mysql_cdc.batch"] == "1"
    with pytest.raises(TableCommitConflictError, match="another writer created"):  # a second first commit
        DeltaLocation(str(ours)).create_with_partition("part", 1, [partition_file(ours, 1, (5,))], schema, CommitTag())
    table = DeltaLocation(str(ours)).open(from_log=True)  # as a later batch's commit opens it
    assert table is not None
    second = [partition_file(ours, 2, (3,))]
    assert table.replace_partition("part", 2, second, schema, CommitTag(metadata={"b": "2"})) == 1
    assert sorted(DeltaTable(str(ours)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]


def test_a_table_another_writer_made_first_is_appended_to(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(1))
    DeltaLocation(str(tmp_path)).append(rows(2), tag(1))
    assert engines(tmp_path)[-1].startswith("delta-rs")
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [1, 2]


def test_a_table_whose_first_entries_were_cleaned_up_is_not_made_again(tmp_path: Path) -> None:
    """After a checkpoint, log cleanup removes the first entries: version 0 missing does not mean no table."""
    table = opened(tmp_path, {"delta.checkpointInterval": "2"})
    for version in (1, 2):
        table.append(rows(version), tag(version))
    (tmp_path / "_delta_log" / f"{0:020d}.json").unlink()  # as cleanup_metadata does once it has expired
    DeltaLocation(str(tmp_path)).append(rows(3), tag(3))
    assert not (tmp_path / "_delta_log" / f"{0:020d}.json").exists()
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]


# -- a handle for appends, from the log alone ------------------------------------------------------------


def same_state_as_delta_rs(path: Path, app_ids: tuple[str, ...] = (APP,)) -> delta_log.LogState:
    """The log's state as ``read_state`` reads it, checked against delta-rs's loading of the same table."""
    state = delta_log.read_state(str(path))
    assert state is not None
    theirs = DeltaTable(str(path))
    protocol = theirs.protocol()
    assert state.version == theirs.version()
    assert (state.min_writer_version, state.writer_features) == (protocol.min_writer_version,
                                                                   protocol.writer_features)
    assert state.configuration == theirs.metadata().configuration
    assert pa.schema(DeltaTable(str(path)).schema().to_arrow()) == DeltaLocation(str(path)).open(from_log=True).schema()
    assert {a: state.transactions.get(a, -1) for a in app_ids} == \
        {a: -1 if theirs.transaction_version(a) is None else theirs.transaction_version(a) for a in app_ids}
    return state


def test_the_log_state_read_alone_is_delta_rs_state(tmp_path: Path) -> None:
    """Entries of both writers, a checkpoint with entries after it, properties set later, two applications."""
    assert delta_log.read_state(str(tmp_path / "none")) is None
    write_deltalake(str(tmp_path), rows(0).append_column("at", pa.array([0], pa.timestamp("us"))),
                    configuration={"delta.checkpointInterval": "3"})
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    assert same_state_as_delta_rs(tmp_path).writer_features == ["timestampNtz"]
    for version in (1, 2, 3, 4):
        table.append(rows(version).append_column("at", pa.array([version], pa.timestamp("us"))), tag(version))
    assert sorted(p.name for p in (tmp_path / "_delta_log").glob("*.checkpoint.parquet")) == [
        f"{3:020d}.checkpoint.parquet"]
    other = DeltaTable(str(tmp_path))
    other.alter.set_table_properties({"delta.logRetentionDuration": "interval 2 days"})
    write_deltalake(other, rows(5).append_column("at", pa.array([5], pa.timestamp("us"))), mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction("other-app", 7)]))
    state = same_state_as_delta_rs(tmp_path, (APP, "other-app", "nobody"))
    assert (state.version, state.transactions) == (6, {APP: 4, "other-app": 7})
    assert state.configuration["delta.logRetentionDuration"] == "interval 2 days"


def test_the_history_read_alone_is_delta_rs_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits of both writers (our entries, delta-rs's append, delete and property change), a checkpoint and
    the entries before it cleaned up: a handle from the log alone gives delta-rs's history without loading it,
    and so does the location without reading the table's state."""
    write_deltalake(str(tmp_path), rows(0), configuration={"delta.checkpointInterval": "3"})
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    for version in (1, 2, 3, 4):
        table.append(rows(version), tag(version))
    other = DeltaTable(str(tmp_path))
    write_deltalake(other, rows(5), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"stream_seq": "5", "note": "theirs"}))
    DeltaTable(str(tmp_path)).delete("id = 1")
    DeltaTable(str(tmp_path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 2 days"})
    alone = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert alone is not None
    for limit in (None, 1, 3, 100):
        theirs = DeltaLocation(str(tmp_path)).open()
        assert theirs is not None
        assert alone.history(limit) == theirs.history(limit), limit
    assert alone._table is None  # no delta-rs load
    assert [(c.version, c.appended_rows) for c in alone.history(3)] == [(7, None), (6, None), (5, 1)]
    with monkeypatch.context() as patched:
        patched.setattr(delta_log, "read_state", lambda folder: pytest.fail("the history read the state"))
        assert all(DeltaLocation(str(tmp_path)).history(limit) == alone.history(limit) for limit in (None, 1, 3, 100))

    (tmp_path / "_delta_log" / f"{0:020d}.json").unlink()  # as a log cleanup after the checkpoint of 3 does
    (tmp_path / "_delta_log" / f"{1:020d}.json").unlink()
    theirs = DeltaLocation(str(tmp_path)).open()
    assert theirs is not None
    assert alone.history() == theirs.history() and [c.version for c in alone.history()][-1] == 2
    assert DeltaLocation(str(tmp_path)).history() == theirs.history()


def test_one_commit_read_alone_is_its_history_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each version's commit, read alone, is its entry in the history (our entries and delta-rs's append, delete
    and property change), without the history or the table's state; a version not (or no longer) in the log is
    None."""
    write_deltalake(str(tmp_path), rows(0))
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    for version in (1, 2):
        table.append(rows(version), tag(version))
    write_deltalake(str(tmp_path), rows(3), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"stream_seq": "3", "note": "theirs"}))
    DeltaTable(str(tmp_path)).delete("id = 1")
    DeltaTable(str(tmp_path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 2 days"})
    history = DeltaLocation(str(tmp_path)).history()
    assert history is not None and [c.version for c in history] == [5, 4, 3, 2, 1, 0]
    with monkeypatch.context() as patched:
        patched.setattr(delta_log, "commit_infos", lambda *a: pytest.fail("the commit read the history"))
        patched.setattr(delta_log, "read_state", lambda folder: pytest.fail("the commit read the state"))
        assert [DeltaLocation(str(tmp_path)).commit(c.version) for c in history] == history
        assert DeltaLocation(str(tmp_path)).commit(6) is None
        (tmp_path / "_delta_log" / f"{0:020d}.json").unlink()  # as a log cleanup does
        assert DeltaLocation(str(tmp_path)).commit(0) is None
        assert DeltaLocation(str(tmp_path / "none")).commit(0) is None


def test_the_history_of_no_table_is_none(tmp_path: Path) -> None:
    """No folder, or a log folder without an entry (a creation under way, or killed before its first entry)."""
    assert DeltaLocation(str(tmp_path / "none")).history() is None
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)
    assert DeltaLocation(str(tmp_path / "empty")).history() is None


def test_a_handle_for_appends_commits_without_loading_the_table(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(0))
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None and table._table is None
    for version in (1, 2):
        table.append(rows(version), tag(version))
    assert table._table is None  # the appends needed nothing delta-rs loads
    assert (table.version(), table.applied(APP)) == (2, 2)
    assert engines(tmp_path)[1:] == [delta_log.ENGINE] * 2
    assert sorted(table.read().column("id").to_pylist()) == [0, 1, 2]  # a read loads it, at the newest version
    assert table._table is not None and table.version() == 2 and table.applied(APP) == 2


def test_a_handle_for_appends_that_lost_a_race_reads_the_winner(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(0))
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    write_deltalake(str(tmp_path), rows(1), mode="append")  # version 1, unknown to the handle
    table.append(rows(2), tag(1))
    assert table.version() == 2 and table.applied(APP) == 1
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2]


def test_a_protocol_raised_by_the_winner_of_a_race_is_obeyed(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(0))
    table = DeltaLocation(str(tmp_path)).open(from_log=True)
    assert table is not None
    DeltaTable(str(tmp_path)).alter.add_constraint({"positive": "id >= 0"})  # version 1: writer version 3
    table.append(rows(1), tag(1))
    assert engines(tmp_path)[-1].startswith("delta-rs")
    assert table.version() == 2 and table.applied(APP) == 1


def test_logs_left_to_delta_rs(tmp_path: Path) -> None:
    """A checkpoint in parts, a gap in the entries, a protocol our entries cannot append to: delta-rs loads those."""
    parts, gap, checked = tmp_path / "parts", tmp_path / "gap", tmp_path / "checked"
    for path in (parts, gap, checked):
        write_deltalake(str(path), rows(0))
        write_deltalake(str(path), rows(1), mode="append")
    DeltaTable(str(parts)).create_checkpoint()
    (parts / "_delta_log" / f"{1:020d}.checkpoint.parquet").rename(
        parts / "_delta_log" / f"{1:020d}.checkpoint.0000000001.0000000001.parquet")
    (gap / "_delta_log" / f"{0:020d}.json").unlink()
    DeltaTable(str(checked)).alter.add_constraint({"positive": "id >= 0"})  # writer version 3
    for path, why in ((parts, "in parts or of version 2"), (gap, "lacks the entry of version 0"),
                      (checked, "asks more of a writer")):
        with pytest.raises(delta_log.LogNotReadable, match=why):
            delta_log.read_state(str(path))
    table = DeltaLocation(str(checked)).open(from_log=True)
    assert table is not None and table._table is not None
    table.append(rows(2), tag(1))
    assert engines(checked)[-1].startswith("delta-rs")


def test_a_checkpoint_gone_between_listing_and_reading_leaves_the_log_to_delta_rs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_deltalake(str(tmp_path), rows(0))
    listed = [f"{0:020d}.json", f"{1:020d}.checkpoint.parquet", f"{1:020d}.json"]  # a listing made before a cleanup
    monkeypatch.setattr(delta_log.os, "listdir", lambda folder: listed)
    with pytest.raises(delta_log.LogNotReadable, match="went away"):
        delta_log.read_state(str(tmp_path))


def test_column_mapping_is_refused_by_a_handle_for_appends_too(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(0), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(LakeFormatError, match="column mapping"):
        DeltaLocation(str(tmp_path)).open(from_log=True)


def test_a_killed_writers_temporaries_are_removed_with_the_log_cleanup(tmp_path: Path) -> None:
    """kill -9 between writing an entry's temporary and linking it leaves the temporary in the log."""
    import os
    import time

    table = opened(tmp_path)
    log = tmp_path / "_delta_log"
    stale, fresh = (log / f"_commit_00000000-0000-0000-0000-00000000000{n}.json.tmp" for n in (1, 2))
    for leftover in (stale, fresh):
        leftover.write_bytes(b'{"commitInfo":{}}\n')
    hours_ago = time.time() - 2 * delta_log.STALE_TEMPORARY_SECONDS
    os.utime(stale, (hours_ago, hours_ago))
    table.cleanup_log()
    assert not stale.exists() and fresh.exists()
    assert delta_log.remove_stale_temporaries(str(tmp_path / "none")) == 0
    table.append(rows(1), tag(1))
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1]
