"""A Spark application's error, handed back to the task that submitted it.

``spark-submit`` exits non-zero whatever went wrong, and the Spark provider's operator fails the task
with "Cannot execute: spark-submit ..." for all of it: the error the job raised, a ``MySqlCdcError`` that
says what is wrong and what to do, was in the task log only, among Spark's lines. The driver writes it
to a file the operator names (``--error-file``: a path on the operator's machine, where the driver runs
in client deploy mode, Spark's default), and the operator raises it again, the same class with the same
message, once ``spark-submit`` has failed (``operators.spark_submit``). A driver elsewhere (cluster
deploy mode on Kubernetes) cannot write there: the task fails with the provider's error, the job's own
in its log.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from airflow_provider_mysqlcdc.exceptions import MySqlCdcError

ERROR_FILE_ARGUMENT = "--error-file"
_PACKAGE = "airflow_provider_mysqlcdc"


def report_error(kind: str, path: str | None, error: MySqlCdcError) -> None:
    """The driver's error: on its stderr (the task log), and into ``path`` when the operator named one."""
    print(f"{kind}: {error}", file=sys.stderr, flush=True)
    if not path:
        return
    document = {"module": type(error).__module__, "class": type(error).__qualname__, "message": str(error)}
    try:
        Path(path).write_text(json.dumps(document), encoding="utf-8")
    except OSError as failure:  # a driver on another machine than the operator (cluster deploy mode)
        print(f"{kind}: the error could not be handed to the task through {path}: {failure}", file=sys.stderr)


def read_error(path: str) -> MySqlCdcError | None:
    """The error the driver wrote into ``path``, as the package's class it was with its message; None when it
    wrote none (a job killed, an error of Spark's own)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        module, name, message = str(document["module"]), str(document["class"]), str(document["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    found: object = None
    if module == _PACKAGE or module.startswith(f"{_PACKAGE}."):
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            found = None
    if isinstance(found, type) and issubclass(found, MySqlCdcError):
        return found(message)
    return MySqlCdcError(f"{name}: {message}")
