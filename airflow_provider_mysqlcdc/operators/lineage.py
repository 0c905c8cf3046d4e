"""OpenLineage for the three operators: which source tables they read, which lake tables they wrote.

The ``openlineage`` provider (an optional extra of this package) calls each operator's
``get_openlineage_facets_on_complete`` after a successful run; the operators delegate here. Nothing of
OpenLineage is imported before that call, so without the provider nothing changes.

The facts are gathered while the task runs (``*_facts``: plain data, only where the provider is
installed and configured to emit) and only turned into OpenLineage objects in that call
(``operator_lineage``), because the provider makes the call in a forked child of the task process by
default, and delta-rs refuses to run in a fork of a process that used it (the stream has): its
runtime panics ("Forked process detected"), a ``BaseException`` that ends the child without an event.
So the call reads nothing.

Names follow OpenLineage's naming spec: a source table is namespace ``mysql://host:port`` and name
``db.table`` (MariaDB too: the wire protocol and the naming are MySQL's), with a schema facet of its
MySQL column types; a lake table is the Delta table's location (``file`` and its absolute path, or
``s3://bucket`` and the key prefix, ``assets.openlineage_location``), with a schema facet of its
Delta columns (the source's columns as stored, then the metadata columns) and the rows and bytes
the run wrote to it (``outputStatistics``).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from airflow_provider_mysqlcdc.assets import openlineage_location
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysqlcdc.lake.documents.snapshot import SnapshotStore
from airflow_provider_mysqlcdc.lake.parallel import READ_THREADS, each
from airflow_provider_mysqlcdc.lake.read.stream_commits import stream_rows
from airflow_provider_mysqlcdc.lake.write.stream_commit import StreamStore

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_mysqlcdc.engine.options.stream_options import StreamSummary
    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest
    from airflow_provider_mysqlcdc.lake.format.table_format import ReplicaTable
    from airflow_provider_mysqlcdc.lake.handle import Lake

    Lineage: TypeAlias = OperatorLineage[Any, Any]
    """What ``get_openlineage_facets_on_complete`` returns."""


@dataclass(frozen=True)
class DatasetFacts:
    """A dataset as OpenLineage names it, its columns (name, type), and for an output what the run wrote."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str], ...] = ()
    rows: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class LineageFacts:
    inputs: tuple[DatasetFacts, ...] = ()
    outputs: tuple[DatasetFacts, ...] = ()


_log = logging.getLogger(__name__)


def lineage_emitted() -> bool:
    """Whether the ``openlineage`` provider is installed and emits (it is disabled without a transport)."""
    if importlib.util.find_spec("airflow.providers.openlineage") is None:
        return False
    # OpenLineage: only with the openlineage extra, when its provider calls
    from airflow.providers.openlineage.conf import is_disabled

    return not is_disabled()


def gather(facts: Callable[..., LineageFacts], *args: Any) -> LineageFacts | None:
    """``facts(*args)`` where OpenLineage is emitted (else nobody asks: None, and the lake is not read).
    Lineage is a side channel: an error reading the lake for it is logged and never fails the task."""
    if not lineage_emitted():
        return None
    try:
        return facts(*args)
    except Exception:
        _log.warning("could not gather the OpenLineage facts of this task", exc_info=True)
        return None


def source_namespace(mysql_cdc_conn_id: str) -> str:
    """``mysql://host:port`` of the connection's server (read from the connection, not the network)."""
    config = MySqlCdcHook(mysql_cdc_conn_id).get_config()
    return f"mysql://{config.host}:{config.port}"


def source_facts(namespace: str, schema: TableSchema) -> DatasetFacts:
    """A source table with its columns and their MySQL types (``int(11)``, ``varchar(40)``, ...)."""
    return DatasetFacts(namespace, str(schema.id), tuple((c.name, c.column_type) for c in schema.columns))


def lake_facts(location: ReplicaTable, rows: int | None = None, size: int | None = None) -> DatasetFacts:
    """A Delta table of the lake with its columns as stored (none before it exists) and what the run wrote."""
    namespace, name = openlineage_location(location.uri)
    table = location.open(from_log=True)  # the schema alone: its log's state where it can (a whole database's tables)
    stored = table.schema() if table is not None else pa.schema([])
    return DatasetFacts(namespace, name, tuple((f.name, str(f.type)) for f in stored), rows, size)


