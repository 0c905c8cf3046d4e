"""Apache Airflow provider for consistent MySQL/MariaDB change data capture into a data lake.

Importing the package must stay cheap and free of Airflow and Spark: the CDC core in ``cdc/`` is
imported by Spark executors and by the triggerer, where neither may be present.
"""

__version__ = "0.1.0"
