"""The wheel a user installs carries what the source tree promises: py.typed, LICENSE, Spark's log4j2 file.

The build runs on a copy of the files git knows (tracked and new, not ignored), so it leaves no
``build/`` or ``*.egg-info`` in the working tree and sees uncommitted changes.
"""

from __future__ import annotations

import email
import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.checks

ROOT = Path(__file__).resolve().parents[2]


def _source_copy(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet staged is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = _source_copy(work / "src")
    out = work / "dist"
    if importlib.util.find_spec("build"):
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (built,) = out.glob("airflow_provider_mysqlcdc-*.whl")
    return built


def test_wheel_ships_type_marker_license_and_spark_logging(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "airflow_provider_mysqlcdc/py.typed" in names
    assert "airflow_provider_mysqlcdc/spark/log4j2.properties" in names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    shipped = zipfile.ZipFile(wheel).read(license_file).decode()
    assert shipped == (ROOT / "LICENSE").read_text() and "Apache License" in shipped and "Version 2.0" in shipped


def test_wheel_metadata_states_version_license_and_classifiers(wheel: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(wheel) as whl:
        (metadata_name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(whl.read(metadata_name))
        (entry_points,) = [n for n in whl.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "[apache_airflow_provider]" in whl.read(entry_points).decode()
    assert metadata["Version"] == project["version"]
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["License-File"] == "LICENSE"
    classifiers = set(metadata.get_all("Classifier") or ())
    assert {"Framework :: Apache Airflow :: Provider", "Topic :: Database"} <= classifiers
