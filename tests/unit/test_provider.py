"""The provider registers with Airflow: entry point, importable class paths, and `airflow providers list`."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

import airflow_provider_mysqlcdc
from airflow_provider_mysqlcdc.get_provider_info import get_provider_info

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]


def _class_paths(info: dict) -> list[str]:
    paths = [c["hook-class-name"] for c in info["connection-types"]]
    for kind in ("hooks", "operators", "triggers"):
        paths += [module for entry in info.get(kind, []) for module in entry["python-modules"]]
    for entry in info.get("asset-uris", []):
        paths += [entry[key] for key in ("handler", "factory", "to_openlineage_converter")]
    paths += [entry["plugin-class"] for entry in info.get("plugins", [])]
    return paths + info.get("extra-links", [])


def test_every_named_path_imports() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-mysqlcdc"
    assert info["versions"] == [airflow_provider_mysqlcdc.__version__]
    paths = _class_paths(info)
    assert "airflow_provider_mysqlcdc.triggers.binlog" in paths and len(paths) >= 6
    for path in paths:
        try:
            importlib.import_module(path)
        except ModuleNotFoundError:
            module, _, name = path.rpartition(".")
            assert hasattr(importlib.import_module(module), name), path


def test_the_package_reports_the_version_pyproject_declares() -> None:
    """One place states the version (pyproject); the package and Airflow's provider list read it from there."""
    assert airflow_provider_mysqlcdc.__version__ == PYPROJECT["version"]
    assert get_provider_info()["versions"] == [PYPROJECT["version"]]


def test_classifiers_name_the_provider_and_only_pythons_requires_python_allows() -> None:
    classifiers = PYPROJECT["classifiers"]
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider", "Topic :: Database"} <= set(
        classifiers)
    versions = [c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    assert versions and all(v in SpecifierSet(PYPROJECT["requires-python"]) for v in versions)
    # PEP 639: the SPDX expression states the license; setuptools refuses a License :: classifier beside it
    assert PYPROJECT["license"] == "Apache-2.0" and not [c for c in classifiers if c.startswith("License ::")]
    assert PYPROJECT["license-files"] == ["LICENSE"]


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
    triggers = subprocess.run([airflow, "providers", "triggers", "-o", "plain"], env=env, capture_output=True,
                              text=True, timeout=180, check=True)
    assert "airflow_provider_mysqlcdc.triggers.binlog" in triggers.stdout
    links = subprocess.run([airflow, "providers", "links", "-o", "plain"], env=env, capture_output=True,
                           text=True, timeout=180, check=True)
    assert {"airflow_provider_mysqlcdc.operators.links.LakeTableLink",
            "airflow_provider_mysqlcdc.operators.links.SparkApplicationLink"} <= set(links.stdout.split()), links.stdout


def test_airflow_loads_the_ui_plugin_from_the_provider(tmp_path: Path) -> None:
    """Airflow loads provider-info plugins only when it discovers providers eagerly. There is no
    ``airflow.plugins`` entry point: loaded that way into every task process, the plugin left the
    OpenLineage listener without task events on the deployment (measured on a fresh install)."""
    from airflow_provider_mysqlcdc.ui.app import URL_PREFIX
    from airflow_provider_mysqlcdc.ui.plugin import MySqlCdcPlugin

    (plugin,) = get_provider_info()["plugins"]
    assert plugin == {"name": MySqlCdcPlugin.name,
                      "plugin-class": f"{MySqlCdcPlugin.__module__}.{MySqlCdcPlugin.__qualname__}"}
    module, _, name = plugin["plugin-class"].rpartition(".")
    assert "airflow.plugins" not in PYPROJECT["entry-points"]
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False"}
    listed = subprocess.run([str(Path(sys.executable).with_name("airflow")), "plugins", "-o", "json"], env=env,
                            capture_output=True, text=True, timeout=180, check=True)
    (loaded,) = [p for p in json.loads(listed.stdout) if p["name"] == MySqlCdcPlugin.name]
    assert loaded["fastapi_apps"] == [{"app": "fastapi.applications.FastAPI", "url_prefix": URL_PREFIX,
                                       "name": "MySQL CDC"}]
    assert {(v["destination"], v["href"].split("?")[0]) for v in loaded["external_views"]} == {
        ("nav", f"{URL_PREFIX}/"), ("dag_run", f"{URL_PREFIX}/dags/{{DAG_ID}}"),
        ("task_instance", f"{URL_PREFIX}/dags/{{DAG_ID}}")}


def test_connection_form_shows_the_extras_without_hook_methods() -> None:
    """Airflow 3.2+ builds the form from ``conn-fields`` (the hook methods are deprecated there)."""
    from airflow.providers_manager import ProvidersManager

    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook, accepted_extras

    manager = ProvidersManager()
    fields = {name for name in manager.connection_form_widgets if name.startswith("extra__mysql_cdc__")}
    assert fields == {f"extra__mysql_cdc__{f}" for f in accepted_extras()}
    assert manager.field_behaviours["mysql_cdc"]["relabeling"]["login"] == "CDC user"
    # with conn-fields declared, Airflow 3.3 never calls them (and warns they are deprecated)
    assert not {"get_connection_form_widgets", "get_ui_field_behaviour"} & set(vars(MySqlCdcHook))


def test_server_id_field_states_the_default_and_how_many_ids_a_run_needs() -> None:
    from airflow_provider_mysqlcdc.cdc.source.server_id import DEFAULT_SERVER_ID_RANGE

    (conn_type,) = get_provider_info()["connection-types"]
    field = conn_type["conn-fields"]["server_id"]
    assert field["schema"]["default"] == DEFAULT_SERVER_ID_RANGE
    assert DEFAULT_SERVER_ID_RANGE in conn_type["ui-field-behaviour"]["placeholders"]["extra"]
    assert "readers_per_batch" in field["description"] and "+ 1 for the stream" in field["description"]
