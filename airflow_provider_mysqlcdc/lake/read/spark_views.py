"""The replica as Spark temporary views, for tables too big to read into one process.

For each table two views (names with other characters than letters, digits and ``_`` get ``_``
there): ``<db>_<table>_changes`` (the committed changelog: current columns, metadata columns,
``_stream_seq``) and ``<db>_<table>`` (the current state: the current-state Delta table with the
changelog rows not merged yet applied on top, the last row per primary key in changelog order,
deleted keys dropped), the same data as ``read_changes`` / ``read_table``. With ``as_of`` (a binlog
offset) the table view is the table as of that offset, by ``lake.read.as_of_read``'s rule written as a window
over each key's rows.

They work on a Spark without the Delta Lake jars: the Parquet files each Delta table's log lists
(``TableVersion.files``, at the versions ``committed_table`` opened) are
read with Spark's own Parquet reader, merging the schemas of files written before an ``ADD
COLUMN``. Changelog files whose ``_stream_seq`` statistics lie outside the batches wanted are not
read. A session set up for Delta Lake (delta-spark's ``DeltaSparkSessionExtension`` in
``spark.sql.extensions``) reads each table with Delta's own reader instead, at the same version.

Spark sees the Delta-stored forms of the types Delta lacks (``delta_schema.stored_type``): UNSIGNED
integers as the next wider signed type (BIGINT UNSIGNED as DECIMAL(20,0)), TIME as microseconds (a
long), DECIMAL wider than 38 digits as its text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.changes import ChangeKind
from airflow_provider_mysqlcdc.cdc.offset.as_of import AsOf, AsOfValue
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.exceptions import AsOfError, TableNotSupportedError
from airflow_provider_mysqlcdc.lake.changelog import METADATA_FIELDS, lake_schema
from airflow_provider_mysqlcdc.lake.format.delta_schema import STREAM_SEQ_COLUMN, stored_schema
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read.as_of_read import coverage, order_bound
from airflow_provider_mysqlcdc.lake.read.committed import CommittedTable, committed_table

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.lake.format.table_format import TableVersion

METADATA = [f.name for f in METADATA_FIELDS]


def changelog_files(changelog: TableVersion, after: int, through: int) -> list[str]:
    """The changelog's files that may hold rows of stream batches ``after`` < seq <= ``through`` (a file
    without statistics of ``_stream_seq`` may)."""
    wanted = []
    for file in changelog.files():
        low, high = file.low.get(STREAM_SEQ_COLUMN), file.high.get(STREAM_SEQ_COLUMN)
        if low is None or high is None or (high > after and low <= through):
            wanted.append(file.uri)
    return wanted


def has_delta_reader(spark: Any) -> bool:
    """Whether the session is set up for Delta Lake (delta-spark's SQL extension), so reads Delta itself."""
    return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")


def _frame(spark: Any, lake: Lake, table: TableVersion, files: list[str], fields: pa.Schema) -> Any:
    """The Delta ``table`` (through ``files``, the part of its files wanted, without Delta's reader) as
    one DataFrame with at least ``fields`` (missing ones NULL), or an empty one."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
    from pyspark.sql.pandas.types import from_arrow_type

    stored = stored_schema(fields)
    if has_delta_reader(spark):
        frame = spark.read.format("delta").option("versionAsOf", table.version()).load(
            lake.spark_uri(table.uri))
    elif not files:
        return _empty(spark, stored)
    else:
        frame = spark.read.option("mergeSchema", "true").parquet(*[lake.spark_uri(f) for f in files])
    for f in stored:
        if f.name not in frame.columns:
            frame = frame.withColumn(f.name, F.lit(None).cast(from_arrow_type(f.type)))
    return frame


def _empty(spark: Any, stored: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_type

    return spark.createDataFrame([], ", ".join(f"`{f.name}` {from_arrow_type(f.type).simpleString()}" for f in stored))


def _columns(schema: TableSchema) -> list[str]:
    return [*schema.column_names, *METADATA]


def changes_frame(spark: Any, lake: Lake, committed: CommittedTable, after: int) -> Any:
    """The changelog rows of stream batches ``after`` < seq <= the checkpoint's, as Spark sees them."""
    from pyspark.sql import functions as F  # noqa: N812

    fields = pa.schema([*lake_schema(committed.schema), pa.field(STREAM_SEQ_COLUMN, pa.int64())])
    seq = F.col(STREAM_SEQ_COLUMN)
    if committed.changelog is None:
        frame = _empty(spark, stored_schema(fields))
    else:
        files = changelog_files(committed.changelog, after, committed.through)
        frame = _frame(spark, lake, committed.changelog, files, fields)
    frame = frame.where((seq > after) & (seq <= committed.through))
    return frame.select(*[F.col(f"`{c}`") for c in (*_columns(committed.schema), STREAM_SEQ_COLUMN)])


def current_frame(spark: Any, lake: Lake, committed: CommittedTable) -> Any:
    """The current state: the current table's rows and the unmerged changes, last row per key."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    schema, columns = committed.schema, _columns(committed.schema)
    changes = changes_frame(spark, lake, committed, committed.merged).select(*[F.col(f"`{c}`") for c in columns])
    rows = changes.withColumn("__source", F.lit(1))
    if committed.current is not None:
        files = [f.uri for f in committed.current.files()]
        current = _frame(spark, lake, committed.current, files, lake_schema(schema))
        current = current.select(*[F.col(f"`{c}`") for c in columns]).withColumn("__source", F.lit(0))
        rows = current.unionByName(rows)
    latest_first = Window.partitionBy(*[F.col(f"`{k}`") for k in schema.row_key]).orderBy(
        F.col("_binlog_file").desc(), F.col("_binlog_pos").desc(), F.col("_row_seq").desc(), F.col("__source").desc()
    )
    return (
        rows.withColumn("__rank", F.row_number().over(latest_first))
        .where((F.col("__rank") == 1) & F.col("_op").isin(*[k.value for k in ChangeKind.accumulations()]))
        .select(*[F.col(f"`{c}`") for c in schema.column_names])
    )


def as_of_frame(spark: Any, lake: Lake, committed: CommittedTable, offset: BinlogOffset) -> Any:
    """The table as of ``offset``, by ``lake.read.as_of_read``'s rule: per key, among the current table's row, the
    unmerged changes and the merged changes after ``offset``, the last row at or before it decides (kept if
    an accumulation), else the first row after it (kept, its before image, if a retraction)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    schema, columns = committed.schema, _columns(committed.schema)
    rows = (changes_frame(spark, lake, committed, -1)
            .withColumn("__merged", F.col(STREAM_SEQ_COLUMN) <= committed.merged)
            .select(*[F.col(f"`{c}`") for c in columns], "__merged").withColumn("__source", F.lit(1)))
    if committed.current is not None:
        files = [f.uri for f in committed.current.files()]
        current = _frame(spark, lake, committed.current, files, lake_schema(schema))
        rows = current.select(*[F.col(f"`{c}`") for c in columns]).withColumn("__merged", F.lit(False)) \
            .withColumn("__source", F.lit(0)).unionByName(rows)
    file, pos, seq = order_bound(offset)
    before = (F.col("_binlog_file") < file) | ((F.col("_binlog_file") == file) & (
        (F.col("_binlog_pos") < pos) | ((F.col("_binlog_pos") == pos) & (F.col("_row_seq") <= seq))))
    rows = rows.withColumn("__before", before).where(~(F.col("__merged") & F.col("__before")))

    def directed(column: str) -> Any:  # descending before the point (its last row first), ascending after it
        return F.when(F.col("__before"), F.col(column)).otherwise(-F.col(column)).desc()

    decisive = Window.partitionBy(*[F.col(f"`{k}`") for k in schema.row_key]).orderBy(
        F.col("__before").desc(), *[directed(c) for c in ("_binlog_file", "_binlog_pos", "_row_seq", "__source")])
    accumulation = F.col("_op").isin(*[k.value for k in ChangeKind.accumulations()])
    return (
        rows.withColumn("__rank", F.row_number().over(decisive))
        .where((F.col("__rank") == 1) & F.when(F.col("__before"), accumulation).otherwise(~accumulation))
        .select(*[F.col(f"`{c}`") for c in schema.column_names])
    )


def register_views(spark: Any, lake: Lake | str, tables: Sequence[str],
                   as_of: AsOfValue | None = None) -> dict[str, str]:
    """Create or replace both views of every table; returns ``{"db.table": view name}``. ``lake``: a ``Lake``
    handle, or the base URI (its Spark reads the files with Spark's own Hadoop settings). With ``as_of`` (a
    binlog offset: ``"file:pos"`` or a ``BinlogOffset``; see ``lake.read.as_of_read``), the table view is the table
    as of that offset (``AsOfError`` outside the lake's range); the changelog view is every committed change."""
    offset = None
    if as_of is not None:
        offset = AsOf.parse(as_of).offset
        if offset is None:
            raise AsOfError(f"the Spark views take as_of as a binlog offset, not {as_of!r}: turn a GTID position or a "
                            f"time into one with cdc.as_of.resolve_as_of")
    lake = Lake.of(lake)
    views: dict[str, str] = {}
    for table in tables:
        table_id = TableId.parse(table)
        committed = committed_table(lake, table_id)
        if committed.schema.keyless:  # the views pick the last row per key; a multiset has no key
            raise TableNotSupportedError(
                f"register_views has no view of {table_id}, a table without any key (a multiset of whole rows): read "
                f"its current Delta table {lake.table(table_id).current} with Spark's Delta reader instead (exact "
                f"once the stream has merged; one row per copy, leave out its _dup column), or use read_table")
        view = re.sub(r"\W", "_", f"{table_id.database}_{table_id.table}")  # a name Spark needs no quotes for
        changes_frame(spark, lake, committed, -1).createOrReplaceTempView(f"{view}_changes")
        if offset is None:
            current_frame(spark, lake, committed).createOrReplaceTempView(view)
        else:
            coverage(lake, table_id).check(offset)
            as_of_frame(spark, lake, committed, offset).createOrReplaceTempView(view)
        views[str(table_id)] = view
    return views
