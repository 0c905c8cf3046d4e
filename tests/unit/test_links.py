"""The extra links' URLs: the lake's places (local, S3, other schemes) and the Spark application's
(the driver's line, live UI, history server), and the links each operator declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.operators.links import (
    LakeTableLink,
    SparkApplicationLink,
    SparkApplicationWatch,
    SparkUiPages,
    lake_url,
)
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator
from airflow_provider_mysqlcdc.spark.application import APPLICATION_LINE

CONSOLE = "https://s3.console.aws.amazon.com/s3/buckets/"


def test_a_local_lake_gives_file_uris_of_the_current_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = tmp_path / "my lake"
    assert lake_url(Lake.at(str(lake)), ["shop.orders"], {}) == f"file://{tmp_path.as_posix()}/my%20lake/shop/orders/current"
    assert lake_url(Lake.at(str(lake)), [TableId("shop", "orders")], {}) == (lake / "shop/orders/current").as_uri()
    monkeypatch.chdir(tmp_path)
    # relative: absolute
    assert lake_url(Lake.at("my lake"), ["shop.orders"], {}) == (lake / "shop/orders/current").as_uri()


def test_several_tables_give_their_deepest_common_folder(tmp_path: Path) -> None:
    assert lake_url(Lake.at(str(tmp_path)), ["shop.orders", "shop.customers"], {}) == (tmp_path / "shop").as_uri()
    assert lake_url(Lake.at(str(tmp_path)), ["shop.orders", "crm.people"], {}) == tmp_path.as_uri()
    assert lake_url(Lake.at(str(tmp_path)), ["shop.orders", "shop.orders"], {}) == (
        tmp_path / "shop/orders/current").as_uri()
    # a split selecting tables by regular expressions names none: the lake itself
    assert lake_url(Lake.at(str(tmp_path) + "/"), [], {}) == tmp_path.as_uri()
    # "shop" and "shopping" share characters, not a folder
    assert lake_url(Lake.at("s3://b/p"), ["shop.a", "shopping.a"], {"AWS_ENDPOINT_URL": "http://x"}) == "s3://b/p"


def test_s3_on_aws_gives_the_console_page_of_the_prefix() -> None:
    assert lake_url(Lake.at("s3a://lake/cdc"), ["shop.orders"], {}) == f"{CONSOLE}lake?prefix=cdc/shop/orders/current/"
    assert lake_url(Lake.at("s3://lake"), ["shop.orders", "shop.items"], {"AWS_REGION": "eu-west-3"}) == (
        f"{CONSOLE}lake?region=eu-west-3&prefix=shop/")
    assert lake_url(Lake.at("s3://lake"), [], {"AWS_DEFAULT_REGION": "us-east-1"}) == f"{CONSOLE}lake?region=us-east-1"
    assert lake_url(Lake.at("s3://lake/a b"), ["shop.o#1"], {}) == f"{CONSOLE}lake?prefix=a%20b/shop/o%231/current/"


def test_s3_compatible_servers_and_other_schemes_give_the_uri() -> None:
    assert lake_url(Lake.at("s3a://lake/cdc"), ["shop.orders"], {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}) == (
        "s3://lake/cdc/shop/orders/current")
    assert lake_url(Lake.at("s3://lake"), ["shop.orders"], {"AWS_ENDPOINT_URL_S3": "https://minio"}) == (
        "s3://lake/shop/orders/current")
    assert lake_url(Lake.at("hdfs://nn:8020/lake"), ["shop.orders"], {}) == "hdfs://nn:8020/lake/shop/orders/current"


def line(**fields: object) -> str:
    return APPLICATION_LINE + json.dumps(fields)


def test_the_driver_line_gives_the_application() -> None:
    app = SparkUiPages.from_line(line(id="local-1763", ui="http://worker:4041", history_server=None,
                                      event_log=False) + "\n")
    assert app == SparkUiPages("local-1763", "http://worker:4041", None, False)
    assert app.url(running=True) == app.url(running=False) == "http://worker:4041"  # no history: the UI stays
    assert SparkUiPages.from_line("snapshot: shop.orders chunks 0-3: 4 chunks in 2 tasks") is None
    assert SparkUiPages.from_line(APPLICATION_LINE + "{not json") is None
    assert SparkUiPages.from_line(line(ui="http://worker:4040")) is None  # no id


def test_the_history_server_once_the_job_ended() -> None:
    app = SparkUiPages("application_17_0001", "http://worker:4040", "history.example.com:18080", True)
    assert app.url(running=True) == "http://worker:4040"
    assert app.url(running=False) == "http://history.example.com:18080/history/application_17_0001/"
    with_scheme = SparkUiPages("app-1", None, "https://spark-history/", True)
    assert with_scheme.url(running=True) == with_scheme.url(running=False) == "https://spark-history/history/app-1/"
    # without event logs the history server never hears of the application
    assert SparkUiPages("app-1", "http://w:4040", "history:18080", False).url(running=False) == "http://w:4040"
    assert SparkUiPages("app-1").url(running=False) is None


def test_an_application_known_by_its_id_takes_the_history_server_from_conf() -> None:
    conf = {"spark.yarn.historyServer.address": "hs:18080", "spark.eventLog.enabled": "true"}
    assert SparkUiPages.from_conf("spark-4f2a", conf).url(running=False) == "http://hs:18080/history/spark-4f2a/"
    assert SparkUiPages.from_conf("spark-4f2a", None).url(running=False) is None


def test_the_watch_passes_every_line_on_and_keeps_the_first_application() -> None:
    watch = SparkApplicationWatch(None, None)  # outside a DAG run nothing is persisted
    lines = ["Spark starting\n", line(id="local-1", ui="http://w:4040") + "\n", line(id="local-2") + "\n", "done\n"]
    assert list(watch.lines(iter(lines))) == lines
    assert watch.pages == SparkUiPages("local-1", "http://w:4040")


def test_the_watch_sees_the_lines_the_spark_hook_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    watch = SparkApplicationWatch(None, None)
    hook = watch.attach(SparkSubmitHook(conn_id="spark_default"))
    lines = ["Spark starting\n", line(id="local-7", ui="http://w:4040", history_server="hs:18080",
                                       event_log=True) + "\n", "Exception in thread main\n"]
    hook._process_spark_submit_log(iter(lines))
    assert watch.pages == SparkUiPages("local-7", "http://w:4040", "hs:18080", True)
    assert list(hook._last_submit_log_lines)[-1] == "Exception in thread main"  # the hook's own work goes on
    watch.finished(hook)  # outside a DAG run: nothing to persist, and no error


def test_every_operator_declares_its_links() -> None:
    assert [link.name for link in MySqlSnapshotSparkOperator.operator_extra_links] == [
        "Spark application", "Lake table"]
    assert [link.name for link in MySqlChunkSplitOperator.operator_extra_links] == ["Lake table"]
    assert [link.name for link in MySqlBinlogStreamOperator.operator_extra_links] == ["Lake table"]
    # the keys the API server reads the URLs from, stable across releases
    assert (LakeTableLink().xcom_key, SparkApplicationLink().xcom_key) == (
        "mysql_cdc_lake_table", "mysql_cdc_spark_application")
