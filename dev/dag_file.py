"""The DAG object of one of the example DAG files, loaded as Airflow's DAG processor loads it, for
the quickstart, the tests and the benchmarks (``dag.test()`` needs a DAG of the DAGs folder)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parents[1] / "dags"


def load_dag(name: str) -> Any:
    """The ``dag`` of ``dags/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, DAGS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def start_execution_api() -> None:
    """Start Airflow's in-process execution API by one ``dag.test()`` of the downstream DAG (one task, which
    finds no asset events and returns). The first ``dag.test()`` of a process starts that API (~4.5 s here)
    before its first task runs, which a deployment's api-server has done long before: a benchmark calls
    this before its timed runs, so that none of them pays it."""
    run = load_dag("mysql_cdc_downstream").test()
    if run.state != "success":
        raise SystemExit(f"the downstream DAG, run to start Airflow's execution API, ended {run.state}")
