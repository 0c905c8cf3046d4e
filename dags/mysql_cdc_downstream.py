"""A DAG scheduled on a replicated table: it runs when the replica of ``shop.orders`` has fresh data.

The table's asset (``replica_asset``) gets an event from every committed snapshot batch (emitted by
the snapshot task) and from every stream commit that wrote rows of the table (emitted by the asset's
watcher in the triggerer, so also while an ``@continuous`` stream never ends). Each event's extra
says what is new; a watcher's event keeps it under ``"payload"``:

- ``source``: ``snapshot`` or ``stream``; ``table``; ``rows``: rows written;
- ``offset`` (``binlog-file:position``) and ``gtid`` (when known): the source's position the replica
  has reached (a snapshot batch: its highest high watermark);
- ``seq``: a snapshot batch's version of the current-state Delta table; for the stream the last
  batch (``_stream_seq``) covered, from ``first_seq`` on.

This example reads the stream's new change rows of the table (``_stream_seq`` from ``first_seq`` to
``seq``). Copy it and change ``LAKE`` and ``TABLE`` (here from the environment, defaulting to the
example DAG's lake and one of its tables).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_mysqlcdc.assets import replica_asset

LAKE = os.environ.get("MYSQL_CDC_LAKE") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "mysql-cdc-lake")
TABLE = os.environ.get("MYSQL_CDC_DOWNSTREAM_TABLE", "shop.orders")
REPLICA = replica_asset(LAKE, TABLE, poll_interval=2.0)

with DAG(dag_id="mysql_cdc_downstream", schedule=[REPLICA], catchup=False, max_active_runs=1,
         tags=["mysql-cdc"]) as dag:

    @task
    def new_changes(triggering_asset_events: Any = None) -> dict[str, int]:
        """The change rows of the stream batches that triggered this run, counted by operation."""
        import pyarrow.compute as pc

        from airflow_provider_mysqlcdc.lake import read_changes

        extras = [event.extra.get("payload", event.extra) for event in triggering_asset_events[REPLICA]]
        for extra in extras:
            print(f"{extra['source']} commit of {extra['table']}: {extra['rows']} rows, seq {extra['seq']}, "
                  f"offset {extra['offset']} (gtid {extra['gtid']})")
        batches = [(e["first_seq"], e["seq"]) for e in extras if e["source"] == "stream"]
        if not batches:
            return {}
        changes = read_changes(LAKE, TABLE)
        seq = changes.column("_stream_seq")
        new = changes.filter(pc.and_(pc.greater_equal(seq, min(b[0] for b in batches)),
                                     pc.less_equal(seq, max(b[1] for b in batches))))
        counts = {str(op): int(n) for op, n in zip(*pc.value_counts(new.column("_op")).flatten(), strict=True)}
        print(f"new change rows of {TABLE} by operation: {counts}")
        return counts

    new_changes()
