"""Where each replicated table's two Delta Lake tables live, and how delta-rs reaches them.

Per source table ``db.table`` under the base URI::

    <db>/<table>/current/     the current state: one row per key, deletes applied (``table_uri``),
                              partitioned by ``_batch``, the snapshot batch whose key range holds the row
    <db>/<table>/changelog/   every change the stream committed, append-only (``changelog_uri``)

Both are ordinary Delta tables written with ``deltalake`` (delta-rs), so Spark, DuckDB, Polars and
Trino read them with their own Delta readers. Partitioning the current state by snapshot batch is
what lets a re-run of one batch replace exactly its rows in one Delta transaction (an overwrite of
its partition), and lets a MERGE of changes rewrite only the partitions whose keys changed.

delta-rs takes the standard AWS variables for ``s3://`` (and needs ``AWS_ALLOW_HTTP=true`` for a
plain-http endpoint); Spark's ``s3a://`` is the same bucket to it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from airflow_provider_mysqlcdc.cdc.schema import TableId

if TYPE_CHECKING:
    from deltalake import DeltaTable

CURRENT = "current"
CHANGELOG = "changelog"
BATCH_COLUMN = "_batch"
"""The current state's partition column: the snapshot batch (of the table's plan) whose chunks hold the
row's key; 0 for a table captured without a snapshot."""

_SCHEME_ALIASES = {"s3a://": "s3://", "s3n://": "s3://"}


def _table_root(base_uri: str, table: TableId) -> str:
    if "://" not in base_uri:
        base_uri = os.path.abspath(base_uri)
    for alias, scheme in _SCHEME_ALIASES.items():
        if base_uri.startswith(alias):
            base_uri = scheme + base_uri[len(alias) :]
    return f"{base_uri.rstrip('/')}/{table.database}/{table.table}"


def table_uri(base_uri: str, table: str | TableId) -> str:
    """The URI of the table's current-state Delta table (``DeltaTable(table_uri(...))`` reads it)."""
    table = table if isinstance(table, TableId) else TableId.parse(table)
    return f"{_table_root(base_uri, table)}/{CURRENT}"


def changelog_uri(base_uri: str, table: str | TableId) -> str:
    """The URI of the table's changelog Delta table: the stream's changes with their metadata columns."""
    table = table if isinstance(table, TableId) else TableId.parse(table)
    return f"{_table_root(base_uri, table)}/{CHANGELOG}"


def open_delta(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri``, or None when none has been created there yet."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri):
        return None
    return DeltaTable(uri)


STREAM_SEQ_COLUMN = "_stream_seq"
"""The changelog's column naming the stream batch (checkpoint sequence number) that committed the row."""
STREAM_APP_ID = "airflow-provider-mysqlcdc-stream"
"""The application transaction id of the stream's changelog commits; its version is the batch's sequence
number, so a retried commit is recognised (``DeltaTable.transaction_version``) and never doubled."""
MERGE_APP_ID = "airflow-provider-mysqlcdc-merge"
"""The application transaction id of the MERGE commits into the current state; its version is the last
stream sequence number merged, so a reader applies only later changelog rows on top."""
