"""The lake handle (``lake.handle``): every place of the lake from one base URI, the scheme mapped in one
place; and the lake connection (``hooks.lake_connection``) turned into storage options that never show."""

from __future__ import annotations

import json
import os
import pickle

import pyarrow.fs as pafs
import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamOptions
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.hooks.lake_connection import lake_storage_options
from airflow_provider_mysqlcdc.lake.documents.snapshot import Batch
from airflow_provider_mysqlcdc.lake.handle import Lake, canonical_uri
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.spark_submit import check_password_reaches_driver
from airflow_provider_mysqlcdc.spark.application import LAKE_OPTIONS_ENV

SECRET = "the-secret-key-7f3a"  # noqa: S105  (a value to search for, not a credential)
OPTIONS = {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-west-1",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true"}


def test_every_place_of_a_table_and_of_the_stream_comes_from_the_handle() -> None:
    lake = Lake.at("s3a://bucket/lake/", OPTIONS)
    orders = lake.table("shop.orders")
    assert (orders.current.uri, orders.changelog.uri) == ("s3://bucket/lake/shop/orders/current",
                                                         "s3://bucket/lake/shop/orders/changelog")
    assert orders.current.storage_options == OPTIONS == orders.changelog.storage_options
    assert orders.folder == "s3://bucket/lake/shop/orders"
    assert lake.root == "bucket/lake" and isinstance(lake.fs, pafs.S3FileSystem) and lake.fs.region == "eu-west-1"
    assert orders.current_dir == "bucket/lake/shop/orders/current"
    assert orders.plan == "bucket/lake/shop/orders/snapshot/_plan.json"
    assert orders.manifest(3) == "bucket/lake/shop/orders/snapshot/batch=3/_manifest.json"
    assert orders.verification_dir("run_1") == "bucket/lake/shop/orders/verify/run_1"
    assert (lake.checkpoint, lake.lease) == ("bucket/lake/_stream/checkpoint.json", "bucket/lake/_stream/lease.json")
    assert lake.table(TableId("shop", "orders")) == orders


def test_schemes_are_mapped_in_one_place_and_local_paths_made_absolute(tmp_path: object) -> None:
    assert canonical_uri("s3n://b/p") == "s3://b/p" and canonical_uri("GCS://b/p/") == "gs://b/p"
    assert canonical_uri("hdfs://nn:8020/lake") == "hdfs://nn:8020/lake"
    assert Lake.at("lake").uri == os.path.join(os.getcwd(), "lake")
    # Spark reads the files of a Delta log in the scheme the user wrote (Hadoop's s3a), local paths as file://
    assert Lake.at("s3a://b/p").spark_uri("s3://b/p/x.parquet") == "s3a://b/p/x.parquet"
    assert Lake.at("s3://b/p").spark_uri("s3://b/p/x.parquet") == "s3://b/p/x.parquet"
    assert Lake.at("/data/lake").spark_uri("/data/lake/x.parquet") == "file:///data/lake/x.parquet"


def test_the_storage_options_never_show_and_travel_pickled() -> None:
    lake = Lake.at("s3://bucket/lake", OPTIONS)
    assert SECRET not in repr(lake) and SECRET not in repr(lake.table("shop.orders").current)
    options = StreamOptions("s3://bucket/lake", (TableId("shop", "orders"),), storage_options=OPTIONS)
    assert SECRET not in repr(options) and options.lake == lake
    assert lake.fs is not None  # opened before pickling, as a Spark driver's is
    again = pickle.loads(pickle.dumps(lake))  # noqa: S301  (our own object: what a Spark task gets)
    assert again == lake and again.table("shop.orders").current.storage_options == OPTIONS


def aws_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", **fields}))


def test_an_aws_connection_becomes_delta_rs_storage_options(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lake_storage_options(None) == {}  # no connection: the environment's, as without this feature
    aws_connection(monkeypatch, "lake", login="AKID", password=SECRET, extra={
        "aws_session_token": "tok", "region_name": "eu-west-1", "endpoint_url": "http://127.0.0.1:9000"})
    assert lake_storage_options("lake") == {
        "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": "tok",
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true"}
    # empty login and password: the keys (or the role) come from the environment, the rest from the connection
    aws_connection(monkeypatch, "role", extra={"region_name": "us-east-2"})
    assert lake_storage_options("role") == {"AWS_REGION": "us-east-2"}


@pytest.mark.parametrize(("fields", "message"), [
    ({"conn_type": "s3"}, "make it an 'aws' connection"),
    ({"extra": {"role_arn": "arn:aws:iam::1:role/x"}}, "does not read: role_arn"),
    ({"login": "AKID"}, "a login without a password"),
])
def test_a_lake_connection_it_cannot_use_is_refused(monkeypatch: pytest.MonkeyPatch, fields: dict[str, object],
                                                    message: str) -> None:
    aws_connection(monkeypatch, "bad", **fields)
    with pytest.raises(InvalidOptionError, match=message):
        lake_storage_options("bad")


def test_a_spark_job_gets_the_lake_options_in_no_argument_and_no_spark_property(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps({"conn_type": "mysql_cdc", "host": "db",
                                                                     "login": "cdc", "password": "pw"}))
    aws_connection(monkeypatch, "lake", login="AKID", password=SECRET, extra={"region_name": "eu-west-1"})
    pack = Job((Batch(TableId("shop", "orders"), 0, 0, 3),), (30_000,)).with_readers(0, 2)
    operator = MySqlSnapshotSparkOperator(task_id="snapshot", batch=pack.to_dict(), base_uri="s3a://bucket/lake",
                                          lake_conn_id="lake")
    lake = operator.open_lake()
    assert lake.base_uri == "s3a://bucket/lake" and lake.storage_options["AWS_SECRET_ACCESS_KEY"] == SECRET
    operator.prepare(pack, lake, [], "snapshot")
    shown = json.dumps([operator.application_args, operator.conf, operator.env_vars])
    assert SECRET not in shown and LAKE_OPTIONS_ENV not in shown and "--base-uri" in shown
    # cluster deploy mode: the driver would not inherit spark-submit's environment (the variable named)
    with pytest.raises(InvalidOptionError, match=f"lake connection's storage options.*{LAKE_OPTIONS_ENV}"):
        check_password_reaches_driver("spark_default", "yarn", "cluster", None, LAKE_OPTIONS_ENV,
                                      "the lake connection's storage options")
