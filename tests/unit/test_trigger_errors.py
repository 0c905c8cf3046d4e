"""A failure in the triggerer reaches the task as the same named exception, with its message; the task lets
go of the lake's lease at once."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.exceptions import (
    BinlogPositionLostError,
    InvalidOptionError,
    LakeLeaseError,
    MySqlCdcError,
    SchemaChangeError,
    SourceConfigError,
    error_event,
    error_from_event,
)
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.lease import StreamLease
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator
from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger

OFFSET = {"file": "mysql-bin.000001", "position": 4, "gtid": None, "flavor": "mariadb",
          "events_to_skip": 0, "rows_to_skip": 0}


def first_event(trigger: MySqlBinlogTrigger) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(first())


@pytest.mark.parametrize(
    ("extra", "port", "kind", "message"),
    [
        ({}, 1, SourceConfigError, "cannot reach the server at 127.0.0.1:1"),  # nothing listens on port 1
        ({"server_id": "9-1"}, 3306, InvalidOptionError, "server_id range"),
    ],
)
def test_a_trigger_failure_is_raised_again_as_our_exception(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any], port: int, kind: type[Exception], message: str
) -> None:
    conn = {"conn_type": "mysql_cdc", "host": "127.0.0.1", "port": port, "login": "cdc", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps(conn))
    trigger = MySqlBinlogTrigger("mysql_cdc_default", OFFSET, time.time() + 60, 0.01, {"batches": 3})
    payload = first_event(trigger)
    assert payload["reason"] == "error" and payload["batches"] == 3  # the task's state travels on
    assert payload["error_type"] == kind.__name__
    json.dumps(payload)  # the triggerer stores the event
    error = error_from_event(payload)
    assert type(error) is kind and str(error) == payload["error"]
    with pytest.raises(kind, match=message):
        raise error


def test_every_error_of_ours_is_rebuilt_from_its_class_name_and_message() -> None:
    """The triggerer's event and a Spark job's error file carry a class name and a message: each class of the
    exceptions module (those the event rebuilds by name) must be made again from them alone (one with more
    constructor arguments would fail as a TypeError)."""
    def subclasses(kind: type[MySqlCdcError]) -> list[type[MySqlCdcError]]:
        return [kind, *(s for sub in kind.__subclasses__() for s in subclasses(sub))]

    kinds = [k for k in subclasses(MySqlCdcError) if k.__module__ == MySqlCdcError.__module__]
    assert BinlogPositionLostError in kinds
    for kind in kinds:
        error = error_from_event(error_event(kind("what went wrong")))
        assert type(error) is kind and str(error) == "what went wrong"


def test_other_errors_become_source_errors_naming_them() -> None:
    error = error_from_event(error_event(ConnectionResetError("peer reset")))
    assert type(error) is SourceConfigError
    assert "(ConnectionResetError): peer reset; check the mysql_cdc connection" in str(error)
    assert type(error_from_event(error_event(SchemaChangeError("x")))) is SchemaChangeError
    assert error_event(KeyError("k"))["error_type"] == "KeyError"
    assert error_event(json.JSONDecodeError("bad", "", 0))["error_type"] == "json.decoder.JSONDecodeError"
    # only our exception classes are rebuilt by name, whatever the payload says
    assert type(error_from_event({"error_type": "SystemExit", "error": "0"})) is SourceConfigError
    assert type(error_from_event({"error_type": "error_event", "error": "0"})) is SourceConfigError
    assert "unknown error" in str(error_from_event({}))


class TaskInstance:
    dag_id, task_id, run_id = "shop_cdc", "stream", "manual 1"


def test_the_task_releases_its_lease_on_a_trigger_failure_and_only_its_own(tmp_path: Any) -> None:
    """The lease was renewed until the wait's end and its lake left clean at batch 7 (``wait_until``): after the
    trigger's error another writer takes the lake at once, with the clean mark; a lease another holder took
    over is left alone."""
    lake = Lake.at(str(tmp_path / "lake"))
    operator = MySqlBinlogStreamOperator(task_id="stream", base_uri=lake.base_uri, tables=["shop.orders"])
    context = {"ti": TaskInstance()}
    writer = operator._writer(context)
    waiting = StreamLease(lake, writer, 120)
    waiting.acquire()
    waiting.check(until=time.time() + 300 + 120, clean_seq=7)
    with pytest.raises(LakeLeaseError):
        StreamLease(lake, "another run", 60).acquire()
    failure = {"reason": "error", **error_event(SourceConfigError("the server went away"))}
    with pytest.raises(SourceConfigError, match="the server went away"):
        operator.execute_complete(context, failure)
    other = StreamLease(lake, "another run", 60)
    other.acquire()
    assert other.token == 2 and other.left_clean_at == 7

    with pytest.raises(SourceConfigError):
        operator.execute_complete(context, failure)
    other.check()  # still the other writer's
