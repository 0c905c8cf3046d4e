"""``lake.write.maintenance`` on temporary local Delta tables: compaction keeps the rows and cuts the files, vacuum
deletes only unreferenced files, ``maintain`` follows its policy."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, TableCommitConflictError
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable
from airflow_provider_mysqlcdc.lake.write.maintenance import (
    MaintenancePolicy,
    checkpoint,
    compact,
    excess_small_files,
    maintain,
    vacuum,
)


def commit(uri: str, start: int, rows: int = 5, batch: int | None = None) -> None:
    data = pa.table({"id": pa.array(range(start, start + rows), pa.int64()), "v": [f"r{i}" for i in range(rows)]})
    if batch is not None:
        data = data.append_column("_batch", pa.array([batch] * rows, pa.int32()))
    write_deltalake(uri, data, mode="append", partition_by=["_batch"] if batch is not None else None)


def parquet_files(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), uri) for d, _, files in os.walk(uri) for f in files
            if f.endswith(".parquet") and "_delta_log" not in d}


@pytest.fixture
def small_files(tmp_path: Path) -> str:
    uri = str(tmp_path / "changelog")
    for i in range(12):
        commit(uri, i * 5)
    return uri


def rows(uri: str) -> list[int]:
    return sorted(DeltaTable(uri).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def test_compaction_cuts_the_files_and_keeps_the_rows(small_files: str) -> None:
    before = rows(small_files)
    compaction = compact(DeltaLocation(small_files))
    table = DeltaTable(small_files)
    assert (compaction.files_removed, compaction.files_added, len(table.file_uris())) == (12, 1, 1)
    assert rows(small_files) == before == list(range(60))


def test_compaction_stays_inside_partitions(tmp_path: Path) -> None:
    uri = str(tmp_path / "current")
    for i in range(6):
        commit(uri, i * 5, batch=i % 2)
    compact(DeltaLocation(uri))
    actions = pa.table(DeltaTable(uri).get_add_actions(flatten=True))
    assert sorted(actions.column("partition._batch").to_pylist()) == [0, 1]
    opened = DeltaLocation(uri).open()
    assert opened is not None and excess_small_files(opened, 1 << 20) == (2, 0)


def test_vacuum_removes_unreferenced_files_and_readers_still_read(small_files: str) -> None:
    compact(DeltaLocation(small_files))
    on_disk = parquet_files(small_files)
    assert len(on_disk) == 13
    assert vacuum(DeltaLocation(small_files), 24) == []  # within retention: kept, for readers of older versions
    deleted = vacuum(DeltaLocation(small_files), 0)
    assert len(deleted) == 12 and len(parquet_files(small_files)) == 1
    assert rows(small_files) == list(range(60))
    # the tombstones stay in the log until a checkpoint drops them: harmless again
    vacuum(DeltaLocation(small_files), 0)
    assert len(parquet_files(small_files)) == 1 and rows(small_files) == list(range(60))


def test_checkpoint_and_log_cleanup(small_files: str) -> None:
    table = DeltaTable(small_files)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    checkpoint(DeltaLocation(small_files))
    log = os.listdir(os.path.join(small_files, "_delta_log"))
    assert any(name.endswith(".checkpoint.parquet") for name in log)
    assert rows(small_files) == list(range(60))


def test_maintain_follows_the_policy(small_files: str) -> None:
    policy = MaintenancePolicy(check_every_commits=5, max_small_files=3, vacuum_retention_hours=0,
                               checkpoint_interval=10, log_retention_hours=0.5)
    assert not maintain(DeltaLocation(small_files), policy, 4).checked  # too soon: no I/O
    report = maintain(DeltaLocation(small_files), policy, 12)
    assert report.checked and report.compacted and report.files_removed == 12 and report.data_files == 1
    assert report.vacuumed_files == 12 and parquet_files(small_files) == {
        os.path.basename(u) for u in DeltaTable(small_files).file_uris()
    }
    configuration = DeltaTable(small_files).metadata().configuration
    assert configuration["delta.checkpointInterval"] == "10"
    assert configuration["delta.logRetentionDuration"] == "interval 1800 seconds"
    for i in range(3):
        commit(small_files, 100 + i)
    quiet = maintain(DeltaLocation(small_files), policy, 5)
    assert quiet.checked and not quiet.compacted and quiet.data_files == 4  # 3 excess small files: allowed


def test_maintain_without_a_table_does_nothing(tmp_path: Path) -> None:
    assert not maintain(DeltaLocation(str(tmp_path / "none")), MaintenancePolicy(), 1000).checked


@pytest.mark.parametrize("bad", [{"check_every_commits": 0}, {"vacuum_retention_hours": 1.5},
                                 {"target_file_bytes": 10}, {"max_small_files": True}])
def test_policy_is_validated(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidOptionError, match=next(iter(bad))):
        MaintenancePolicy(**bad)  # type: ignore[arg-type]


def test_a_maintenance_that_loses_a_race_is_put_off_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's commit (a re-run snapshot batch, a repair) can make a compaction's commit fail;
    the stream goes on and the table is looked at again at its next commit."""
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.engine.stream import table_upkeep
    from airflow_provider_mysqlcdc.lake.handle import Lake, changelog_uri

    base_uri, table = str(tmp_path / "lake"), TableId("shop", "orders")
    uri = changelog_uri(base_uri, table)
    for i in range(12):
        commit(uri, i * 5)
    calls: list[int] = []

    def loses_once(location: ReplicaTable, policy: MaintenancePolicy, commits: int) -> object:
        calls.append(commits)
        if len(calls) == 1:
            raise TableCommitConflictError("a concurrent transaction removed a file this one read")
        return maintain(location, policy, commits)

    monkeypatch.setattr(table_upkeep, "maintain", loses_once)
    upkeep = table_upkeep.TableUpkeep(Lake.at(base_uri), MaintenancePolicy(check_every_commits=1, max_small_files=2))
    upkeep.changelogs_committed([table])  # put off
    upkeep.changelogs_committed([table])  # tried again, with the commits counted since
    assert calls == [1, 2]
    assert len(DeltaTable(uri).file_uris()) < 12 and rows(uri) == list(range(60))


