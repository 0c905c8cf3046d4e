"""What a Spark cluster's executors need from this side: our package and the pure-Python drivers.

On ``local[*]`` the executors are processes of this environment and need nothing. On YARN,
Kubernetes or a standalone cluster they are not: the operator zips the packages below and ships
them with ``--py-files``. The executors' Python must still provide the compiled dependencies
(pyarrow and connectorx), for example through a packed virtualenv (``--archives``) or the image.
"""

from __future__ import annotations

import importlib
import re
import zipfile
from pathlib import Path

SHIPPED_PACKAGES = ("airflow_provider_mysqlcdc", "pymysql", "pymysqlreplication", "packaging")


def build_py_files(directory: Path) -> Path:
    """A zip of the shipped packages' sources in ``directory``."""
    target = directory / "mysql_cdc_py_files.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in SHIPPED_PACKAGES:
            package_dir = Path(importlib.import_module(name).__file__ or "").parent
            for path in sorted(package_dir.rglob("*.py")):
                archive.write(path, str(Path(name) / path.relative_to(package_dir)))
    return target


# local, local[4], local[*], and with a task retry count: local[4,2], local[*,2]. Not local-cluster[...]:
# its executors are JVMs of their own, as on a cluster.
_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)(,\s*\d+)?\])?")


def is_local_master(master: str) -> bool:
    """Spark's executors run inside the driver's JVM (and its Python workers are this environment's)."""
    return _LOCAL_MASTER.fullmatch(master.strip()) is not None
