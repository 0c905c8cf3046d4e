"""The hook reads a mysql_cdc connection into a validated ConnectionConfig; bad extras say what to fix."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook


def test_hook_reads_an_env_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "mysql_cdc", "host": "db.example", "port": 3307, "login": "cdc", "password": "s3cret!",
            "schema": "shop", "extra": {"server_id": "6000-6003", "connect_timeout": 5,
                                         "ssl": {"ca": "/ca.pem", "verify": False}}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps(conn))
    config = MySqlCdcHook().get_config()
    assert (config.host, config.port, config.user, config.database) == ("db.example", 3307, "cdc", "shop")
    assert (str(config.server_id), config.connect_timeout, config.server_time_zone) == ("6000-6003", 5, "+00:00")
    assert "s3cret" not in repr(config)
    kwargs = config.pymysql_kwargs()
    assert kwargs["ssl"] == {"ca": "/ca.pem"} and kwargs["ssl_verify_cert"] is False
    assert kwargs["init_command"] == "SET time_zone = '+00:00'"
    assert config.replication_settings()["password"] == "s3cret!"
    assert "s3cret" not in json.dumps(config.to_dict())
    assert ConnectionConfig.from_dict(json.loads(json.dumps(config.to_dict())), "s3cret!") == config


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"server_id": "9-1"}, "server_id range"),
        ({"connect_timeout": "soon"}, "connect_timeout extra must be a whole number"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"server_time_zone": "+25:00"}, "server_time_zone extra"),
        ({"server_time_zone": "'; DROP"}, "server_time_zone extra"),
        ({"ssl": "yes"}, "ssl extra must be an object"),
        ({"ssl": {"ca": "x", "pem": "y"}}, "ssl extra"),
        ({"sever_id": "1"}, r"unknown extras \['sever_id'\]"),
    ],
)
def test_bad_extras_name_what_to_fix(extra: dict, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        ConnectionConfig.from_parts("h", None, "u", "p", None, extra)


def test_missing_host_or_login() -> None:
    with pytest.raises(InvalidOptionError, match="Host field"):
        ConnectionConfig.from_parts(None, None, "u", "p", None, {})
    with pytest.raises(InvalidOptionError, match="Login field"):
        ConnectionConfig.from_parts("h", None, "", "p", None, {})
    config = ConnectionConfig.from_parts("h", None, "u", None, "", {"server_id": None, "ssl": ""})
    assert (config.port, config.database, config.ssl, str(config.server_id)) == (3306, None, None, "5400-5408")
