"""The Airflow side of the source connection: a ``mysql_cdc`` connection turned into a ConnectionConfig.

The connection type is our own because ``mysql`` belongs to the MySQL provider. The form fields
for the extras are declared in ``get_provider_info`` (``conn-fields``, with a JSON schema each), the
way Airflow 3.2+ wants: Airflow 3.3 builds the form from them and never calls the deprecated
``get_connection_form_widgets`` / ``get_ui_field_behaviour`` of a hook that declares them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

if TYPE_CHECKING:
    from airflow_provider_mysqlcdc.cdc.source.server_info import ServerInfo

# ConnectionConfig fields that come from the connection's standard fields, not from its extras
_STANDARD_FIELDS = frozenset({"host", "port", "user", "password", "database"})
# extras that only shape the session or name server ids: a bad value may fall back to its default
# for the Test button's connection, so the server can still be checked. ``ssl`` (or an unknown key,
# which may be a misspelt ``ssl``) never does: the password would go out without the TLS intended.
_DEFAULTABLE_EXTRAS = frozenset({"server_id", "connect_timeout", "server_time_zone", "charset"})


def accepted_extras() -> frozenset[str]:
    """The extras a ``mysql_cdc`` connection may carry: every ConnectionConfig field not a standard one."""
    return frozenset(f.name for f in dataclasses.fields(ConnectionConfig)) - _STANDARD_FIELDS


class MySqlCdcHook(BaseHook):
    conn_name_attr = "mysql_cdc_conn_id"
    default_conn_name = "mysql_cdc_default"
    conn_type = "mysql_cdc"
    hook_name = "MySQL CDC"

    def __init__(self, mysql_cdc_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mysql_cdc_conn_id = mysql_cdc_conn_id

    def get_config(self) -> ConnectionConfig:
        conn = self.get_connection(self.mysql_cdc_conn_id)
        return ConnectionConfig.from_parts(
            conn.host, conn.port, conn.login, conn.password, conn.schema, conn.extra_dejson
        )

    def get_conn(self) -> Any:
        """A pymysql connection (autocommit, session time zone set) for control queries."""
        return self.get_config().connect()

    def test_connection(self) -> tuple[bool, str]:
        """For the UI's Test button: every problem at once, each naming what to fix.

        Checks the fields and extras (each one on its own, so that every bad one is named), connects,
        then reads the server's version, binlog settings and the CDC user's grants (SELECT on the
        connection's default database when it has one), and says how long a stopped stream keeps its
        binlog position (``cdc.source.retention.stopped_stream_allowance``, the stream's own margin).
        A bad extra that only shapes the session is replaced by its default for the check, so the server
        is still checked; a bad ``ssl`` or an unknown extra stops before connecting. The password never
        appears in the message.
        """
        unchecked = "not connected, so the binlog settings and grants are not checked"
        try:
            conn = self.get_connection(self.mysql_cdc_conn_id)
            parts = (conn.host, conn.port, conn.login, conn.password, conn.schema)
            config, problems = _config_and_problems(*parts, conn.extra_dejson)
            server, retention = None, ""
            if config is None:
                unchecked += ": fix the fields above first"
            else:
                server, server_problems, retention = _check_server(config)
                problems += server_problems
        except Exception as exc:  # the Test button shows a message, never a traceback
            return False, f"the check itself failed ({type(exc).__name__}): {exc}"
        if problems or config is None or server is None:
            count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
            text = f"the mysql_cdc connection is not ready for CDC ({count}):\n- " + "\n- ".join(problems)
            return False, text if server is not None else f"{text}\n({unchecked})"
        database = f" (SELECT on {config.database} included)" if config.database else ""
        return True, (
            f"connected to {server.flavor} {server.version_string} as {config.address}; binlog settings and "
            f"grants{database} are ready for CDC; binlog readers take server ids {config.server_id}; {retention}"
        )


def _config_and_problems(
    host: str | None, port: int | None, login: str | None, password: str | None, schema: str | None,
    extra: dict[str, Any],
) -> tuple[ConnectionConfig | None, list[str]]:
    """The config to test with (bad defaultable extras at their defaults) or None, and every problem found."""
    problems: list[str] = []
    usable: dict[str, Any] = {}
    safe_to_connect = True
    # each extra alone (the others empty), so that one error does not hide the next
    for name, value in extra.items():
        refusal = _refusal("host", "user", {name: value})
        if refusal is None and name == "charset" and value not in (None, "") and not _known_charset(str(value)):
            refusal = (f"the charset extra {value!r} is not a character set the client knows: use utf8mb4 "
                       f"(the default) or another MySQL character set name")
        if refusal is None:
            usable[name] = value
        else:
            problems.append(refusal)
            safe_to_connect &= name in _DEFAULTABLE_EXTRAS
    if not host:
        problems.append(_refusal(None, "user", {}) or "the connection has no host")
    if not login:
        problems.append(_refusal("host", None, {}) or "the connection has no login")
    if not (host and login and safe_to_connect):
        return None, problems
    return ConnectionConfig.from_parts(host, port, login, password, schema, usable), problems


def _refusal(host: str | None, login: str | None, extra: dict[str, Any]) -> str | None:
    """ConnectionConfig's own words for what is wrong with these parts, or None."""
    try:
        ConnectionConfig.from_parts(host, None, login, None, None, extra)
    except InvalidOptionError as exc:
        return str(exc)
    return None


def _known_charset(name: str) -> bool:
    from pymysql.charset import charset_by_name  # the driver: only when a connection is checked

    return charset_by_name(name) is not None


def _check_server(config: ConnectionConfig) -> tuple[ServerInfo | None, list[str], str]:
    """(ServerInfo or None, problems, retention): connect, then every binlog setting and grant the source
    check judges, and how long a stopped stream keeps its binlog position."""
    # the source checks (70 ms): only when the connection is tested, not when an operator imports the hook
    from airflow_provider_mysqlcdc.cdc.source.checks import find_problems, gather_facts
    from airflow_provider_mysqlcdc.cdc.source.retention import stopped_stream_allowance

    try:
        conn = config.connect()
    except SourceConfigError as exc:
        return None, [str(exc)], ""
    except Exception as exc:  # e.g. an unknown time zone or database: the server's own words name it
        return None, [f"cannot connect as {config.address}: {exc}"], ""
    try:
        facts = gather_facts(conn)
        problems = find_problems(facts, [config.database] if config.database else [])
        retention = "" if problems else stopped_stream_allowance(conn, config.replication_settings())
    except Exception as exc:
        return None, [f"connected as {config.address}, but reading the server's settings and grants failed: {exc}"], ""
    finally:
        conn.close()
    return facts.server, problems, retention
