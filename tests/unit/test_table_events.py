"""A re-read's replace of the current table: what a restarted run reads back of it (its high watermark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.exceptions import SnapshotStateError
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.format.delta_table import DeltaLocation
from airflow_provider_mysqlcdc.lake.write.current_ddl import replace_current


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), BATCH_COLUMN: pa.array([0] * len(ids), pa.int64())})


@pytest.mark.parametrize("commits_after", [0, 3, 12])
def test_a_restarted_replace_reads_its_high_watermark_back_from_the_newest_commits_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commits_after: int) -> None:
    """The replace of batch 7 committed, then ``commits_after`` other commits (upkeep, another writer): the run
    started again reads the replace's high watermark back, not the rows, and reads the whole history only when
    the replace is not among the newest few commits."""
    location = DeltaLocation(str(tmp_path))
    write_deltalake(location.uri, rows(0))
    high_watermark = BinlogOffset("mysql-bin.000004", 1234, gtid="0-1-99", flavor="mariadb")
    assert replace_current(location, 7, lambda: (rows(1, 2), high_watermark)) == high_watermark
    for n in range(commits_after):
        write_deltalake(location.uri, rows(10 + n), mode="append")
    limits: list[int | None] = []
    history = DeltaLocation.history

    def counted(self: DeltaLocation, limit: int | None = None) -> object:
        limits.append(limit)
        return history(self, limit)

    monkeypatch.setattr(DeltaLocation, "history", counted)
    again = replace_current(location, 7, lambda: pytest.fail("the replace read the rows again"))
    assert again == high_watermark
    assert limits == ([8] if commits_after < 8 else [8, None])


def test_a_replace_without_its_high_watermark_is_refused(tmp_path: Path) -> None:
    """A current table that records batch 3 applied (another writer's commit with that transaction) without the
    replace's metadata: re-snapshot, whatever the length of its history."""
    from deltalake import CommitProperties, Transaction

    from airflow_provider_mysqlcdc.lake.format.delta_schema import MERGE_APP_ID

    location = DeltaLocation(str(tmp_path))
    for n in range(10):
        write_deltalake(location.uri, rows(n), mode="append")
    write_deltalake(location.uri, rows(99), mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction(MERGE_APP_ID, 3)]))
    with pytest.raises(SnapshotStateError, match="re-snapshot the table"):
        replace_current(location, 3, lambda: pytest.fail("read"))
