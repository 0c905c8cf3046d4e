"""The CDC core must import neither Airflow nor Spark: Spark executors and lean workers import it."""

import pkgutil
import subprocess
import sys

import pytest

import airflow_provider_mysqlcdc.cdc as cdc

pytestmark = pytest.mark.checks


def test_cdc_core_imports_neither_airflow_nor_pyspark() -> None:
    modules = [f"airflow_provider_mysqlcdc.cdc.{m.name}" for m in pkgutil.iter_modules(cdc.__path__)]
    assert modules, "the cdc package has no modules"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('airflow', 'pyspark'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"cdc/ pulled in: {out.stdout.strip()}"
