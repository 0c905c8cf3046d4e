"""One plain ``pip install`` of the built wheel into a fresh virtualenv gives a working, full Spark.

The Spark provider requires ``pyspark-client``, which installs its files into the same ``pyspark/``
folder as the full ``pyspark`` (jars, ``spark-submit``); pyproject.toml pins both to one release so
whichever pip writes last, the files are pyspark's own. This test proves it the way a user meets it:
the session's wheel (tests/checks/conftest.py) is installed with the new venv's pip, no flags, the
machine's pip cache and settings as they are; then ``pip check``, the files on disk, and a PySpark job
through that venv's ``spark-submit`` on ``local[1]`` whose workers run the venv's Python.
A cold install of Airflow, Spark and the rest takes about 1.5 minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from tests.checks.distributions import BuiltDistributions

FACTS = Path(__file__).with_name("installed_facts.py")
# the venv's own Spark and Python only: nothing of the development venv or of a Spark on the machine
_FOREIGN = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")

JOB = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("install-check").getOrCreate()
total = spark.range(1, 101).selectExpr("sum(id)").first()[0]
(worker_python,) = set(spark.sparkContext.parallelize(range(4), 2).map(lambda _: sys.executable).collect())
print("RESULT", total, spark.version, sys.executable, worker_python)
spark.stop()
"""


def _run(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, built: BuiltDistributions) -> Iterator[tuple[Path, dict[str, str]]]:
    """A new virtualenv with the wheel installed by plain ``pip install``, and the environment to run it in."""
    root = tmp_path_factory.mktemp("fresh") / "venv"
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
    env["PATH"] = f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    made = _run([sys.executable, "-m", "venv", str(root)], env, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    installed = _run([str(root / "bin" / "python"), "-m", "pip", "install", str(built.wheel)], env, timeout=540)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    yield root, env
    shutil.rmtree(root)  # about 1.5 GB


@pytest.fixture(scope="module")
def facts(venv: tuple[Path, dict[str, str]]) -> dict[str, Any]:
    root, env = venv
    done = _run([str(root / "bin" / "python"), str(FACTS)], env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_pip_check_finds_no_broken_requirement(venv: tuple[Path, dict[str, str]]) -> None:
    root, env = venv
    done = _run([str(root / "bin" / "python"), "-m", "pip", "check"], env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pyspark_is_the_full_distribution_whatever_pyspark_client_wrote(facts: dict[str, Any]) -> None:
    assert facts["pyspark_imported"] == facts["pyspark_installed"] == facts["pyspark_client_installed"]
    assert facts["client_files_not_pyspark_own"] == []
    assert facts["spark_core_jars"] == [f"spark-core_2.13-{facts['pyspark_installed']}.jar"]


def test_airflow_finds_the_provider_and_its_operators_import(facts: dict[str, Any]) -> None:
    assert facts["provider"] == {
        "package-name": "airflow-provider-mysqlcdc",
        "snapshot_operator": "airflow_provider_mysqlcdc.operators.snapshot.MySqlSnapshotSparkOperator",
    }


def test_requires_python_is_what_the_dependencies_need(facts: dict[str, Any]) -> None:
    def lowest(spec: str) -> tuple[int, ...]:
        floors = [s.version for s in SpecifierSet(spec) if s.operator in (">=", "~=", "==")]
        return max((tuple(map(int, v.split(".")[:2])) for v in floors), default=(3, 0))

    needed = {name: lowest(spec) for name, spec in facts["dependencies_requires_python"].items()}
    assert lowest(facts["requires_python"]) == max(needed.values()), (facts["requires_python"], needed)


def test_spark_submit_of_the_venv_runs_a_pyspark_job_on_its_python(
    venv: tuple[Path, dict[str, str]], facts: dict[str, Any], tmp_path: Path
) -> None:
    root, env = venv
    python, spark_submit = str(root / "bin" / "python"), str(root / "bin" / "spark-submit")
    version = _run([spark_submit, "--version"], env, timeout=120)
    assert version.returncode == 0, version.stderr[-2000:]
    assert f"version {facts['pyspark_installed']}" in version.stdout + version.stderr

    (tmp_path / "job.py").write_text(JOB)
    done = _run([spark_submit, "--master", "local[1]", "--conf", f"spark.pyspark.python={python}",
                 "--conf", f"spark.pyspark.driver.python={python}", "--conf", "spark.log.level=WARN",
                 str(tmp_path / "job.py")], env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (result,) = re.findall(r"^RESULT .*$", done.stdout, re.MULTILINE)
    assert result.split()[1:] == ["5050", facts["pyspark_installed"], python, python]
