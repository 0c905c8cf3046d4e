"""Each replicated table is an Airflow asset, so that downstream DAGs can be scheduled on fresh data.

The URI names the replica, not the source: ``mysql-cdc+<lake scheme>://<lake>/<db>/<table>``, e.g.
``mysql-cdc+file:/data/lake/shop/orders`` or ``mysql-cdc+s3://bucket/lake/shop/orders`` for the lake
``base_uri`` and the table ``shop.orders``. Why the lake and not ``mysql://host:port/db/table``:

- it is what a downstream user knows and reads: ``read_table(base_uri, "shop.orders")`` takes the same
  two things, and the DAG that writes the lake names the same ``base_uri``;
- it stays stable where the source does not: after a failover the connection names another host, yet
  the replica (and every schedule on it) is the same; two lakes of one source are two assets;
- an operator knows it without I/O: the source's host is in a connection, read only when a task runs.

Normalisation (``sanitize_uri``, registered per scheme in the provider info's ``asset-uris``) makes
one replica one URI: Spark's ``s3a://``/``s3n://`` are the same bucket as ``s3://``, a local lake is
an absolute path without host, and the path must end in a database and a table. ``replica_asset``
builds the asset from ``base_uri`` and ``db.table`` (relative lake paths made absolute, as the lake
itself does) and can attach an ``AssetWatcher`` (``triggers.lake_commits``) that fires on every
stream commit of the table while the stream runs; snapshot batches emit their events from their
tasks (``snapshot_event``). OpenLineage sees the asset as the table's current-state Delta table.

An Airflow asset is identified by its name and URI together, and ``Asset("<uri>")`` takes the text
as given for the name: write the URI in the form ``replica_uri`` gives (a local lake as
``mysql-cdc+file:/path``, which is how Python writes an empty host for a scheme it does not know),
or better build the asset with ``replica_asset``, as the producing tasks do.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake import handle
from airflow_provider_mysqlcdc.lake.handle import Lake, canonical_scheme

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset, AssetAlias

    from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest

SCHEME_PREFIX = "mysql-cdc+"
LAKE_SCHEMES = handle.SCHEMES
"""The lake URI schemes (``lake.handle.SCHEMES``) an asset URI can carry after ``mysql-cdc+``."""
SCHEMES = tuple(SCHEME_PREFIX + s for s in LAKE_SCHEMES)

REPLICA_ALIAS = "mysql-cdc-replicas"
"""The asset alias the snapshot tasks declare as outlet: their table is known only when they run (it
comes from the split task's XCom), so they attach each event to the table's asset through the alias."""


def replica_uri(base_uri: str, table: str | TableId) -> str:
    """The asset URI of ``table`` (``db.table``) replicated into the lake ``base_uri``: its folder in the lake
    (``LakeTable.folder``: a local lake's absolute path, a URI's scheme in its one name) under ``mysql-cdc+``."""
    folder = Lake.at(base_uri).table(table).folder
    if "://" not in folder:
        return urllib.parse.urlunsplit((SCHEME_PREFIX + "file", "", folder, "", ""))
    parsed = urllib.parse.urlsplit(folder)
    return urllib.parse.urlunsplit((SCHEME_PREFIX + parsed.scheme, parsed.netloc, parsed.path, "", ""))


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's normaliser of ``mysql-cdc+*`` asset URIs (after its own: lower-case scheme, no trailing
    slash, no fragment); a URI that names no replica is refused with what it must look like."""
    scheme = uri.scheme.lower()
    lake_scheme = canonical_scheme(scheme.removeprefix(SCHEME_PREFIX))
    example = f"{SCHEME_PREFIX}s3://bucket/lake/shop/orders or {SCHEME_PREFIX}file:/data/lake/shop/orders"
    if not scheme.startswith(SCHEME_PREFIX) or lake_scheme not in LAKE_SCHEMES:
        raise ValueError(f"asset URI {urllib.parse.urlunsplit(uri)!r}: the scheme must be {SCHEME_PREFIX}<lake "
                         f"scheme> with one of {', '.join(LAKE_SCHEMES)}, e.g. {example}")
    if lake_scheme == "file" and uri.netloc not in ("", "localhost"):
        raise ValueError(f"asset URI {urllib.parse.urlunsplit(uri)!r}: a local lake has no host; write "
                         f"{SCHEME_PREFIX}file:/<absolute path of the lake>/<db>/<table>")
    if lake_scheme != "file" and not uri.netloc:
        raise ValueError(f"asset URI {urllib.parse.urlunsplit(uri)!r}: {lake_scheme} needs the bucket or host "
                         f"after '//', e.g. {example}")
    segments = [s for s in uri.path.split("/") if s]
    if len(segments) < 2:
        raise ValueError(f"asset URI {urllib.parse.urlunsplit(uri)!r}: the path must end in the database and the "
                         f"table of the replica (<lake path>/<db>/<table>), e.g. {example}")
    netloc = "" if lake_scheme == "file" else uri.netloc
    return uri._replace(scheme=SCHEME_PREFIX + lake_scheme, netloc=netloc, path="/" + "/".join(segments),
                        query="")


def parse_replica_uri(uri: str) -> tuple[str, TableId]:
    """(lake base URI, table) of a replica's asset URI: the inverse of ``replica_uri``."""
    parsed = sanitize_uri(urllib.parse.urlsplit(uri))
    *lake, database, table = parsed.path.split("/")
    scheme = parsed.scheme.removeprefix(SCHEME_PREFIX)
    lake_path = "/".join(lake) or "/"
    base_uri = lake_path if scheme == "file" else urllib.parse.urlunsplit((scheme, parsed.netloc, lake_path, "", ""))
    return base_uri, TableId(database, table)


def create_asset(*, base_uri: str, table: str, extra: dict[str, Any] | None = None) -> Asset:
    """The provider info's asset ``factory``: the replica's asset, named by its URI."""
    from airflow.sdk import Asset  # 2.5 s: not when Airflow reads the provider info (``get_provider_info``)

    uri = replica_uri(base_uri, table)
    return Asset(name=uri, uri=uri, extra=extra or {})


def replica_asset(base_uri: str, table: str, *, watch: bool = True, poll_interval: float = 5.0,
                  lake_conn_id: str | None = None) -> Asset:
    """The asset of ``table`` replicated into ``base_uri``, for ``schedule=[...]`` of a downstream DAG.

    With ``watch`` (the default) it carries an ``AssetWatcher``: a trigger in the triggerer that polls the
    lake's stream checkpoint every ``poll_interval`` seconds and emits an asset event for each stream
    commit that wrote rows of the table (``triggers.lake_commits.MySqlCdcCommitTrigger``), so that a
    stream that never ends still schedules the DAG. Snapshot batches emit their events from their tasks
    either way. ``watch=False`` gives the bare asset (e.g. as a task's inlet). ``lake_conn_id``: the
    watcher's lake credentials, as the operators' (None: the triggerer's environment). Each watched asset a
    DAG is scheduled on holds one of the triggerer's ``[triggerer] capacity`` slots (default 1,000) while that
    DAG is active: a whole database watched table by table needs more (docs/production.md, *Triggerer*)."""
    # Airflow's SDK and triggers: not when Airflow reads the provider info (``get_provider_info``)
    from airflow.sdk import Asset, AssetWatcher

    from airflow_provider_mysqlcdc.triggers.lake_commits import MySqlCdcCommitTrigger

    asset = create_asset(base_uri=base_uri, table=table)
    if not watch:
        return asset
    trigger = MySqlCdcCommitTrigger(base_uri=base_uri, table=table, poll_interval=poll_interval,
                                    lake_conn_id=lake_conn_id)
    return Asset(name=asset.name, uri=asset.uri, watchers=[AssetWatcher(name=f"stream commits of {asset.uri}",
                                                                        trigger=trigger)])


def replica_alias() -> AssetAlias:
    from airflow.sdk import AssetAlias  # not when Airflow reads the provider info

    return AssetAlias(REPLICA_ALIAS)


def snapshot_extra(manifest: BatchManifest) -> dict[str, Any]:
    """The asset event extra of a committed snapshot batch: ``seq`` is the current-state Delta table's
    version that the batch's commit made, ``offset``/``gtid`` the batch's highest high watermark (its
    rows are the source's as of there), ``rows`` the rows it wrote."""
    from airflow_provider_mysqlcdc.lake.read.stream_commits import offset_extra  # pyarrow: not for the provider info

    return {"source": "snapshot", "table": str(manifest.batch.table), "batch": manifest.batch.number,
            "seq": manifest.delta_version, **offset_extra(manifest.high_watermark), "rows": manifest.rows}


def snapshot_event(context: Any, base_uri: str, manifest: BatchManifest) -> None:
    """Attach the batch's event to its table's asset through ``REPLICA_ALIAS``. Airflow records it when the
    task succeeds, if the task declares the alias as an outlet (the snapshot operator does by default);
    a context without ``outlet_events`` (``execute()`` called directly) records nothing."""
    events = context.get("outlet_events") if context else None
    if events is None:
        return
    asset = create_asset(base_uri=base_uri, table=str(manifest.batch.table))
    events[replica_alias()].add(asset, extra=snapshot_extra(manifest))


def openlineage_location(delta_uri: str) -> tuple[str, str]:
    """(namespace, name) of a Delta table of the lake by OpenLineage's naming spec: ``file`` and the
    absolute path for a local table; ``s3://bucket`` (``gs://bucket``, ``hdfs://namenode:port``,
    ``abfss://container@account...``) and the path inside it, without the leading slash for buckets."""
    if "://" not in delta_uri:
        return "file", os.path.abspath(delta_uri)
    parsed = urllib.parse.urlsplit(delta_uri)
    scheme = canonical_scheme(parsed.scheme)
    if scheme == "file":
        return "file", parsed.path
    if scheme == "hdfs":
        return f"hdfs://{parsed.netloc}", parsed.path
    return f"{scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The provider info's ``to_openlineage_converter``: the replica as its current-state Delta table."""
    from airflow.providers.common.compat.openlineage.facet import Dataset  # only with the openlineage extra

    base_uri, table = parse_replica_uri(asset.uri)
    namespace, name = openlineage_location(Lake.at(base_uri).table(table).current.uri)
    return Dataset(namespace=namespace, name=name)
