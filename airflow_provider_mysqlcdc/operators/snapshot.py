"""One snapshot job (the batches of one table, or of many small tables) read on Spark: a
SparkSubmitOperator that submits our snapshot application.

What it sets up around ``spark-submit`` (the environment on a local master, the shipped package on a
cluster, the password in ``spark-submit``'s environment only) is every Spark application's, in
``operators/spark_submit.py``; this operator adds the batches' outcome: their summary in XCom, an asset
event, metrics and lineage for each, and links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.assets import replica_alias, snapshot_event
from airflow_provider_mysqlcdc.exceptions import SnapshotJobError
from airflow_provider_mysqlcdc.operators.links import (
    LakeTableLink,
    SparkApplicationLink,
    SparkApplicationWatch,
    persist_lake_link,
)
from airflow_provider_mysqlcdc.operators.snapshot_metrics import send_batch_metrics
from airflow_provider_mysqlcdc.operators.spark_submit import SparkApplicationOperator
from airflow_provider_mysqlcdc.operators.stream_metrics import task_tags

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.operators.lineage import Lineage


def job_outcome(job: Job, manifests: list[BatchManifest]) -> dict[str, Any]:
    """What the snapshot task returns to XCom: its label, totals, and each committed batch in a line (table,
    number, rows, bytes, chunks, Delta version, highest high watermark); the chunks' watermarks are in the
    batches' manifests in the lake (``SnapshotStore.read_manifest``)."""
    return {
        "label": job.label, "tables": len(job.tables), "rows": sum(m.rows for m in manifests),
        "bytes": sum(m.bytes for m in manifests), "chunks": sum(len(m.chunks) for m in manifests),
        "batches": [{"table": str(m.batch.table), "number": m.batch.number, "rows": m.rows, "bytes": m.bytes,
                     "chunks": len(m.chunks), "delta_version": m.delta_version,
                     "high_watermark": m.high_watermark.to_dict()} for m in manifests],
    }


