"""OpenLineage for the three operators: which source tables they read, which lake tables they wrote.

The ``openlineage`` provider (an optional extra of this package) calls each operator's
``get_openlineage_facets_on_complete`` after a successful run; the operators delegate here. Nothing of
OpenLineage is imported before that call, so without the provider nothing changes.

Names follow OpenLineage's naming spec: a source table is namespace ``mysql://host:port`` and name
``db.table`` (MariaDB too: the wire protocol and the naming are MySQL's), with a schema facet of its
MySQL column types; a lake table is the Delta table's location (``file`` and its absolute path, or
``s3://bucket`` and the key prefix, ``assets.openlineage_location``), with a schema facet of its
Delta columns (the source's columns as stored, then the metadata columns) and the rows and bytes
the run wrote to it (``outputStatistics``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from airflow_provider_mysqlcdc.assets import openlineage_location, stream_rows
from airflow_provider_mysqlcdc.cdc.schema import TableId, TableSchema

if TYPE_CHECKING:
    from airflow.providers.common.compat.openlineage.facet import InputDataset, OutputDataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_mysqlcdc.lake.snapshot import BatchManifest

    Lineage: TypeAlias = OperatorLineage[Any, Any]
    """What ``get_openlineage_facets_on_complete`` returns."""


def source_namespace(mysql_cdc_conn_id: str) -> str:
    """``mysql://host:port`` of the connection's server (read from the connection, not the network)."""
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

    config = MySqlCdcHook(mysql_cdc_conn_id).get_config()
    return f"mysql://{config.host}:{config.port}"


def source_dataset(namespace: str, schema: TableSchema) -> InputDataset:
    """A source table with its columns and their MySQL types (``int(11)``, ``varchar(40)``, ...)."""
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )

    fields = [SchemaDatasetFacetFields(name=c.name, type=c.column_type) for c in schema.columns]
    return InputDataset(namespace=namespace, name=str(schema.id), facets={"schema": SchemaDatasetFacet(fields=fields)})


def lake_dataset(delta_uri: str, rows: int | None = None, size: int | None = None) -> OutputDataset:
    """A Delta table of the lake, with its schema as stored (when it exists) and what the run wrote."""
    import pyarrow as pa
    from airflow.providers.common.compat.openlineage.facet import (
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )

    from airflow_provider_mysqlcdc.lake.delta import open_delta

    namespace, name = openlineage_location(delta_uri)
    facets: dict[str, Any] = {}
    if (table := open_delta(delta_uri)) is not None:
        stored = pa.schema(table.schema().to_arrow())
        facets["schema"] = SchemaDatasetFacet(
            fields=[SchemaDatasetFacetFields(name=f.name, type=str(f.type)) for f in stored]
        )
    output_facets: dict[str, Any] = {}
    if rows is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(rowCount=rows, size=size)
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets)


def split_lineage(mysql_cdc_conn_id: str, base_uri: str, tables: Iterable[TableId]) -> Lineage:
    """The split reads the tables it planned (their keys and sizes), with the columns of their plans in
    the lake; it writes no data."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_mysqlcdc.lake.snapshot import SnapshotStore

    plans = [plan for t in tables if (plan := SnapshotStore(base_uri).read_plan(t)) is not None]
    if not plans:
        return OperatorLineage()
    namespace = source_namespace(mysql_cdc_conn_id)
    return OperatorLineage(inputs=[source_dataset(namespace, p.schema) for p in plans])


def snapshot_lineage(mysql_cdc_conn_id: str, base_uri: str, manifest: BatchManifest | None) -> Lineage:
    """A snapshot batch reads its table and writes its rows into the table's current-state Delta table."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_mysqlcdc.lake.delta import table_uri

    if manifest is None:  # the task did not get as far as a commit
        return OperatorLineage()
    output = lake_dataset(table_uri(base_uri, manifest.batch.table), manifest.rows, manifest.bytes)
    return OperatorLineage(inputs=[source_dataset(source_namespace(mysql_cdc_conn_id), manifest.schema)],
                           outputs=[output])


def stream_lineage(mysql_cdc_conn_id: str, base_uri: str, summary: dict[str, Any] | None) -> Lineage:
    """The stream reads the binlog of its captured tables and writes each table's changelog, and by MERGE
    its current state; ``rowCount`` of a changelog is the rows this task's batches appended to it
    (the checkpoint's ``seq`` less ``batches`` up to ``seq``, counted from the Delta log)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_mysqlcdc.lake.delta import changelog_uri, table_uri
    from airflow_provider_mysqlcdc.lake.stream_store import StreamStore

    checkpoint = StreamStore(base_uri).read_checkpoint()
    if summary is None or checkpoint is None:  # startup_mode 'snapshot': no stream ran
        return OperatorLineage()
    namespace = source_namespace(mysql_cdc_conn_id)
    last, first = int(summary["seq"]), int(summary["seq"]) - int(summary["batches"])
    tables: list[TableId] = sorted(checkpoint.schemas, key=str)
    return OperatorLineage(
        inputs=[source_dataset(namespace, checkpoint.schemas[t]) for t in tables],
        outputs=[
            dataset
            for t in tables
            for dataset in (lake_dataset(changelog_uri(base_uri, t), stream_rows(base_uri, t, first, last)),
                            lake_dataset(table_uri(base_uri, t)))
        ],
    )
