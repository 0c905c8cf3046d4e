"""The snapshot's metrics through Airflow's ``Stats``, sent once per batch from its manifest.

The Spark job reads and commits the batch; the snapshot task only learns what happened from the
committed manifest (rows and chunks, and the seconds the job spent reading, without Spark's start).
So the metrics are sent when the job has returned, from that manifest, with no per-row work. Names
and tags follow the stream's (``stream_metrics``): ``dag_id`` and ``task_id`` of the task instance,
and here ``table`` on every metric, since one batch belongs to one table. docs/metrics.md lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from airflow.sdk.observability import stats

from airflow_provider_mysqlcdc.operators.stream_metrics import tag_value

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest

_log = logging.getLogger(__name__)

PREFIX = "mysql_cdc.snapshot."
BATCHES = PREFIX + "batches"
ROWS = PREFIX + "rows"
CHUNKS = PREFIX + "chunks"
BATCH_ROWS = PREFIX + "batch_rows"
ROWS_PER_SECOND = PREFIX + "rows_per_second"
DURATION = PREFIX + "duration"


def send_batch_metrics(manifest: BatchManifest, tags: Mapping[str, str]) -> None:
    """The committed batch's metrics; a failing metrics backend is logged, never fails the task."""
    tagged = {**tags, "table": tag_value(manifest.batch.table)}
    try:
        stats.incr(BATCHES, tags=tagged)
        stats.incr(ROWS, manifest.rows, tags=tagged)
        stats.incr(CHUNKS, len(manifest.chunks), tags=tagged)
        stats.gauge(BATCH_ROWS, manifest.rows, tags=tagged)
        if manifest.rows_per_second is not None:
            stats.gauge(ROWS_PER_SECOND, manifest.rows_per_second, tags=tagged)
        stats.timing(DURATION, manifest.seconds * 1000.0, tags=tagged)
    except Exception:
        _log.warning("could not send snapshot metrics", exc_info=True)
