"""The replicas as Airflow assets: URIs and their normalisation through Airflow's own provider registry,
the extras of snapshot and stream events from a lake written with the real writers, and the asset
watcher's trigger following stream commits."""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from pathlib import Path

import pytest
from airflow.sdk import DAG, Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_provider_mysqlcdc.assets import (
    REPLICA_ALIAS,
    convert_asset_to_openlineage,
    create_asset,
    parse_replica_uri,
    replica_asset,
    replica_uri,
    sanitize_uri,
    snapshot_event,
)
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.lake import table_uri
from airflow_provider_mysqlcdc.lake.changelog import changes_table
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.read import stream_commits
from airflow_provider_mysqlcdc.lake.read.stream_commits import stream_extra, stream_rows
from airflow_provider_mysqlcdc.operators.pipeline import mysql_cdc_pipeline
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.triggers.lake_commits import STATE_KEY, MySqlCdcCommitTrigger
from dev.dag_file import load_dag
from tests.lakes import ORDERS, SCHEMA, Lakes, committed_batch, delete, insert, off, transaction, update

# -- URIs -----------------------------------------------------------------------------------------------


def test_the_uri_names_the_lake_and_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert replica_uri("lake/", "shop.orders") == f"mysql-cdc+file:{tmp_path}/lake/shop/orders"
    assert replica_uri("s3a://bucket/lake", "shop.orders") == "mysql-cdc+s3://bucket/lake/shop/orders"
    assert replica_uri("s3://bucket/lake/", TableId("shop", "orders")) == "mysql-cdc+s3://bucket/lake/shop/orders"
    assert replica_uri("hdfs://nn:8020/lake", "shop.orders") == "mysql-cdc+hdfs://nn:8020/lake/shop/orders"
    for base_uri in (str(tmp_path / "lake"), "s3://bucket/lake", "gs://bucket/a/b"):
        assert parse_replica_uri(replica_uri(base_uri, "shop.orders")) == (base_uri, ORDERS)


def test_airflow_normalises_the_uri_with_the_providers_handler() -> None:
    """Through ``Asset`` itself: Airflow finds our handler in the provider info's ``asset-uris``."""
    canonical = "mysql-cdc+s3://bucket/lake/shop/orders"
    for written in ("mysql-cdc+s3a://bucket/lake//shop/orders/", "MYSQL-CDC+S3N://bucket/lake/shop/orders#x",
                    canonical):
        assert Asset(uri=written).uri == canonical
    assert Asset(uri="mysql-cdc+file://localhost/data/lake/shop/orders/").uri == "mysql-cdc+file:/data/lake/shop/orders"
    assert Asset(uri="mysql-cdc+gcs://bucket/lake/shop/orders").uri == "mysql-cdc+gs://bucket/lake/shop/orders"


