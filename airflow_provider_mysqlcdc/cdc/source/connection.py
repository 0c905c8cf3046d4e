"""How to reach the source server, as plain data usable without Airflow (Spark executors, triggers).

The Airflow hook builds it from a ``mysql_cdc`` connection; everything else only sees this. The
password is kept out of ``repr`` and out of every error message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.source.server_id import DEFAULT_SERVER_ID_RANGE, ServerIdRange
from airflow_provider_mysqlcdc.cdc.source.tls import TlsSettings, explain_refusal
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

DEFAULT_PORT = 3306
DEFAULT_CONNECT_TIMEOUT = 10
DEFAULT_TIME_ZONE = "+00:00"
_OFFSET_ZONE = re.compile(r"^[+-](0\d|1[0-4]):[0-5]\d$")
_NAMED_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-/]*$")
# pymysql error numbers that mean "these credentials or this address do not work"
_ACCESS_DENIED = {1044, 1045, 1698}
_UNREACHABLE = {2003, 2005, 2006, 2013}


@dataclass(frozen=True)
class ConnectionConfig:
    host: str
    user: str
    password: str = field(default="", repr=False)
    port: int = DEFAULT_PORT
    database: str | None = None
    ssl: TlsSettings | None = None
    connect_timeout: int = DEFAULT_CONNECT_TIMEOUT
    server_time_zone: str = DEFAULT_TIME_ZONE
    server_id: ServerIdRange = field(default_factory=lambda: ServerIdRange.parse(DEFAULT_SERVER_ID_RANGE))
    charset: str = "utf8mb4"

    @classmethod
    def from_parts(
        cls,
        host: str | None,
        port: int | None,
        user: str | None,
        password: str | None,
        database: str | None,
        extra: dict[str, Any],
    ) -> ConnectionConfig:
        """Validate an Airflow connection's fields and extras; each error names the field to fix."""
        extra = {k: v for k, v in extra.items() if v not in (None, "")}  # empty form fields mean "default"
        if not host:
            raise InvalidOptionError("the mysql_cdc connection has no host: set its Host field")
        if not user:
            raise InvalidOptionError("the mysql_cdc connection has no login: set its Login field to the CDC user")
        unknown = sorted(set(extra) - {"ssl", "connect_timeout", "server_time_zone", "server_id", "charset"})
        if unknown:
            raise InvalidOptionError(
                f"unknown extras {unknown} in the mysql_cdc connection; known: ssl, connect_timeout, "
                f"server_time_zone, server_id, charset"
            )
        return cls(
            host=host,
            port=int(port or DEFAULT_PORT),
            user=user,
            password=password or "",
            database=database or None,
            ssl=TlsSettings.parse(extra.get("ssl")),
            connect_timeout=_timeout(extra.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)),
            server_time_zone=_time_zone(extra.get("server_time_zone", DEFAULT_TIME_ZONE)),
            server_id=ServerIdRange.parse(extra.get("server_id", DEFAULT_SERVER_ID_RANGE)),
            charset=str(extra.get("charset", "utf8mb4")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything but the password, which travels apart (an environment variable, a secret)."""
        return {
            "host": self.host, "port": self.port, "user": self.user, "database": self.database,
            "ssl": self.ssl.to_dict() if self.ssl else None,
            "connect_timeout": self.connect_timeout, "server_time_zone": self.server_time_zone,
            "server_id": str(self.server_id), "charset": self.charset,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], password: str) -> ConnectionConfig:
        return cls(**{**d, "password": password, "server_id": ServerIdRange.parse(d["server_id"]),
                      "ssl": TlsSettings.parse(d.get("ssl"))})

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    def pymysql_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "charset": self.charset,
            "connect_timeout": self.connect_timeout,
            "autocommit": True,
            "init_command": f"SET time_zone = '{self.server_time_zone}'",
        }
        if self.ssl:
            kwargs["ssl"] = self.ssl.context()
        else:  # not pymysql's opportunistic TLS: the same as connectorx's, and as the extra says
            kwargs["ssl_disabled"] = True
        return kwargs

    def connect(self, **overrides: Any) -> Any:
        """A pymysql connection with the session time zone set, or a clear error (no password in it)."""
        import pymysql
        from pymysql.constants import CLIENT

        conn = pymysql.Connection(**{**self.pymysql_kwargs(), **overrides, "defer_connect": True})
        try:
            conn.connect()
        except pymysql.err.OperationalError as exc:
            offers_tls = bool(getattr(conn, "server_capabilities", 0) & CLIENT.SSL)
            raise self.explain(exc, offers_tls) from None
        return conn

    def explain(self, exc: BaseException, offers_tls: bool | None = None) -> BaseException:
        """A driver's connection error (pymysql's, connectorx's) as a SourceConfigError naming what to set, or
        ``exc`` itself when it is about something else. ``offers_tls``: whether the server's greeting did."""
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        tls = explain_refusal(message, self.address, self.ssl, offers_tls)
        if tls is not None:
            return SourceConfigError(tls)
        if code in _ACCESS_DENIED or (code is None and "access denied for user" in message.lower()):
            return SourceConfigError(
                f"access denied for {self.address}: check the login and password of the mysql_cdc "
                f"connection and that the user may connect from this host"
            )
        if code in _UNREACHABLE:
            return SourceConfigError(
                f"cannot reach the server at {self.host}:{self.port} within {self.connect_timeout} s: "
                f"check the connection's host and port and the network"
            )
        return exc

    def replication_settings(self) -> dict[str, Any]:
        """Connection settings of the binlog dump (``binlog.dump``) and of the control connection that
        mysql-replication's row decoding gets (``legacy_rows``): no database, no autocommit."""
        return {k: v for k, v in self.pymysql_kwargs().items() if k not in ("database", "autocommit")}


def _timeout(value: Any) -> int:
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        seconds = 0
    if seconds < 1 or str(value).strip() not in (str(seconds), f"{seconds}.0"):
        raise InvalidOptionError(f"the connect_timeout extra must be a whole number of seconds >= 1, not {value!r}")
    return seconds


def _time_zone(value: Any) -> str:
    zone = str(value)
    if not (_OFFSET_ZONE.match(zone) or _NAMED_ZONE.match(zone)):
        raise InvalidOptionError(
            f"the server_time_zone extra must be an offset like '+00:00' or a zone name the server knows, "
            f"not {value!r}"
        )
    return zone
