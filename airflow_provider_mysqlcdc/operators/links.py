"""The operators' extra links: "Lake table" on every task, "Spark application" on the snapshot task.

Airflow 3's UI never runs provider code to draw a link. The serialized DAG keeps each link's name and
XCom key only, and the API server answers with the value of that XCom (``XComOperatorLink``); the task
runner pushes ``get_link``'s result there when a try ends (also when it defers). So the operators
persist each URL to that XCom during the run, as soon as they know it, and ``get_link`` (called by the
task runner in the worker) hands back what was persisted: the UI then shows the Spark UI of a job
still running, and needs no I/O of its own.

Which URL:

- *Lake table*: the table's current-state Delta table (``LakeTable.current``); for a task of several
  tables (split, stream) the deepest folder holding all of them (``<base_uri>/<db>`` or ``<base_uri>``);
  ``<base_uri>`` for a split selecting its tables by regular expressions.
  A local lake gives a ``file://`` URI. On S3 it is the AWS console's page of that prefix, since a
  browser can open it and not an ``s3://`` URI; with ``AWS_ENDPOINT_URL`` (an S3-compatible server,
  whose console if any is unknown) it is the ``s3://`` URI, which Delta readers open. Other schemes
  (``hdfs://``, ``gs://``) are given as they are.
- *Spark application*: the job's driver prints its application id, UI address and history server
  (``spark.yarn.historyServer.address``, used only with ``spark.eventLog.enabled``) as one line, which
  the operator reads from ``spark-submit``'s output as the Spark hook passes it through. While the job
  runs the link is its live UI; once it ends, its page on the history server when there is one, else
  the UI's address stays, which a ``local[*]`` job no longer serves (its UI ends with the job).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

from airflow_provider_mysqlcdc.spark.application import APPLICATION_LINE, EVENT_LOG_ENABLED, HISTORY_SERVER_ADDRESS

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

    from airflow_provider_mysqlcdc.cdc.schema.table import TableId
    from airflow_provider_mysqlcdc.lake.handle import Lake

AWS_CONSOLE_S3 = "https://s3.console.aws.amazon.com/s3/buckets/"


class _PersistedLink(BaseOperatorLink):
    """A link whose URL the operator pushes to the link's XCom while it runs."""

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        value = XCom.get_value(ti_key=ti_key, key=self.xcom_key)
        return value if isinstance(value, str) else ""

    def persist(self, context: Mapping[str, Any] | None, url: str | None) -> None:
        """Push ``url`` to this link's XCom of the running task instance (nothing outside a DAG run)."""
        ti = context.get("ti") if context else None
        if ti is not None and url:
            ti.xcom_push(key=self.xcom_key, value=url)


class LakeTableLink(_PersistedLink):
    """Where the task's tables are in the lake (every operator of this package)."""

    name = "Lake table"
    xcom_key = "mysql_cdc_lake_table"


class SparkApplicationLink(_PersistedLink):
    """The snapshot job's Spark UI while it runs, its history server page once it ended (when known)."""

    name = "Spark application"
    xcom_key = "mysql_cdc_spark_application"


def persist_lake_link(context: Mapping[str, Any] | None, lake: Lake, tables: Sequence[str | TableId]) -> None:
    """The "Lake table" link of a task writing or planning ``tables`` in ``lake`` (its storage options, the
    endpoint and region, over the environment's)."""
    LakeTableLink().persist(context, lake_url(lake, tables, {**os.environ, **lake.storage_options}))


