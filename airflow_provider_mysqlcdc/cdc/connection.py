"""How to reach the source server, as plain data usable without Airflow (Spark executors, triggers).

The Airflow hook builds it from a ``mysql_cdc`` connection; everything else only sees this. The
password is kept out of ``repr`` and out of every error message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.server_id import DEFAULT_SERVER_ID_RANGE, ServerIdRange
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

DEFAULT_PORT = 3306
DEFAULT_CONNECT_TIMEOUT = 10
DEFAULT_TIME_ZONE = "+00:00"
_SSL_KEYS = {"ca", "cert", "key", "verify"}
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
    ssl: dict[str, Any] | None = None
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
            ssl=_ssl(extra.get("ssl")),
            connect_timeout=_timeout(extra.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)),
            server_time_zone=_time_zone(extra.get("server_time_zone", DEFAULT_TIME_ZONE)),
            server_id=ServerIdRange.parse(extra.get("server_id", DEFAULT_SERVER_ID_RANGE)),
            charset=str(extra.get("charset", "utf8mb4")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything but the password, which travels apart (an environment variable, a secret)."""
        return {
            "host": self.host, "port": self.port, "user": self.user, "database": self.database, "ssl": self.ssl,
            "connect_timeout": self.connect_timeout, "server_time_zone": self.server_time_zone,
            "server_id": str(self.server_id), "charset": self.charset,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], password: str) -> ConnectionConfig:
        return cls(**{**d, "password": password, "server_id": ServerIdRange.parse(d["server_id"])})

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
            kwargs["ssl"] = {k: v for k, v in self.ssl.items() if k != "verify"}
            kwargs["ssl_verify_cert"] = bool(self.ssl.get("verify", True))
            kwargs["ssl_verify_identity"] = bool(self.ssl.get("verify", True))
        return kwargs

    def connect(self, **overrides: Any) -> Any:
        """A pymysql connection with the session time zone set, or a clear error (no password in it)."""
        import pymysql

        try:
            return pymysql.connect(**{**self.pymysql_kwargs(), **overrides})
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code in _ACCESS_DENIED:
                raise SourceConfigError(
                    f"access denied for {self.address}: check the login and password of the mysql_cdc "
                    f"connection and that the user may connect from this host"
                ) from None
            if code in _UNREACHABLE:
                raise SourceConfigError(
                    f"cannot reach the server at {self.host}:{self.port} within {self.connect_timeout} s: "
                    f"check the connection's host and port and the network"
                ) from None
            raise

    def replication_settings(self) -> dict[str, Any]:
        """Connection settings for mysql-replication's ``BinLogStreamReader``."""
        return {k: v for k, v in self.pymysql_kwargs().items() if k not in ("database", "autocommit")}


def _ssl(value: Any) -> dict[str, Any] | None:
    if value in (None, {}, ""):
        return None
    if not isinstance(value, dict) or set(value) - _SSL_KEYS:
        raise InvalidOptionError(
            f"the ssl extra must be an object with keys among {sorted(_SSL_KEYS)}, e.g. "
            f'{{"ca": "/path/ca.pem", "verify": true}}'
        )
    return dict(value)


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
