"""What our ``SparkSubmitOperator`` subclasses set up around ``spark-submit`` (the verify operator's
version; the snapshot operator has the same steps inline).

On a local master (``local``, ``local[N]``, ``local[*]``) the executors live in the driver's JVM on the
Airflow worker, so ``spark-submit`` and the Python workers must be this environment's (PATH decides, see
AIRFLOW.md). The CDC password reaches the driver through the environment of the ``spark-submit``
process only, which a driver in cluster deploy mode does not inherit: only a Kubernetes secret gives
it the password there without a Spark property holding the value.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


def local_master_env(env_vars: dict[str, str] | None) -> dict[str, str]:
    """``spark-submit``'s environment on a local master: this environment's ``bin`` first on PATH and its
    Python for the workers and the driver, under the user's ``env_vars`` (which win)."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        **(env_vars or {}),
    }


def check_password_reaches_driver(conn_id: str, master: str, deploy_mode: str | None, conf: dict[str, str] | None,
                                  password_env: str) -> None:
    """Refuse cluster deploy mode unless Kubernetes gives the driver ``password_env`` from a secret."""
    if (deploy_mode or "client") != "cluster":
        return
    secret = f"spark.kubernetes.driver.secretKeyRef.{password_env}"
    if master.startswith("k8s://") and secret in (conf or {}):
        return
    raise InvalidOptionError(
        f"the Spark connection {conn_id!r} runs the driver in cluster deploy mode (master {master}), where it "
        f"cannot get the CDC password from this task's environment, and a Spark property holding it would show "
        f"on the command line and in the Spark UI: use client deploy mode (Spark's default), or on Kubernetes "
        f"give the driver {password_env} from a secret with conf {{{secret!r}: '<secret name>:<key>'}}"
    )
