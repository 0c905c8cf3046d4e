"""The example DAG's snapshot jobs watched from the test: a change of the source at a known point of a
multi-job snapshot (after its first job, not by timing), and each job's outcome or error kept."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator


class JobsWatched:
    """The snapshot operator's ``execute`` wrapped: after the first job, ``after_first()``; each job's outcome
    or error kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after_first: Any) -> None:
        self.outcomes: list[Any] = []
        self.errors: list[BaseException] = []
        execute = MySqlSnapshotSparkOperator.execute

        def watched(operator: MySqlSnapshotSparkOperator, context: Any) -> dict[str, Any]:
            try:
                outcome = execute(operator, context)
            except Exception as error:
                self.errors.append(error)
                raise
            self.outcomes.append(outcome)
            if len(self.outcomes) == 1:
                after_first()
            return outcome

        monkeypatch.setattr(MySqlSnapshotSparkOperator, "execute", watched)
