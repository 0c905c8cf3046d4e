"""The wheel and sdist a user installs carry what the source tree promises: py.typed, LICENSE, Spark's
log4j2 file, the metadata of pyproject.toml, and pyspark pinned to pyspark-client's release.

Both come from the session's one ``python -m build`` (tests/checks/conftest.py).
"""

from __future__ import annotations

import email
import tarfile
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

from packaging.requirements import Requirement

from tests.checks.distributions import ROOT, BuiltDistributions


def _wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as whl:
        (metadata_name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(whl.read(metadata_name))


def test_wheel_ships_type_marker_license_and_spark_logging(built: BuiltDistributions) -> None:
    names = set(zipfile.ZipFile(built.wheel).namelist())
    assert "airflow_provider_mysqlcdc/py.typed" in names
    assert "airflow_provider_mysqlcdc/spark/log4j2.properties" in names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    shipped = zipfile.ZipFile(built.wheel).read(license_file).decode()
    assert shipped == (ROOT / "LICENSE").read_text() and "Apache License" in shipped and "Version 2.0" in shipped


def test_wheel_metadata_states_version_license_and_classifiers(built: BuiltDistributions) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    metadata = _wheel_metadata(built.wheel)
    with zipfile.ZipFile(built.wheel) as whl:
        (entry_points,) = [n for n in whl.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "[apache_airflow_provider]" in whl.read(entry_points).decode()
        # the UI plugin is registered in the provider info only (see tests/unit/test_provider.py)
        assert "[airflow.plugins]" not in whl.read(entry_points).decode()
    assert metadata["Version"] == project["version"]
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["License-File"] == "LICENSE"
    classifiers = set(metadata.get_all("Classifier") or ())
    assert {"Framework :: Apache Airflow :: Provider", "Topic :: Database"} <= classifiers


def test_pyspark_is_pinned_to_the_release_of_pyspark_client(built: BuiltDistributions) -> None:
    """The Spark provider requires pyspark-client, whose files overwrite pyspark's own in the same
    ``pyspark/`` folder: only the same release makes them the same files (test_install.py checks the bytes)."""
    pins: dict[str, str] = {}
    for line in _wheel_metadata(built.wheel).get_all("Requires-Dist") or ():
        requirement = Requirement(line)
        if requirement.name in ("pyspark", "pyspark-client") and requirement.marker is None:
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{requirement}: pin the exact release"
            pins[requirement.name] = spec.version
    assert set(pins) == {"pyspark", "pyspark-client"} and pins["pyspark"] == pins["pyspark-client"], pins


def test_sdist_carries_the_sources_the_wheel_is_built_from(built: BuiltDistributions) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
        (pkg_info,) = [m for m in sdist.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")]
        pkg_info_file = sdist.extractfile(pkg_info)
        assert pkg_info_file is not None
        metadata = email.message_from_bytes(pkg_info_file.read())
    assert {"pyproject.toml", "README.md", "LICENSE", "airflow_provider_mysqlcdc/py.typed",
            "airflow_provider_mysqlcdc/spark/log4j2.properties"} <= names
    assert metadata["Version"] == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
