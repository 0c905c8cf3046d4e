"""What a plain ``pip install`` of the wheel put into a virtualenv, printed as JSON on stdout.

tests/checks/test_install.py runs this file with the fresh virtualenv's own Python (the test process
runs in the development venv, whose packages say nothing about a user's install). Only the standard
library and ``packaging`` (an Airflow dependency) are used, and nothing is judged here: the test asserts.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PACKAGE = "airflow-provider-mysqlcdc"


def _sha256(path: Path) -> str:
    """A file's digest as RECORD writes it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


def client_files_not_pyspark_own() -> list[str]:
    """Files of the ``pyspark/`` folder that pyspark-client installed and whose bytes on disk are not
    the ones pyspark's RECORD lists: pyspark-client overwrote pyspark with other code."""
    pyspark = {str(f): f.hash.value for f in metadata.distribution("pyspark").files or () if f.hash}
    differing = []
    for file in metadata.distribution("pyspark-client").files or ():
        name = str(file)
        if name in pyspark and _sha256(Path(str(file.locate()))) != pyspark[name]:
            differing.append(name)
    return differing


def dependencies_requires_python() -> dict[str, str]:
    """``Requires-Python`` of each distribution the package requires (extras left out)."""
    out = {}
    for line in metadata.requires(PACKAGE) or ():
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            out[requirement.name] = metadata.metadata(requirement.name).get("Requires-Python") or ""
    return out


def provider() -> dict[str, str]:
    """The provider Airflow finds through the entry point, and the snapshot operator (it imports the
    Spark provider's operator)."""
    from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator

    (entry,) = [e for e in metadata.entry_points(group="apache_airflow_provider") if e.dist and e.dist.name == PACKAGE]
    return {
        "package-name": entry.load()()["package-name"],
        "snapshot_operator": f"{MySqlSnapshotSparkOperator.__module__}.{MySqlSnapshotSparkOperator.__qualname__}",
    }


def main() -> None:
    import pyspark

    home = Path(pyspark.__file__).parent
    print(json.dumps({
        "pyspark_imported": pyspark.__version__,
        "pyspark_installed": metadata.version("pyspark"),
        "pyspark_client_installed": metadata.version("pyspark-client"),
        "client_files_not_pyspark_own": client_files_not_pyspark_own(),
        "spark_core_jars": sorted(p.name for p in (home / "jars").glob("spark-core_*.jar")),
        "requires_python": metadata.metadata(PACKAGE)["Requires-Python"],
        "dependencies_requires_python": dependencies_requires_python(),
        "provider": provider(),
    }))


if __name__ == "__main__":
    main()
