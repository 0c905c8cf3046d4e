"""What our ``SparkSubmitOperator`` subclasses (snapshot, verify) set up around ``spark-submit``.

On a local master (``local``, ``local[N]``, ``local[*]``) the executors live in the driver's JVM on the
Airflow worker, so ``spark-submit`` and the Python workers must be this environment's (PATH decides, see
docs/design/airflow.md). On a cluster master nothing is injected: ``spark-submit`` comes from PATH, the Python of the
driver and executors from ``spark.pyspark.python`` (or a packed environment in ``archives``), and the
package is shipped as ``--py-files``; there the Spark provider turns ``env_vars`` into driver settings, and
this worker's PATH would replace the PATH of a driver pod.

The CDC password and the lake's storage options (``lake_conn_id``'s keys) never go into ``env_vars``
or ``conf``: both end up on the ``spark-submit`` command line (``ps``) or in the Spark UI's environment.
They are put into the environment of the ``spark-submit`` process alone (:func:`environment_variable`),
which the driver inherits in client deploy mode; a driver in cluster deploy mode does not, and only a
Kubernetes secret gives it them there without a Spark property holding the value.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.log import mask_secret

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.lake_arguments import open_lake
from airflow_provider_mysqlcdc.spark.application import LAKE_OPTIONS_ENV, PASSWORD_ENV
from airflow_provider_mysqlcdc.spark.job_error import ERROR_FILE_ARGUMENT, read_error
from airflow_provider_mysqlcdc.spark.py_files import build_py_files, is_local_master

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
    from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
    from airflow_provider_mysqlcdc.lake.handle import Lake


DRIVER_JIT = "-XX:TieredStopAtLevel=1"
"""The driver JVM compiles with the quick compiler (C1) only. Our jobs' rows never pass through the JVM
(executors read and write them in Python, the driver only schedules tasks and collects a result a chunk),
so the optimizing compiler (C2) has nothing worth its work: measured here, it took ~5 s of CPU of a
``spark-submit`` of ~13 s, on the same cores as the chunk readers and the source server
(``bench/RESULTS.md``, "Snapshot: where the time goes now")."""


def job_spark_conf() -> dict[str, str]:
    """Our jobs' Spark settings: Spark at WARN (its default profile logs ~90 INFO lines a job into the task
    log), and a driver JVM that spends its CPU on the job, not on compiling itself (``DRIVER_JIT``)."""
    properties = Path(__file__).resolve().parents[1] / "spark" / "log4j2.properties"
    return {
        "spark.log.level": "WARN",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{properties} {DRIVER_JIT}",
        "spark.ui.showConsoleProgress": "false",
    }


@contextmanager
def environment_variable(name: str, value: str) -> Iterator[None]:
    """``name`` in this process's environment while the block runs: ``spark-submit`` is started with a copy
    of it (the Spark hook's ``Popen``), and nothing else of ours reads it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


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
                                  password_env: str, what: str = "the CDC password") -> None:
    """Refuse cluster deploy mode unless Kubernetes gives the driver ``password_env`` (holding ``what``)
    from a secret."""
    if (deploy_mode or "client") != "cluster":
        return
    secret = f"spark.kubernetes.driver.secretKeyRef.{password_env}"
    if master.startswith("k8s://") and secret in (conf or {}):
        return
    raise InvalidOptionError(
        f"the Spark connection {conn_id!r} runs the driver in cluster deploy mode (master {master}), where it "
        f"cannot get {what} from this task's environment, and a Spark property holding it would show "
        f"on the command line and in the Spark UI: use client deploy mode (Spark's default), or on Kubernetes "
        f"give the driver {password_env} from a secret with conf {{{secret!r}: '<secret name>:<key>'}}"
    )


def spark_master(conn_id: str, deploy_mode: str | None) -> tuple[str, str | None]:
    """The master and the deploy mode ``spark-submit`` gets from the Spark connection ``conn_id`` and the
    operator's ``deploy_mode`` argument, as the Spark provider resolves them.

    Through the hook's private ``_connection``: the provider resolves a connection (host and port into a
    master, the deploy mode from the argument or the ``deploy-mode`` extra, a missing connection into
    ``yarn``) only inside its hook, and doing it again here would drift from it.
    ``tests/unit/test_spark_provider.py`` fails when the provider changes that."""
    connection = SparkSubmitHook(conn_id=conn_id, deploy_mode=deploy_mode)._connection
    return connection["master"], connection["deploy_mode"]


