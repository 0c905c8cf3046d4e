"""The example DAG's snapshot jobs watched from the test: a change of the source at a known point of a
multi-job snapshot (after its first job, or after a table's first job, not by timing), and each job's outcome
or error kept."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator


class JobsWatched:
    """The snapshot operator's ``execute`` wrapped: after the first job, ``after_first()``; after the first job of
    each table named in ``after_tables_first`` (``database.table``), its callable (one DAG run snapshotting
    several tables, each changed between two of its own jobs); each job's outcome or error kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after_first: Callable[[], Any] | None = None,
                 after_tables_first: Mapping[str, Callable[[], Any]] | None = None) -> None:
        self.outcomes: list[Any] = []
        self.errors: list[BaseException] = []
        pending = dict(after_tables_first or {})
        execute = MySqlSnapshotSparkOperator.execute

        def watched(operator: MySqlSnapshotSparkOperator, context: Any) -> dict[str, Any]:
            try:
                outcome = execute(operator, context)
            except Exception as error:
                self.errors.append(error)
                raise
            self.outcomes.append(outcome)
            if len(self.outcomes) == 1 and after_first is not None:
                after_first()
            for table in sorted(jobs_tables(outcome) & pending.keys()):
                pending.pop(table)()
            return outcome

        monkeypatch.setattr(MySqlSnapshotSparkOperator, "execute", watched)

    def jobs_of(self, table: str, since: int = 0) -> int:
        """How many of the jobs that ran (from the ``since``-th on) committed batches of ``table``."""
        return sum(table in jobs_tables(outcome) for outcome in self.outcomes[since:])

    def batches_of(self, table: str) -> int:
        """How many batches of ``table`` the jobs that ran committed."""
        return sum(batch["table"] == table for outcome in self.outcomes for batch in outcome["batches"])


def jobs_tables(outcome: dict[str, Any]) -> set[str]:
    """The tables (``database.table``) of a job's committed batches, from its outcome."""
    return {batch["table"] for batch in outcome["batches"]}
