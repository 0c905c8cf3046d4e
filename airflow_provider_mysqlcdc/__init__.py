"""Apache Airflow provider for consistent MySQL/MariaDB change data capture into a data lake.

Importing the package must stay cheap and free of Airflow and Spark: the CDC core in ``cdc/`` is
imported by Spark executors and by the triggerer, where neither may be present.

``__version__`` is the installed distribution's version (``pyproject.toml`` is the one place it is
written). On a Spark executor the package may arrive as ``--py-files`` without its metadata; it then
reads ``0+unknown``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("airflow-provider-mysqlcdc")
except PackageNotFoundError:  # imported from a source tree or a zip on sys.path, not installed
    __version__ = "0+unknown"