def test_a_lakes_tables_are_made_with_the_upkeeps_properties_and_keep_their_protocol(tmp_path: Path) -> None:
    """A changelog with a DATETIME column (writer version 7): made with the default policy's properties, so
    upkeep under that policy commits nothing; under another, its properties change and its protocol does not
    (delta-rs's ``set_table_properties`` would add the variantType reader feature)."""
    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.lake.format.table_format import CommitTag
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.lake.write.maintenance import DEFAULT_POLICY

    place = Lake.at(str(tmp_path)).table(TableId("shop", "orders")).changelog
    for n in range(10):
        place.append(pa.table({"id": [n], "at": pa.array([n], pa.timestamp("us"))}), CommitTag("app", n))
    ntz = (3, 7, ["timestampNtz"], ["timestampNtz"])

    def protocol() -> tuple[object, ...]:
        p = DeltaTable(place.uri).protocol()
        return p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features

    assert DeltaTable(place.uri).metadata().configuration == DEFAULT_POLICY.table_properties()
    report = maintain(place, DEFAULT_POLICY, 10)
    assert report.checked and not report.properties_left and DeltaTable(place.uri).version() == 9
    other = MaintenancePolicy(checkpoint_interval=20, log_retention_hours=2)
    report = maintain(place, other, 10)
    assert report.checked and not report.properties_left
    assert DeltaTable(place.uri).metadata().configuration == other.table_properties() and protocol() == ntz
    assert DeltaTable(place.uri).history(1)[0]["operation"] == "SET TBLPROPERTIES"