def split_facts(mysql_cdc_conn_id: str, lake: Lake, tables: Iterable[TableId]) -> LineageFacts:
    """The split reads the tables it planned (their keys and sizes), with the columns of their plans in
    the lake; it writes no data."""
    plans = [plan for plan in SnapshotStore(lake).read_plans(list(tables)).values() if plan is not None]
    if not plans:
        return LineageFacts()
    namespace = source_namespace(mysql_cdc_conn_id)
    return LineageFacts(inputs=tuple(source_facts(namespace, p.schema) for p in plans))


def snapshot_facts(mysql_cdc_conn_id: str, lake: Lake, manifests: Sequence[BatchManifest]) -> LineageFacts:
    """A snapshot task's batches read their tables and write their rows into each table's current-state Delta
    table (one dataset a table, the rows and bytes of its batches summed)."""
    namespace = source_namespace(mysql_cdc_conn_id)
    by_table: dict[TableId, list[BatchManifest]] = {}
    for manifest in manifests:
        by_table.setdefault(manifest.batch.table, []).append(manifest)
    return LineageFacts(
        inputs=tuple(source_facts(namespace, done[-1].schema) for done in by_table.values()),
        outputs=tuple(lake_facts(lake.table(table).current, sum(m.rows for m in done), sum(m.bytes for m in done))
                      for table, done in by_table.items()),
    )


def stream_facts(mysql_cdc_conn_id: str, lake: Lake, summary: StreamSummary) -> LineageFacts:
    """The stream reads the binlog of its captured tables and writes each table's changelog, and by MERGE
    its current state; a changelog's ``rows`` are those this task's batches appended to it (the
    summary's ``seq_before`` up to its ``seq``, counted from the Delta log; 0 without reading it for a
    table the checkpoint says none of them wrote, ``Checkpoint.wrote_after``). A whole database's tables are
    read several at once (``lake.parallel``): an object store's round trips overlap. On a local lake each
    changelog is read from its log alone (``lake_facts`` its schema from its state, ``stream_rows`` its newest
    entries' commit information): 1,000 tables all written took 1.1-1.2 s, against 1.6-2.2 s loading each with
    delta-rs (a scratch run)."""
    checkpoint = StreamStore(lake).read_checkpoint(shared=True)
    if checkpoint is None:
        return LineageFacts()
    namespace = source_namespace(mysql_cdc_conn_id)
    tables = sorted(checkpoint.schemas, key=str)

    def changelog_and_current(table: TableId) -> tuple[DatasetFacts, DatasetFacts]:
        wrote = checkpoint.wrote_after(table, summary.seq_before)
        rows = stream_rows(lake, table, summary.seq_before, summary.seq) if wrote else 0
        return lake_facts(lake.table(table).changelog, rows), lake_facts(lake.table(table).current)

    pairs = each(changelog_and_current, tables, READ_THREADS, "lineage-read")
    return LineageFacts(inputs=tuple(source_facts(namespace, checkpoint.schemas[t]) for t in tables),
                        outputs=tuple(facts for pair in pairs for facts in pair))


def operator_lineage(facts: LineageFacts | None) -> Lineage:
    """The OpenLineage objects of gathered facts (none: the task wrote nothing, e.g. it never committed)."""
    # OpenLineage: only with the openlineage extra, when its provider calls
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    def schema(dataset: DatasetFacts) -> dict[str, Any]:
        if not dataset.fields:
            return {}
        return {"schema": SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=n, type=t)
                                                     for n, t in dataset.fields])}

    def statistics(dataset: DatasetFacts) -> dict[str, Any]:
        if dataset.rows is None:
            return {}
        return {"outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=dataset.rows, size=dataset.size)}

    if facts is None:
        return OperatorLineage()
    return OperatorLineage(
        inputs=[InputDataset(namespace=d.namespace, name=d.name, facets=schema(d)) for d in facts.inputs],
        outputs=[OutputDataset(namespace=d.namespace, name=d.name, facets=schema(d), outputFacets=statistics(d))
                 for d in facts.outputs],
    )
