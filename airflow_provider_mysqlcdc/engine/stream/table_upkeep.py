"""Keeping the stream's Delta tables small while it runs: maintenance after commits, per table.

The stream appends a file to a table's changelog with every batch that has rows of it, and each
MERGE rewrites files of its current state; left alone, every commit (which loads the table's log and
file list) and every reader gets slower as files pile up (measured: 36 ms a commit at 200 files,
~200 ms at 3,600). The runner reports each commit here; every table is looked at once enough
commits gathered (``MaintenancePolicy.check_every_commits``), and compacted, vacuumed and its log
cleaned as the policy says (``lake/write/maintenance.py``). A maintenance commit that loses a race with
another writer of the table is put off to the next commit, never the stream's failure.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import TableCommitConflictError
from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.maintenance import DEFAULT_POLICY, MaintenancePolicy, maintain

_log = logging.getLogger(__name__)


class TableUpkeep:
    """Counts the commits to each Delta table of one lake and maintains a table when they are due."""

    def __init__(self, lake: Lake, policy: MaintenancePolicy = DEFAULT_POLICY) -> None:
        self.lake = lake
        self.policy = policy
        self._commits: Counter[str] = Counter()
        self._properties_left: set[str] = set()

    def changelogs_committed(self, tables: Iterable[TableId]) -> None:
        self._committed(self.lake.table(t).changelog for t in tables)

    def current_committed(self, tables: Iterable[TableId]) -> None:
        self._committed(self.lake.table(t).current for t in tables)

    def _committed(self, locations: Iterable[ReplicaTable]) -> None:
        for location in locations:
            uri = location.uri
            self._commits[uri] += 1
            try:
                report = maintain(location, self.policy, self._commits[uri])
            except TableCommitConflictError as error:
                # another writer committed to the table meanwhile (a re-run snapshot batch replacing its
                # partition, a repair's MERGE): maintenance is never worth failing the stream for; the
                # count is kept, so the next commit tries again
                _log.info("maintenance of %s put off: another writer committed to it meanwhile (%s)", uri, error)
                continue
            if not report.checked:
                continue
            self._commits[uri] = 0
            if report.properties_left and uri not in self._properties_left:
                self._properties_left.add(uri)
                _log.warning(
                    "the table properties of %s differ from the maintenance policy's (%s) and were left as they are: "
                    "delta-rs would add the variantType reader feature to this table, which Delta readers before "
                    "delta-spark 4.0 refuse; its log and tombstones are kept longer meanwhile. To set them, run in "
                    "Spark: ALTER TABLE delta.`%s` SET TBLPROPERTIES (%s)", uri,
                    ", ".join(report.properties_left), uri,
                    ", ".join(f"'{k}' = '{v}'" for k, v in report.properties_left.items()))
            if report.compacted or report.vacuumed_files:
                _log.info("maintained %s in %.2f s: %d files (%d small), compacted %d into %d, vacuumed %d",
                          uri, report.seconds, report.data_files, report.small_files, report.files_removed,
                          report.files_added, report.vacuumed_files)
