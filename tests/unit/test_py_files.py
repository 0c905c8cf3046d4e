"""The --py-files zip for clusters holds the package and the pure-Python drivers, importable from the zip."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from airflow_provider_mysqlcdc.spark.py_files import build_py_files, is_local_master


def test_zip_is_importable(tmp_path: Path) -> None:
    archive = build_py_files(tmp_path)
    names = zipfile.ZipFile(archive).namelist()
    assert "airflow_provider_mysqlcdc/spark/snapshot_job.py" in names
    assert "pymysql/connections.py" in names and "pymysqlreplication/binlogstream.py" in names
    # -S: no site-packages, so the modules can only come from the zip
    probe = "import pymysql, pymysqlreplication.gtid, airflow_provider_mysqlcdc.cdc.offset.gtid as g; print(g.__file__)"
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(archive)!r}); {probe}"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert str(archive) in out.stdout


def test_local_masters() -> None:
    assert is_local_master("local[2]") and is_local_master("local[*]") and is_local_master("local")
    assert not is_local_master("yarn") and not is_local_master("k8s://https://api:6443")
