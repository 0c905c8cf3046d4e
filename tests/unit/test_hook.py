"""The hook reads a mysql_cdc connection into a validated ConnectionConfig; bad extras say what to fix."""

from __future__ import annotations

import json
import ssl

import pytest

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook


def test_hook_reads_an_env_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "mysql_cdc", "host": "db.example", "port": 3307, "login": "cdc", "password": "s3cret!",
            "schema": "shop", "extra": {"server_id": "6000-6003", "connect_timeout": 5,
                                         "ssl": {"verify": False}}}
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", json.dumps(conn))
    config = MySqlCdcHook().get_config()
    assert (config.host, config.port, config.user, config.database) == ("db.example", 3307, "cdc", "shop")
    assert (str(config.server_id), config.connect_timeout, config.server_time_zone) == ("6000-6003", 5, "+00:00")
    assert "s3cret" not in repr(config)
    kwargs = config.pymysql_kwargs()
    assert kwargs["ssl"].verify_mode == ssl.CERT_NONE and "ssl_disabled" not in kwargs
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
        ({"ssl": {"verify": "full"}}, "verify must be one of"),
        ({"ssl": {"cert": "/c.pem"}}, "cert and key go together"),
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


# --- the connection form (conn-fields in provider info) and the Test button, without a server ---

def _conn_fields() -> dict:
    from airflow_provider_mysqlcdc.get_provider_info import get_provider_info

    (conn_type,) = get_provider_info()["connection-types"]
    return conn_type["conn-fields"]


def test_accepted_extras_are_what_the_config_accepts() -> None:
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import accepted_extras

    extras = accepted_extras()
    assert "charset" in extras and "server_id" in extras
    for name in extras:  # an empty value means "default": accepted by name alone, never "unknown"
        ConnectionConfig.from_parts("h", None, "u", None, None, {name: None})
        with pytest.raises(InvalidOptionError) as error:
            ConnectionConfig.from_parts("h", None, "u", None, None, {name: None, "no_such_extra": 1})
        assert "['no_such_extra']" in str(error.value)
    # the refusal of an unknown extra lists exactly these as known
    with pytest.raises(InvalidOptionError, match="known: ") as error:
        ConnectionConfig.from_parts("h", None, "u", None, None, {"no_such_extra": 1})
    known = {n.strip() for n in str(error.value).split("known: ", 1)[1].split(",")}
    assert known == extras


def test_every_accepted_extra_has_a_described_form_field() -> None:
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import accepted_extras

    fields = _conn_fields()
    assert set(fields) == accepted_extras()
    for name, field in fields.items():
        assert field["label"] and len(field.get("description", "")) > 30, name
        assert "null" in field["schema"]["type"], f"{name}: an empty field must be allowed (it means the default)"


def _accepts(extra: dict) -> bool:
    try:
        ConnectionConfig.from_parts("h", None, "u", None, None, extra)
    except InvalidOptionError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("server_id", ["5400-5408", "7", " 10 - 20 ", "5400-", "a-b", "1,2", "-5", "5400..5408", ""]),
        ("server_time_zone", ["+00:00", "-05:30", "+14:00", "Europe/Paris", "UTC", "+25:00", "'; DROP", "1:00"]),
        ("charset", ["utf8mb4", "latin1", "utf8mb4; SET", "utf-8 ", "a b"]),
    ],
)
def test_form_patterns_agree_with_the_hook(name: str, values: list[str]) -> None:
    """What the form's pattern refuses the hook refuses too, and the hook never refuses what it lets by."""
    import re

    pattern = re.compile(_conn_fields()[name]["schema"]["pattern"])
    for value in values:
        matches = bool(pattern.match(value))
        if name == "charset":  # the hook takes any name the client knows; the pattern is the shape of one
            from pymysql.charset import charset_by_name

            assert matches == (charset_by_name(value) is not None), value
        elif value:
            assert matches == _accepts({name: value}), value
    assert pattern.match(str(_conn_fields()[name]["schema"]["default"]))


def test_connect_timeout_field_is_a_positive_integer() -> None:
    schema = _conn_fields()["connect_timeout"]["schema"]
    assert schema["type"] == ["integer", "null"] and schema["minimum"] == 1 and _accepts({"connect_timeout": 1})
    assert not _accepts({"connect_timeout": 0})


def test_airflow_shows_every_field_and_a_host_placeholder() -> None:
    from airflow.providers_manager import ProvidersManager

    from airflow_provider_mysqlcdc.hooks.mysql_cdc import accepted_extras

    manager = ProvidersManager()
    widgets = {name.removeprefix("extra__mysql_cdc__") for name in manager.connection_form_widgets
               if name.startswith("extra__mysql_cdc__")}
    assert widgets == accepted_extras()
    placeholders = manager.field_behaviours["mysql_cdc"]["placeholders"]
    assert placeholders["host"] and placeholders["port"] == "3306"


def _hook(monkeypatch: pytest.MonkeyPatch, **conn: object) -> MySqlCdcHook:
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_FORM", json.dumps({"conn_type": "mysql_cdc", **conn}))
    return MySqlCdcHook("mysql_cdc_form")


def test_test_button_names_every_bad_field_at_once_and_does_not_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook(monkeypatch, login="", password="Pw-Not-Shown-1",
                 extra={"server_id": "9-1", "connect_timeout": "soon", "ssl": "yes", "sever_id": "1"})
    ok, message = hook.test_connection()
    assert not ok and "(6 problems)" in message
    for expected in ("server_id range", "connect_timeout extra", "ssl extra", "unknown extras ['sever_id']",
                     "Host field", "Login field", "not connected"):
        assert expected in message
    assert "Pw-Not-Shown-1" not in message


def test_test_button_checks_the_server_with_defaults_for_bad_session_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad server_id or charset is named, and the connection is still tried (here: nothing listens)."""
    hook = _hook(monkeypatch, host="127.0.0.1", port=1, login="cdc", password="x",
                 extra={"server_id": "0-3", "charset": "nonsense"})
    ok, message = hook.test_connection()
    assert not ok and "(3 problems)" in message
    assert "server_id range" in message and "charset extra 'nonsense'" in message
    assert "cannot reach the server at 127.0.0.1:1" in message
    assert "binlog settings and grants are not checked" in message


def test_test_button_on_a_missing_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = MySqlCdcHook("mysql_cdc_nowhere").test_connection()
    assert not ok and "mysql_cdc_nowhere" in message
