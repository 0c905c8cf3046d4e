"""The provider registers with Airflow: entry point, importable class paths, and `airflow providers list`."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import airflow_provider_mysqlcdc
from airflow_provider_mysqlcdc.get_provider_info import get_provider_info


def _class_paths(info: dict) -> list[str]:
    paths = [c["hook-class-name"] for c in info["connection-types"]]
    paths += [m for h in info.get("hooks", []) + info.get("triggers", []) for m in h["python-modules"]]
    paths += info.get("operators", []) and [m for o in info["operators"] for m in o["python-modules"]]
    return paths


def test_every_named_path_imports() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-mysqlcdc"
    assert info["versions"] == [airflow_provider_mysqlcdc.__version__]
    paths = _class_paths(info)
    assert paths
    for path in paths:
        try:
            importlib.import_module(path)
        except ModuleNotFoundError:
            module, _, name = path.rpartition(".")
            assert hasattr(importlib.import_module(module), name), path


def test_entry_point_resolves_to_this_function() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="apache_airflow_provider")
                if e.value.startswith("airflow_provider_mysqlcdc")]
    assert entry.load() is get_provider_info
    assert importlib.metadata.version("airflow-provider-mysqlcdc") == airflow_provider_mysqlcdc.__version__


def test_airflow_lists_the_provider_and_its_connection_type(tmp_path: Path) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    airflow = str(Path(sys.executable).with_name("airflow"))
    listed = subprocess.run([airflow, "providers", "list", "-o", "plain"], env=env, capture_output=True,
                            text=True, timeout=180, check=True)
    assert "airflow-provider-mysqlcdc" in listed.stdout
    hooks = subprocess.run([airflow, "providers", "hooks", "-o", "plain"], env=env, capture_output=True,
                           text=True, timeout=180, check=True)
    assert "mysql_cdc" in hooks.stdout and "MySqlCdcHook" in hooks.stdout
