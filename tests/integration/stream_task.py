"""The stream task as a DAG runs it, without the DAG: the operator's ``execute``, not deferrable, stopping
once caught up unless told otherwise."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator


def stream_task(base_uri: str, *tables: str, task_id: str = "stream", **options: Any) -> Any:
    """Run the stream of ``tables`` into the lake at ``base_uri`` once; ``options`` are the operator's
    (``stop_after_idle_seconds`` 0 unless given). Returns what the task returns (its summary)."""
    operator = MySqlBinlogStreamOperator(task_id=task_id, base_uri=base_uri, tables=list(tables), deferrable=False,
                                         **{"stop_after_idle_seconds": 0, **options})
    return operator.execute(context={})
