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
