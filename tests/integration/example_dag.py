"""The example DAG of ``dags/``, loaded as a user's Airflow would load it, for ``dag.test()``."""

from __future__ import annotations

from typing import Any

from dev.dag_file import load_dag


def example_dag() -> Any:
    """The example DAG from dags/, as a user would run it."""
    return load_dag("mysql_cdc_example")
