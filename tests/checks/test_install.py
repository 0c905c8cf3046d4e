"""The install path leaves a working, full pyspark despite pyspark-client (see dev/pyspark_install.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

from dev.pyspark_install import pyspark_problem

pytestmark = pytest.mark.checks


def test_full_pyspark_is_in_place() -> None:
    assert pyspark_problem() is None


def test_spark_submit_beside_the_interpreter_runs() -> None:
    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    out = subprocess.run(
        [str(spark_submit), "--version"], capture_output=True, text=True, timeout=120,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"version {pyspark.__version__}" in out.stdout + out.stderr
