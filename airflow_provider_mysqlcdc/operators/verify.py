"""Verifying the replica against the source: plan the batches, verify each on Spark, summarize.

``MySqlVerifyPlanOperator`` takes the batches of each table's snapshot plan from the lake (the same
chunks the snapshot read) and gives each its binlog server ids; ``MySqlVerifyOperator`` (a
``SparkSubmitOperator``, mapped over those batches like the snapshot) runs ``spark/verify_job.py``,
whose executors compare their chunks with the replica as of each chunk's new high watermark
(``engine.verification.verify``) and whose driver writes the batch's report into the lake;
``MySqlVerifySummaryOperator`` combines a run's batch reports per table into
``<db>/<table>/verify/<run>.json``, logs the summary, returns it to XCom and fails on differences.
The stream must run meanwhile: each chunk is compared once the stream has committed past its HW.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.engine.options.split_options import SplitOptions
from airflow_provider_mysqlcdc.exceptions import ReplicaMismatchError, VerifyError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.operators.lake_arguments import open_lake
from airflow_provider_mysqlcdc.operators.spark_submit import SparkApplicationOperator

WAIT_SECONDS = 600.0
"""The verify tasks' default bound on waiting for the stream to pass their chunks' high watermarks."""


class MySqlVerifyPlanOperator(BaseOperator):
    """Returns the verify jobs, one a mapped task (``Job.to_dict``, with binlog server ids), for
    ``MySqlVerifyOperator.partial().expand(batch=...)``: every batch of each table's snapshot plan in the
    lake, in jobs as the split makes the snapshot's (``engine.snapshot.jobs``): batches of many tables in one
    job up to ``rows_per_batch`` rows (their manifests' rows), a larger batch in a job of its own, so that
    a whole database is verified in a handful of jobs. A table whose snapshot is not
    finished is refused (``VerifyError``).

    Server ids: each job gets its own consecutive indexes of the connection's ``server_id`` range from
    the first upward, one per Spark task (``readers_per_batch``, fewer for a job with fewer chunks);
    the range's last id is left to a stream. Verification runs while the replication DAG's stream does,
    and perhaps its snapshot tasks, which take ids from the same start: give verification a connection of
    its own (the same server) with a ``server_id`` range apart from the replication's.

    :param base_uri: the lake, the replication's; required (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). Default: ``None`` (templated)
    :param tables: the tables to verify, ``database.table``; required (templated)
    :param readers_per_batch: Spark tasks (chunk readers, one server id each) per job; the range must
        hold (jobs x readers_per_batch) + 1 ids. Default: ``2`` (templated)
    :param rows_per_batch: the rows a job verifies at most when it holds several batches (a batch of more
        has a job of its own), as the split's option of the same name. Default: ``10000000`` (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC. Default: ``mysql_cdc_default``
        (templated)
    """

    template_fields: Sequence[str] = ("base_uri", "tables", "readers_per_batch", "rows_per_batch",
                                      "mysql_cdc_conn_id", "lake_conn_id")

    def __init__(self, *, base_uri: str, tables: Any, readers_per_batch: Any = 2,
                 rows_per_batch: Any = SplitOptions.rows_per_batch, mysql_cdc_conn_id: str = "mysql_cdc_default",
                 lake_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.lake_conn_id = lake_conn_id
        self.tables = tables
        self.readers_per_batch = readers_per_batch
        self.rows_per_batch = rows_per_batch
        self.mysql_cdc_conn_id = mysql_cdc_conn_id

    def execute(self, context: Any) -> list[dict[str, Any]]:
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.batch_readers import assign_readers
        from airflow_provider_mysqlcdc.engine.snapshot.jobs import plan_jobs
        from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore

        readers = rendered.whole_number("readers_per_batch", self.readers_per_batch)
        rows_per_batch = rendered.whole_number("rows_per_batch", self.rows_per_batch)
        tables = rendered.table_list(self.tables)
        store = SnapshotStore(open_lake(self.base_uri, self.lake_conn_id))
        plans = store.read_plans(tables)
        missing = [t for t, p in plans.items() if p is None]
        if missing:
            raise VerifyError(f"the snapshot of {missing[0]} under {self.base_uri} is not planned: run the "
                              f"replication DAG first")
        planned = [p for p in plans.values() if p is not None]
        batches, rows = [], []
        for plan, manifests in zip(planned, store.manifests_of(planned), strict=True):
            for batch, manifest in zip(plan.batches, manifests, strict=True):
                if manifest is None:
                    raise VerifyError(f"the snapshot of {batch.table} under {self.base_uri} is not finished "
                                      f"({batch.label} is not committed): run the replication DAG first")
                batches.append(batch)
                rows.append(manifest.rows)
        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        jobs = plan_jobs(batches, rows, rows_per_batch, max_jobs=max(1, len(batches)))
        assigned = assign_readers(jobs, config.server_id, readers, self.mysql_cdc_conn_id)
        self.log.info("verify %d batches of %d tables (%d rows) in %d Spark jobs of up to rows_per_batch=%d rows",
                      len(batches), len(tables), sum(rows), len(assigned), rows_per_batch)
        return [b.to_dict() for b in assigned]


class MySqlVerifyOperator(SparkApplicationOperator):
    """Verifies one job of ``MySqlVerifyPlanOperator`` (one or more batches) on Spark (map it with
    ``.partial().expand(batch=...)``).

    The job's executors read their chunks from the source as the snapshot does (no locks), wait until
    the stream has committed past each chunk's high watermark (``wait_seconds`` at most, then fail
    naming the stream), and compare the chunk with the replica as of that watermark, key by key and
    column by column in the snapshot's types. The driver writes each batch's report into the lake; the
    task returns them (without the equal chunks' verdicts) to XCom as ``{"reports": [...]}``.
    Differences do not fail this task: ``MySqlVerifySummaryOperator`` decides. The password reaches Spark
    as the snapshot operator's does (the ``MYSQL_CDC_PASSWORD`` environment variable of ``spark-submit``);
    on a local master the job runs with this environment's Python, on a cluster master the package is
    shipped as ``--py-files``.

    :param batch: one item of the plan task's XCom (one job); required, usually mapped (templated)
    :param base_uri: the lake; required (templated)
    :param lake_conn_id: the lake's credentials, as the snapshot operator's (the Spark driver gets them
        through ``spark-submit``'s environment only). Default: ``None`` (templated)
    :param run: the verification run's name, the report's file name. Default: ``{{ run_id }}`` (templated)
    :param wait_seconds: how long a Spark task waits for the stream to pass its chunks' high watermarks.
        Default: ``600.0`` (templated)
    :param mysql_cdc_conn_id: the source, the plan task's connection. Default: ``mysql_cdc_default``
        (templated)
    :param partitions: Spark tasks of the job; 0: the job's readers (given by the plan task).
        Default: ``0``
    :param spark_conn_id: the Spark connection (``SparkSubmitOperator``'s ``conn_id``, which is refused
        here). Default: ``spark_default`` (templated)
    :param map_index_template: the mapped instance's label in the grid. Default:
        ``{{ task.batch['label'] }}``
    """

    template_fields: Sequence[str] = (*SparkApplicationOperator.template_fields, "run", "wait_seconds")

    def __init__(
        self,
        *,
        batch: dict[str, Any],
        base_uri: str,
        run: str = "{{ run_id }}",
        wait_seconds: Any = WAIT_SECONDS,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        partitions: int = 0,
        spark_conn_id: str = "spark_default",
        map_index_template: str | None = "{{ task.batch['label'] }}",
        lake_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(kind="verify", batch=batch, base_uri=base_uri, mysql_cdc_conn_id=mysql_cdc_conn_id,
                         partitions=partitions, spark_conn_id=spark_conn_id, map_index_template=map_index_template,
                         lake_conn_id=lake_conn_id, **kwargs)
        self.run = run
        self.wait_seconds = wait_seconds

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the report goes to XCom
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
        from airflow_provider_mysqlcdc.engine.verification.verify import VerifyStore

        job = Job.from_dict(self.batch)
        wait_seconds = rendered.seconds("wait_seconds", self.wait_seconds)
        lake = self.open_lake()
        config = self.prepare(job, lake, ["--run", str(self.run), "--wait-seconds", str(wait_seconds)],
                              f"verify (run {self.run})")
        self.run_job(context, config, lake)
        store, reports = VerifyStore(lake), []
        for batch in job.batches:
            report = store.read_batch(batch.table, str(self.run), batch.number)
            if report is None:
                raise VerifyError(f"the Spark job verifying {job.label} succeeded but wrote no report of "
                                  f"{batch.label} under {self.base_uri}: the driver must reach the same lake as "
                                  f"this task")
            reports.append(report)
        differing = [r for r in reports if not r.equal]
        self.log.info("%s: %d batches verified, %s", job.label, len(reports),
                      "all equal" if not differing else "; ".join(r.summary() for r in differing))
        return {"reports": [r.to_dict(differing_only=True) for r in reports]}


class MySqlVerifySummaryOperator(BaseOperator):
    """Combines a verification run's batch reports per table into ``<db>/<table>/verify/<run>.json``, logs
    each table's summary (and the first differing chunks with their keys), returns the summaries to XCom
    (``{table: report}`` without the equal chunks' verdicts), and fails with ``ReplicaMismatchError``
    when a table differs and ``fail_on_difference``. Run it after the verify tasks (``all_done`` is not
    needed: a failed verify task leaves its batch without a report, which fails this task too).

    :param base_uri: the lake; required (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). Default: ``None`` (templated)
    :param tables: the tables verified, ``database.table``; required (templated)
    :param run: the verification run's name, as given to the verify tasks. Default: ``{{ run_id }}``
        (templated)
    :param fail_on_difference: fail when any chunk differs. Default: ``True`` (templated)
    """

    template_fields: Sequence[str] = ("base_uri", "tables", "run", "fail_on_difference", "lake_conn_id")

    def __init__(self, *, base_uri: str, tables: Any, run: str = "{{ run_id }}", fail_on_difference: Any = True,
                 lake_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.lake_conn_id = lake_conn_id
        self.tables = tables
        self.run = run
        self.fail_on_difference = fail_on_difference

    def execute(self, context: Any) -> dict[str, Any]:
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.verification.verify import summarize
        from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore

        fail_on_difference = rendered.flag("fail_on_difference", self.fail_on_difference)
        lake = open_lake(self.base_uri, self.lake_conn_id)
        store, reports = SnapshotStore(lake), {}
        for table in rendered.table_list(self.tables):
            plan = store.read_plan(table)
            if plan is None:
                raise VerifyError(f"no snapshot plan of {table} under {self.base_uri}: nothing was verified")
            reports[str(table)] = summarize(lake, table, str(self.run), [b.number for b in plan.batches],
                                      fail_on_difference=False, log=self.log)
        differing = [r.summary() for r in reports.values() if not r.equal]
        if differing and fail_on_difference:
            raise ReplicaMismatchError("; ".join(differing))
        return {name: r.to_dict(differing_only=True) for name, r in reports.items()}