@pytest.mark.parametrize(("uri", "says"), [
    ("mysql-cdc+s3://bucket/orders", "must end in the database and the table"),
    ("mysql-cdc+s3:///lake/shop/orders", "s3 needs the bucket"),
    ("mysql-cdc+file://host/lake/shop/orders", "a local lake has no host"),
    ("mysql-cdc+ftp://host/lake/shop/orders", "the scheme must be mysql-cdc+<lake scheme>"),
])
def test_a_uri_that_names_no_replica_is_refused_saying_what_it_must_be(uri: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as error:
        sanitize_uri(urllib.parse.urlsplit(uri))
    assert "e.g. mysql-cdc+s3://bucket/lake/shop/orders" in str(error.value) or "file:/" in str(error.value)
    if not uri.startswith("mysql-cdc+ftp"):  # a scheme of ours: Airflow refuses the asset itself
        with pytest.raises(ValueError, match=re.escape(says)):
            Asset(uri=uri)


def test_the_assets_name_is_its_uri_and_the_watcher_follows_that_table(tmp_path: Path) -> None:
    base_uri = str(tmp_path / "lake")
    asset = replica_asset(base_uri, "shop.orders", poll_interval=2.0)
    assert asset.name == asset.uri == replica_uri(base_uri, "shop.orders")
    written = Asset(asset.uri)  # what a user writes when given the URI: the same asset (name and URI)
    assert (written.name, written.uri) == (asset.name, asset.uri)
    (watcher,) = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_provider_mysqlcdc.triggers.lake_commits.MySqlCdcCommitTrigger"
    assert kwargs == {"base_uri": base_uri, "table": "shop.orders", "poll_interval": 2.0, "lake_conn_id": None}
    assert replica_asset(base_uri, "shop.orders", watch=False) == create_asset(base_uri=base_uri, table="shop.orders")
    assert create_asset(base_uri=base_uri, table="shop.orders").watchers == []


def test_openlineage_sees_the_replica_as_its_current_state_delta_table(tmp_path: Path) -> None:
    local = convert_asset_to_openlineage(create_asset(base_uri=str(tmp_path), table="shop.orders"), None)
    assert (local.namespace, local.name) == ("file", table_uri(str(tmp_path), "shop.orders"))
    s3 = convert_asset_to_openlineage(create_asset(base_uri="s3a://bucket/lake", table="shop.orders"), None)
    assert (s3.namespace, s3.name) == ("s3://bucket", "lake/shop/orders/current")


# -- snapshot events ------------------------------------------------------------------------------------


def test_a_snapshot_batch_emits_its_event_to_its_tables_asset_through_the_alias(lake: Lakes) -> None:
    high = BinlogOffset("mysql-bin.000002", 4711, "0-1-42", "mariadb")
    manifest = committed_batch(lake, [(1, "a", 1), (2, "b", 2), (3, "c", 3)], high)
    events = OutletEventAccessors()

    snapshot_event({"outlet_events": events}, lake.base_uri, manifest)

    (event,) = events[AssetAlias(REPLICA_ALIAS)].asset_alias_events
    assert event.dest_asset_key.uri == event.dest_asset_key.name == replica_uri(lake.base_uri, "shop.orders")
    assert event.extra == {"source": "snapshot", "table": "shop.orders", "batch": 0, "seq": manifest.delta_version,
                           "offset": "mysql-bin.000002:4711", "gtid": "0-1-42", "rows": 3}
    snapshot_event({}, lake.base_uri, manifest)  # execute() called directly: nothing to record, no error


# -- stream events --------------------------------------------------------------------------------------


def test_stream_events_carry_the_checkpoint_and_the_tables_rows_of_the_new_batches(lake: Lakes) -> None:
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", -1) == (-1, None)  # no stream yet
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)), insert((2, "b", 2)))))
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, *update((1, "a", 1), (1, "a", 5)))))
    lake.commit_stream(3, off(2, 90))  # past other traffic: no row of the table

    assert stream_rows(Lake.at(lake.base_uri), "shop.orders", 0, 3) == 4
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 1) == (3, {
        "source": "stream", "table": "shop.orders", "seq": 3, "first_seq": 2, "offset": "mysql-bin.000002:90",
        "gtid": None, "rows": 2,
    })
    # a watcher that started before the stream's first checkpoint: its batches from 1 (0 writes no rows)
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", -1)[1]["first_seq"] == 1  # type: ignore[index]
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 2) == (3, None)  # batch 3 wrote nothing of it
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 3) == (3, None)
    assert stream_extra(Lake.at(lake.base_uri), "shop.users", 0) == (3, None)  # a table the stream never wrote


