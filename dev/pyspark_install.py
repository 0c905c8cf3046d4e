"""Detects (and repairs) pyspark-client's files installed over the full pyspark.

The Spark provider requires ``pyspark-client``, which ships the same ``pyspark/`` package folder
without Spark's jars; installed after pyspark, its files replace pyspark's and ``import pyspark``
reports the client's version while pip still lists the full one. ``pip check`` does not notice.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path


def pyspark_problem() -> str | None:
    """Why the installed pyspark is not the full distribution, or None if it is."""
    try:
        wanted = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return "pyspark is not installed"
    import pyspark

    if pyspark.__version__ != wanted:
        return (
            f"pyspark's files are those of pyspark-client {pyspark.__version__}, "
            f"not of the installed pyspark {wanted}"
        )
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").exists() or not any((home / "jars").glob("spark-core_*.jar")):
        return f"pyspark {wanted} at {home} has no spark-submit or Spark jars"
    return None


def main() -> int:
    problem = pyspark_problem()
    if problem is None:
        return 0
    if "--repair" not in sys.argv:
        print(problem, file=sys.stderr)
        return 1
    version = importlib.metadata.version("pyspark")
    print(f"==> {problem}: reinstalling pyspark=={version}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", f"pyspark=={version}"],
        check=True,
    )
    # a fresh interpreter: this one has already imported the client's pyspark
    return subprocess.run([sys.executable, "-m", "dev.pyspark_install"]).returncode


if __name__ == "__main__":
    sys.exit(main())