class MySqlSnapshotSparkOperator(SparkApplicationOperator):
    """Snapshots one job of ``MySqlChunkSplitOperator`` (map it with ``.partial().expand(batch=...)``): one
    table's batch, or the batches of many small tables the split put in one job.

    It submits the package's PySpark application through the ordinary ``spark`` connection
    (``local[*]`` by default; YARN, Kubernetes or standalone otherwise). Executors read their chunks
    and write Parquet themselves into each table's current-state Delta table; the Spark driver commits
    each batch as one Delta transaction replacing the batch's partition, then its manifest. The task
    returns a summary (``job_outcome``: ``label``, ``rows``, ``bytes``, ``chunks``, and ``batches``, each
    with its table, rows, Delta version and highest ``high_watermark``); the chunks' watermarks are in the
    manifests in the lake. Re-running the task replaces its batches' rows only.
    The CDC password reaches the Spark driver through the ``MYSQL_CDC_PASSWORD`` environment variable of
    the ``spark-submit`` process only (never a command-line argument or a Spark property), and the
    executors inside their tasks. So the driver must run here: client deploy mode (Spark's default), or,
    on Kubernetes in cluster mode, a driver environment from a secret
    (``spark.kubernetes.driver.secretKeyRef.MYSQL_CDC_PASSWORD``); other cluster deploy modes are refused.

    On a local master (``local``, ``local[N]``, ``local[*]``) ``spark-submit`` and the Python workers are
    this environment's (PATH, ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON``, unless ``env_vars`` or the
    environment set them). On a cluster master nothing is injected: ``spark-submit`` comes from PATH, the
    Python of the driver and executors from ``spark.pyspark.python`` (or a packed environment in
    ``archives``), and the package and its pure-Python drivers are shipped as ``--py-files``.

    Binlog server ids: the job runs as many Spark tasks as it has readers (``readers`` in its
    dict, set by the split task from its ``readers_per_batch``, at most one per chunk), and task ``i``
    reads with the id at index ``first_reader + i`` of the connection's ``server_id`` range; the split
    gave every job of the run its own indexes, so parallel jobs never share an id. A dict from an older
    split (one batch, or without ids) is refused (clear the split task). Spark speculation is refused
    too: a speculative copy of a task would read with the same id.

    Arguments follow the official providers' ``<type>_conn_id`` names: the source is ``mysql_cdc_conn_id``
    and Spark is ``spark_conn_id``, as on the split and stream operators, the pipeline helper and the
    example DAG's params. ``SparkSubmitOperator``'s own ``conn_id`` is not accepted (a ``TypeError``
    names ``spark_conn_id``): ``spark_conn_id`` is handed to it, and unlike the base class's argument
    (kept as ``_conn_id``) it is templated, so a DAG param can choose the Spark connection. Every other
    ``SparkSubmitOperator`` argument applies as documented there (``application`` and
    ``application_args`` are ours).

    In the UI the task links its Spark application (the live Spark UI while the job runs, the history
    server's page afterwards when the job's Spark configuration names one) and its lake tables (the
    table's, or their common folder; ``operators.links``); once its batches are committed it sends the
    ``mysql_cdc.snapshot.*`` metrics of each batch's manifest through Airflow's ``Stats``
    (``operators.snapshot_metrics``).

    :param batch: one item of the split task's XCom (a ``Job.to_dict``: the batches of one job);
        required, usually mapped with ``.expand(batch=split.output)`` (templated)
    :param base_uri: the lake, the same as the split task's: a local path (local masters only) or
        ``s3://``/``s3a://``/``hdfs://`` shared by the worker, the driver and the executors; required
        (templated)
    :param lake_conn_id: the lake's credentials: an ``aws`` connection (login and password the access key
        id and secret; extra ``aws_session_token``, ``region_name``, ``endpoint_url``); ``None`` takes them
        from the environment (the standard AWS variables, the instance's role). They reach the Spark driver
        as the ``MYSQL_CDC_LAKE_OPTIONS`` environment variable of ``spark-submit`` only, and its tasks
        inside their closure. Default: ``None`` (templated)
    :param mysql_cdc_conn_id: the source, a connection of type MySQL CDC; the same as the split task's,
        whose ``server_id`` range the split checked. The password reaches Spark as the
        ``MYSQL_CDC_PASSWORD`` environment variable of ``spark-submit`` only. Default:
        ``mysql_cdc_default`` (templated)
    :param partitions: Spark tasks of the job; 0: the job's readers (the split's ``readers_per_batch``,
        at most one per chunk). More than those is refused (raise ``readers_per_batch`` on the split
        task instead). Default: ``0``
    :param spark_conn_id: the Spark connection: ``{"conn_type": "spark", "host": "local[*]"}``, YARN,
        Kubernetes or a standalone master; passed to ``SparkSubmitOperator`` as its ``conn_id``.
        Default: ``spark_default`` (templated)
    :param map_index_template: the mapped instance's label in the grid, e.g. ``shop.orders chunks
        0-123`` for one batch, ``shop: 212 tables, 240 chunks`` for a job of many. Default:
        ``{{ task.batch['label'] }}``
    :param conf: ``SparkSubmitOperator``'s Spark settings, over ours: Spark logs at WARN
        (``spark.log.level`` and a log4j2 file in ``spark.driver.extraJavaOptions``, which also keeps the
        driver JVM's compiler at C1: ``-XX:TieredStopAtLevel=1``); set them here to see more. Default:
        ``None`` (templated)
    :param name: ``SparkSubmitOperator``'s application name. Default: ``mysql-cdc-snapshot`` (templated)
    :param env_vars: ``SparkSubmitOperator``'s environment of ``spark-submit``; on a local master ours
        (``PATH``, ``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON``) are added under it, so a value given
        here wins. Default: ``None`` (templated)
    :param py_files: ``SparkSubmitOperator``'s ``--py-files``; on a cluster master the package's zip
        is appended. Default: ``None`` (templated)
    """

    operator_extra_links = (SparkApplicationLink(), LakeTableLink())

    def __init__(
        self,
        *,
        batch: dict[str, Any],
        base_uri: str,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        partitions: int = 0,
        spark_conn_id: str = "spark_default",
        map_index_template: str | None = "{{ task.batch['label'] }}",
        lake_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [replica_alias()])  # each batch's event goes to its table's asset
        super().__init__(kind="snapshot", batch=batch, base_uri=base_uri, mysql_cdc_conn_id=mysql_cdc_conn_id,
                         partitions=partitions, spark_conn_id=spark_conn_id, map_index_template=map_index_template,
                         lake_conn_id=lake_conn_id, **kwargs)
        self._application_watch: SparkApplicationWatch | None = None  # the Spark application link, in execute

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the outcome goes to XCom
        # the engine and the lake (pyarrow, the source's drivers): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
        from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore

        job = Job.from_dict(self.batch)
        lake = self.open_lake()
        persist_lake_link(context, lake, job.tables)
        config = self.prepare(job, lake, [], "snapshot")
        self._application_watch = SparkApplicationWatch(context, self.conf)
        try:
            self.run_job(context, config, lake)
        finally:
            self._application_watch.finished(self._hook)
        found = SnapshotStore(lake).read_manifests(job.batches)
        missing = [b.label for b, m in zip(job.batches, found, strict=True) if m is None]
        if missing:
            raise SnapshotJobError(
                f"the Spark job for {job.label} succeeded but no manifest of {', '.join(missing[:5])}"
                f"{f' and {len(missing) - 5} more batches' if len(missing) > 5 else ''} is committed under "
                f"{self.base_uri}: the Spark driver must write to the same lake as this task (a local base_uri "
                f"works with a local master only; use s3:// on a cluster); see the spark-submit log above"
            )
        manifests = [m for m in found if m is not None]
        # the job's driver has logged its rows, rows/s and Delta versions: no second line of them here
        tags = task_tags(context, self.task_id)
        for manifest in manifests:
            send_batch_metrics(manifest, tags)
        self._committed(context, lake, manifests)
        return job_outcome(job, manifests)

    def _get_hook(self) -> SparkSubmitHook:
        """The base class's hook, its ``spark-submit`` output followed for the Spark application link. The
        provider's private factory, which its ``execute`` calls and keeps the result of as ``_hook``: the
        only way to see the output (``tests/unit/test_spark_provider.py`` fails when that changes)."""
        hook = super()._get_hook()
        return self._application_watch.attach(hook) if self._application_watch is not None else hook

    def _committed(self, context: Any, lake: Lake, manifests: list[BatchManifest]) -> None:
        """The batches are in the lake: an asset event each (``assets.snapshot_event``), and their lineage."""
        # lineage reads the lake (pyarrow): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.operators.lineage import gather, snapshot_facts

        for manifest in manifests:
            snapshot_event(context, self.base_uri, manifest)
        self._lineage_facts = gather(snapshot_facts, self.mysql_cdc_conn_id, lake, manifests)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage:
        """OpenLineage (with the ``openlineage`` extra): the batches' source tables, and the current-state
        Delta tables they wrote with their rows and bytes (``operators.lineage``)."""
        # lineage reads the lake (pyarrow): when the task runs, not at DAG-parse time
        from airflow_provider_mysqlcdc.operators.lineage import operator_lineage

        return operator_lineage(getattr(self, "_lineage_facts", None))
