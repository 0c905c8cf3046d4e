"""A failure in the triggerer reaches the task as the same named exception, with its message."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from airflow_provider_mysqlcdc.exceptions import (
    InvalidOptionError,
    SchemaChangeError,
    SourceConfigError,
    error_event,
    error_from_event,
)
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