def test_a_watcher_reads_the_history_only_of_tables_the_new_batches_wrote(
        lake: Lakes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole database watched table by table: a table the batches since the watcher's did not write
    (the checkpoint's ``touched``) has no event, its changelog not opened. From a checkpoint upgraded
    from format 3 (which did not record them), every table is taken as written by its last batch."""
    items = TableSchema(TableId("shop", "items"), SCHEMA.columns, SCHEMA.primary_key)
    both = Checkpoint(seq=1, offset=off(1, 700), schemas={ORDERS: SCHEMA, items.id: items})
    lake.stream.commit(both, {ORDERS: [changes_table(transaction(1, 600, insert((1, "a", 1))), SCHEMA)],
                              items.id: [changes_table(transaction(1, 600, insert((7, "i", 1))), items)]})
    both.advance(2, off(1, 800))
    lake.stream.commit(both, {ORDERS: [changes_table(transaction(1, 700, insert((2, "b", 2))), SCHEMA)]})
    read: list[str] = []
    counted = stream_commits.stream_rows
    monkeypatch.setattr(stream_commits, "stream_rows",
                        lambda lake_, table, *seqs: read.append(str(table)) or counted(lake_, table, *seqs))

    assert stream_extra(Lake.at(lake.base_uri), "shop.items", 1) == (2, None)
    assert read == []  # batch 2 wrote orders only: the items changelog not opened
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 1)[1]["rows"] == 1  # type: ignore[index]
    assert stream_extra(Lake.at(lake.base_uri), "shop.items", 0)[1]["rows"] == 1  # type: ignore[index]
    assert read == ["shop.orders", "shop.items"]

    # the same lake as format 3 left it: which batch wrote which table is not known before its seq
    document = Lake.at(lake.base_uri).read_json(Lake.at(lake.base_uri).checkpoint)
    document.update(format_version=3, schemas={"shop.orders": SCHEMA.to_dict(), "shop.items": items.to_dict()})
    del document["touched"], document["merged_seq"]
    Lake.at(lake.base_uri).write_json(Lake.at(lake.base_uri).checkpoint, document)
    assert stream_extra(Lake.at(lake.base_uri), "shop.items", 0)[1]["rows"] == 1  # type: ignore[index]
    assert stream_extra(Lake.at(lake.base_uri), "shop.items", 1) == (2, None)  # counted from the history: no row
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 1)[1]["rows"] == 1  # type: ignore[index]
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 2) == (2, None)


def test_a_killed_runs_batch_counts_once_and_only_once_its_checkpoint_is_written(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    lake.killed_stream(2, off(1, 900), (SCHEMA, transaction(1, 700, insert((2, "b", 2)), insert((3, "c", 3)))))
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 1) == (1, None)  # past the checkpoint: not final
    checkpoint = lake.stream.read_checkpoint()
    assert checkpoint is not None and lake.stream.remove_uncommitted(checkpoint) == 2
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, delete((1, "a", 1)))))

    seq, extra = stream_extra(Lake.at(lake.base_uri), "shop.orders", 1)
    assert seq == 2 and extra is not None and extra["rows"] == 1  # the rerun's batch, not the killed one's


def test_rows_are_counted_over_many_batches_from_the_delta_log(lake: Lakes) -> None:
    for seq in range(1, 31):
        lake.commit_stream(seq, off(1, 100 * seq), (SCHEMA, transaction(1, 100 * seq - 50, insert((seq, "x", seq)))))
    assert stream_rows(Lake.at(lake.base_uri), "shop.orders", 0, 30) == 30
    assert stream_rows(Lake.at(lake.base_uri), "shop.orders", 5, 7) == 2
    assert stream_rows(Lake.at(lake.base_uri), "shop.orders", 7, 7) == 0


def test_the_watchers_trigger_fires_once_per_new_commit_and_not_for_the_past(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    trigger = MySqlCdcCommitTrigger(base_uri=lake.base_uri, table="shop.orders", poll_interval=0.05)

    async def follow() -> list[dict[str, object]]:
        events = trigger.run().__aiter__()
        first = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.5)  # it started at batch 1, which it does not report
        assert not first.done()
        await asyncio.to_thread(lake.commit_stream, 2, off(1, 800),
                                (SCHEMA, transaction(1, 700, insert((2, "b", 2)), insert((3, "c", 3)))))
        payloads = [(await asyncio.wait_for(first, 10)).payload]
        await asyncio.to_thread(lake.commit_stream, 3, off(1, 850))  # no row of the table: no event
        await asyncio.to_thread(lake.commit_stream, 4, off(1, 900), (SCHEMA, transaction(1, 860, insert((4, "d", 4)))))
        payloads.append((await asyncio.wait_for(events.__anext__(), 10)).payload)
        await events.aclose()  # type: ignore[attr-defined]
        return payloads

    assert asyncio.run(follow()) == [
        {"source": "stream", "table": "shop.orders", "seq": 2, "first_seq": 2, "offset": "mysql-bin.000001:800",
         "gtid": None, "rows": 2},
        {"source": "stream", "table": "shop.orders", "seq": 4, "first_seq": 3, "offset": "mysql-bin.000001:900",
         "gtid": None, "rows": 1},
    ]


def test_a_lake_begun_anew_is_followed_from_its_new_sequence(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 9) == (1, None)  # a stored seq 9 from the old lake
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, insert((2, "b", 2)))))
    assert stream_extra(Lake.at(lake.base_uri), "shop.orders", 1)[1] is not None  # from 1 on, as the trigger continues


# -- the DAGs --------------------------------------------------------------------------------------------


def test_the_downstream_example_is_scheduled_on_the_watched_replica(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYSQL_CDC_LAKE", str(tmp_path / "lake"))
    monkeypatch.setenv("MYSQL_CDC_DOWNSTREAM_TABLE", "shop.customers")
    dag = load_dag("mysql_cdc_downstream")
    (asset,) = dag.timetable.asset_condition.objects
    assert asset.uri == asset.name == replica_uri(str(tmp_path / "lake"), "shop.customers")
    (watcher,) = asset.watchers
    assert watcher.trigger.serialize()[1]["table"] == "shop.customers"


def test_the_snapshot_tasks_declare_the_alias_so_the_ui_shows_the_assets() -> None:
    alias = AssetAlias(REPLICA_ALIAS)
    example = load_dag("mysql_cdc_example")
    assert example.task_dict["snapshot"].partial_kwargs["outlets"] == [alias]
    with DAG(dag_id="pipeline", schedule=None) as dag:
        mysql_cdc_pipeline(tables=["shop.orders"], base_uri="/lake")
    assert dag.task_dict["mysql_cdc.snapshot"].partial_kwargs["outlets"] == [alias]
    operator = MySqlSnapshotSparkOperator(task_id="s", batch={}, base_uri="/lake")  # unmapped: the default
    assert operator.outlets == [alias]


class MemoryStateStore:
    """Airflow's asset state store as the triggerer hands it to a watcher's trigger (``aget``/``aset``),
    kept in memory: what a restarted triggerer finds of the trigger's previous life."""

    def __init__(self, **values: object) -> None:
        self.values = dict(values)

    async def aget(self, key: str, default: object = None) -> object:
        return self.values.get(key, default)

    async def aset(self, key: str, value: object) -> None:
        self.values[key] = value


def test_a_restarted_watcher_reports_the_commits_made_while_it_was_away(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, insert((2, "b", 2)))))
    lake.commit_stream(3, off(1, 900), (SCHEMA, transaction(1, 800, insert((3, "c", 3)))))
    store = MemoryStateStore(**{STATE_KEY: 1})  # it had reported batch 1 before the triggerer stopped
    trigger = MySqlCdcCommitTrigger(base_uri=lake.base_uri, table="shop.orders", poll_interval=0.05)
    trigger.asset_state_store = store  # type: ignore[assignment]  # what the triggerer injects

    async def first() -> dict[str, object]:
        events = trigger.run().__aiter__()
        payload = (await asyncio.wait_for(events.__anext__(), 10)).payload
        polling = asyncio.ensure_future(events.__anext__())  # it stores the batch, then polls for more
        await asyncio.sleep(0.3)
        assert not polling.done()  # nothing new: no event
        polling.cancel()
        return payload

    payload = asyncio.run(first())
    assert (payload["first_seq"], payload["seq"], payload["rows"]) == (2, 3, 2)
    assert store.values[STATE_KEY] == 3