class SparkApplicationOperator(SparkSubmitOperator):
    """A ``SparkSubmitOperator`` that runs one of the package's Spark applications (``spark/<kind>_job.py``) for one
    job (``engine.snapshot.jobs``; the ``batch`` argument, one item of the split's or the verify plan's
    XCom): the snapshot's and the verification's. Subclasses document and pass every argument; the Spark
    connection is ``spark_conn_id`` (templated, handed over as the base class's ``conn_id``, which is
    refused: the base class keeps it untemplated as ``_conn_id``)."""

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields, "base_uri", "batch", "mysql_cdc_conn_id", "spark_conn_id",
        "lake_conn_id",
    )

    def __init__(
        self,
        *,
        kind: str,
        batch: dict[str, Any],
        base_uri: str,
        mysql_cdc_conn_id: str,
        partitions: int,
        spark_conn_id: str,
        map_index_template: str | None,
        lake_conn_id: str | None,
        **kwargs: Any,
    ) -> None:
        if "conn_id" in kwargs:
            raise TypeError(
                f"{type(self).__name__} takes spark_conn_id (templated) for the Spark connection, not conn_id"
            )
        kwargs.setdefault("name", f"mysql-cdc-{kind}")
        application = str(Path(__file__).resolve().parents[1] / "spark" / f"{kind}_job.py")
        super().__init__(application=application, conn_id=spark_conn_id, map_index_template=map_index_template,
                         **kwargs)
        self.batch = batch
        self.base_uri = base_uri
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.partitions = partitions
        self.spark_conn_id = spark_conn_id
        self.lake_conn_id = lake_conn_id

    def open_lake(self) -> Lake:
        """The lake of ``base_uri``, reached with ``lake_conn_id``'s storage options (rendered)."""
        return open_lake(self.base_uri, self.lake_conn_id)

    def prepare(self, job: Job, lake: Lake, job_arguments: list[str], what: str) -> ConnectionConfig:
        """Set this task up to submit its Spark application (``spark.application``) for ``job`` and return the
        source's config: the job's arguments (the connection without password), ``job_spark_conf`` under
        the user's ``conf``, the environment or the shipped package for the master. Refuses a job without
        server ids, too many tasks, a narrowed ``server_id`` range and a cluster deploy mode the password
        (or the lake connection's storage options) cannot reach. Run it in ``execute``, then ``run_job``
        (the password and the storage options in ``spark-submit``'s environment)."""
        # the engine and the lake (pyarrow): not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import job_server_id, job_tasks

        # The base class keeps ``conn_id`` untemplated, as the private ``_conn_id`` its ``execute`` builds
        # the hook from, and ``deploy_mode`` (given directly or by default_args) as ``_deploy_mode``, with
        # no public way to set or read them: the rendered ``spark_conn_id`` goes there
        # (``tests/unit/test_spark_provider.py`` fails when the provider changes either).
        self._conn_id = self.spark_conn_id
        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        tasks = job_tasks(job, self.partitions)  # refuses a job without server ids, or too many tasks
        ids = [job_server_id(job, config.server_id, task) for task in range(tasks)]  # refuses a narrowed range
        if config.password:
            mask_secret(config.password)
        self.application_args = [
            *job_arguments, "--base-uri", lake.base_uri,
            "--batch", json.dumps(job.to_dict(), separators=(",", ":")),  # compact: one argument, 128 KiB at most
            "--connection", json.dumps(config.to_dict()), "--partitions", str(self.partitions),
        ]
        self.conf = {**job_spark_conf(), **(self.conf or {})}  # the user's conf wins
        master, deploy_mode = spark_master(self.spark_conn_id, self._deploy_mode)
        if is_local_master(master):
            self.env_vars = local_master_env(self.env_vars)
        else:
            check_password_reaches_driver(self.spark_conn_id, master, deploy_mode, self.conf, PASSWORD_ENV)
            if lake.storage_options:
                check_password_reaches_driver(self.spark_conn_id, master, deploy_mode, self.conf, LAKE_OPTIONS_ENV,
                                              "the lake connection's storage options")
            shipped = build_py_files(Path(tempfile.mkdtemp(prefix="mysql-cdc-")))
            self.py_files = ",".join(p for p in (self.py_files, str(shipped)) if p)
        self.log.info("%s %s through Spark (master %s): %d tasks, binlog server ids %d-%d", what, job.label,
                      master, tasks, ids[0], ids[-1])
        return config

    def run_job(self, context: Any, config: ConnectionConfig, lake: Lake) -> None:
        """``spark-submit`` with the password and the lake's storage options in its environment only. When it
        fails, the task fails with the job's own error, the class and message its driver raised
        (``spark.job_error``), not the provider's "Cannot execute": the driver writes it into a file of a
        folder made for this run."""
        with tempfile.TemporaryDirectory(prefix="mysql-cdc-job-") as folder, \
                environment_variable(PASSWORD_ENV, config.password), \
                environment_variable(LAKE_OPTIONS_ENV, json.dumps(dict(lake.storage_options))):
            error_file = str(Path(folder) / "error.json")
            arguments = list(self.application_args or [])
            self.application_args = [*arguments, ERROR_FILE_ARGUMENT, error_file]
            try:
                SparkSubmitOperator.execute(self, context)
            except Exception as failure:
                error = read_error(error_file)
                if error is None:
                    raise
                raise error from failure
            finally:
                self.application_args = arguments