def lake_url(lake: Lake, tables: Sequence[str | TableId], environ: Mapping[str, str]) -> str:
    """A URL of the tables' place in the lake, as the module docstring says (the lake's for no table)."""
    locations = sorted({lake.table(table).current.uri for table in tables})
    if not locations:  # tables not named (the split's regular expressions): the lake
        location = lake.uri
    else:
        location = locations[0] if len(locations) == 1 else _common_folder(locations)
    if "://" not in location:
        return Path(location).as_uri()
    if location.startswith("s3://") and not (environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")):
        bucket, _, key = location[len("s3://"):].partition("/")
        query = {"prefix": f"{key}/"} if key else {}
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
        if region:
            query = {"region": region, **query}
        return f"{AWS_CONSOLE_S3}{quote(bucket)}" + (f"?{urlencode(query, safe='/', quote_via=quote)}" if query else "")
    return location


def _common_folder(locations: Sequence[str]) -> str:
    """The longest run of whole path segments all ``locations`` start with (``s3://b/p/db``)."""
    common: list[str] = []
    for segments in zip(*(location.split("/") for location in locations), strict=False):
        if len(set(segments)) > 1:
            break
        common.append(segments[0])
    return "/".join(common)


@dataclass(frozen=True)
class SparkUiPages:
    """Where a job's Spark application shows itself: its live UI and its history server page, as the driver
    prints them (``spark/application.py``) or as the Spark hook and the operator's ``conf`` know them. Not the
    application itself (``spark.application.SparkApplication``), only what the "Spark application" link needs."""

    id: str
    """The Spark application id."""
    ui: str | None = None
    """The driver's live UI (``SparkContext.uiWebUrl``); None with ``spark.ui.enabled=false``."""
    history_server: str | None = None
    """``spark.yarn.historyServer.address``: ``host:port``, Spark's documented form, or a URL."""
    event_log: bool = False
    """``spark.eventLog.enabled``: without event logs the history server never knows the application."""

    @classmethod
    def from_line(cls, line: str) -> SparkUiPages | None:
        """The pages the driver's line names (``APPLICATION_LINE`` and JSON), or None for other lines."""
        text = line.strip()
        if not text.startswith(APPLICATION_LINE):
            return None
        try:
            fields = json.loads(text[len(APPLICATION_LINE):])
            return cls(str(fields["id"]), fields.get("ui") or None, fields.get("history_server") or None,
                       bool(fields.get("event_log")))
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def from_conf(cls, application_id: str, conf: Mapping[str, Any] | None) -> SparkUiPages:
        """An application known by its id alone (a driver elsewhere, e.g. Kubernetes cluster mode, where the
        Spark hook reads the id from ``spark-submit``), with the history server of the operator's ``conf``."""
        conf = conf or {}
        history = conf.get(HISTORY_SERVER_ADDRESS)
        return cls(application_id, None, str(history) if history else None,
                   str(conf.get(EVENT_LOG_ENABLED, "false")).strip().lower() == "true")

    @property
    def history_url(self) -> str | None:
        """The application's page on the history server, when it has one and gets the event log."""
        if not self.history_server or not self.event_log:
            return None
        address = self.history_server.strip().rstrip("/")
        if "://" not in address:
            address = f"http://{address}"
        return f"{address}/history/{quote(self.id, safe='')}/"

    def url(self, *, running: bool) -> str | None:
        """The live UI while the job runs; afterwards the history server's page, else the UI's address."""
        if running:
            return self.ui or self.history_url
        return self.history_url or self.ui


class SparkApplicationWatch:
    """Follows the output of one ``spark-submit`` for the driver's application line and keeps the snapshot
    task's "Spark application" link current: the live UI at once, the final URL when the job ends."""

    def __init__(self, context: Mapping[str, Any] | None, conf: Mapping[str, Any] | None) -> None:
        self.context = context
        self.conf = conf
        self.pages: SparkUiPages | None = None
        self._link = SparkApplicationLink()

    def attach(self, hook: SparkSubmitHook) -> SparkSubmitHook:
        """Make ``hook`` show this watch every line of ``spark-submit`` before its own processing (which logs
        the line and looks for the ids it tracks; the hook offers no other way to see the lines). A Spark
        provider without that private method gets no link, and its job runs as before
        (``tests/unit/test_spark_provider.py`` fails when the provider changes it)."""
        process: Callable[[Iterator[Any]], None] | None = getattr(hook, "_process_spark_submit_log", None)
        if process is None:
            return hook

        def watched(lines: Iterator[Any]) -> None:
            process(self.lines(lines))

        hook._process_spark_submit_log = watched  # type: ignore[method-assign, assignment]
        return hook

    def lines(self, lines: Iterable[Any]) -> Iterator[Any]:
        """``lines`` unchanged; the first application line seen persists the link to the live UI."""
        for line in lines:
            if self.pages is None:
                self.pages = SparkUiPages.from_line(str(line))
                if self.pages is not None:
                    self._link.persist(self.context, self.pages.url(running=True))
            yield line

    def finished(self, hook: SparkSubmitHook | None) -> None:
        """The job ended (or failed): link its history server page if there is one. A driver elsewhere (not
        printing here) is known by the id the Spark hook read from ``spark-submit``, if any."""
        pages, shown = self.pages, None
        if pages is not None:
            shown = pages.url(running=True)
        elif hook is not None and (found := getattr(hook, "_kubernetes_application_id", None)
                                   or getattr(hook, "_yarn_application_id", None)):
            pages = SparkUiPages.from_conf(found, self.conf)
        final = pages.url(running=False) if pages is not None else None
        if final != shown:
            self._link.persist(self.context, final)
