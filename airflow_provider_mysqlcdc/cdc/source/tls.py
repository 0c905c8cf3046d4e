"""TLS to the source server: the ``ssl`` extra of the connection, and what each driver makes of it.

Managed MySQL (RDS, Cloud SQL, Azure) refuses connections without TLS, so one setting must mean the
same for every connection the provider opens: pymysql (control queries, the keyless SELECT),
mysql-replication (the binlog, on pymysql) and connectorx (the snapshot's Arrow SELECT). Without the
extra no connection uses TLS (pymysql would otherwise try it opportunistically and connectorx not,
so one half of a task could connect and the other not). With it, every connection requires TLS and
checks the server's certificate as ``verify`` says:

- ``identity`` (the default; ``true``): the certificate chains to ``ca`` (or the system's CAs) and
  names the host connected to, like MySQL's ``VERIFY_IDENTITY``;
- ``ca``: the chain only, like ``VERIFY_CA`` (Cloud SQL's server certificates name the instance,
  not its address);
- ``none`` (``false``): encrypted but unchecked, like ``REQUIRED``.

connectorx's MySQL URL takes ``ssl-mode`` and ``ssl-ca`` (no client certificate), so with ``cert``
and ``key`` the snapshot SELECT goes through pymysql instead (``connectorx_params`` returns None).
connectorx's TLS (OpenSSL, through Rust's native-tls) also loads OpenSSL's default CA paths for every
connection it opens, besides ``ssl-ca``: the system bundle, about 7 ms of CPU a connection here, and it
opens two a chunk, which cut the snapshot's rows/s over TLS to a third (bench/RESULTS.md, "Snapshot over TLS").
``only_the_ca`` points those defaults at the configured CA while connectorx connects, so it trusts
exactly what pymysql trusts, without that cost.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast
from urllib.parse import urlencode

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SourceConfigError

VerifyMode = Literal["identity", "ca", "none"]
VERIFY_MODES: tuple[VerifyMode, ...] = ("identity", "ca", "none")
_KEYS = frozenset({"ca", "cert", "key", "verify"})
_VERIFY_ALIASES: dict[Any, VerifyMode] = {True: "identity", False: "none"}
_CONNECTORX_MODES: dict[VerifyMode, str] = {"identity": "VERIFY_IDENTITY", "ca": "VERIFY_CA", "none": "REQUIRED"}
EXAMPLE = '{"ca": "/path/ca.pem", "verify": "identity"}'
_OPENSSL_DEFAULTS = threading.Lock()  # one connectorx call at a time sets OpenSSL's default CA paths


@dataclass(frozen=True)
class TlsSettings:
    """The ``ssl`` extra, validated: file paths as the worker (and every Spark executor) sees them."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    verify: VerifyMode = "identity"

    @classmethod
    def parse(cls, value: Any) -> TlsSettings | None:
        """The extra's value (an object, or its JSON from a form field), or None when empty."""
        if value in (None, {}, ""):
            return None
        if not isinstance(value, dict) or set(value) - _KEYS:
            raise InvalidOptionError(
                f"the ssl extra must be an object with keys among {sorted(_KEYS)}, e.g. {EXAMPLE}; empty for no TLS"
            )
        verify = value.get("verify", "identity")
        verify = _VERIFY_ALIASES.get(verify, verify) if isinstance(verify, bool) else verify
        if verify not in VERIFY_MODES:
            raise InvalidOptionError(
                f"the ssl extra's verify must be one of {list(VERIFY_MODES)} (true means identity, false none), "
                f"not {value.get('verify')!r}"
            )
        paths = {k: value.get(k) or None for k in ("ca", "cert", "key")}
        for name, path in paths.items():
            if path is not None and not isinstance(path, str):
                raise InvalidOptionError(f"the ssl extra's {name} must be a file path, not {path!r}")
        if bool(paths["cert"]) != bool(paths["key"]):
            raise InvalidOptionError("the ssl extra's cert and key go together: set both (a client certificate) "
                                     "or neither")
        return cls(ca=paths["ca"], cert=paths["cert"], key=paths["key"], verify=cast("VerifyMode", verify))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("ca", self.ca), ("cert", self.cert), ("key", self.key)) if v} | {
            "verify": self.verify}

    def context(self) -> ssl.SSLContext:
        """The client context for pymysql: TLS required, the certificate checked as ``verify`` says."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise SourceConfigError(
                f"the ssl extra's files cannot be used ({exc}): check that ca {self.ca!r}, cert {self.cert!r} and "
                f"key {self.key!r} are PEM files readable on this worker (and on every Spark executor)"
            ) from None
        ctx.check_hostname = self.verify == "identity"
        ctx.verify_mode = ssl.CERT_NONE if self.verify == "none" else ssl.CERT_REQUIRED
        return ctx

    def connectorx_params(self) -> str | None:
        """The query string of connectorx's MySQL URL, or None when it cannot express these settings."""
        if self.cert:
            return None
        params = {"ssl-mode": _CONNECTORX_MODES[self.verify]}
        if self.ca:
            params["ssl-ca"] = self.ca
        return urlencode(params)


@contextlib.contextmanager
def only_the_ca(tls: TlsSettings | None) -> Iterator[None]:
    """While it lasts, OpenSSL's default CA paths (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) hold only ``tls.ca``
    (or nothing, for ``verify`` none), then they are as before; without a CA to trust instead, nothing changes.

    The variables are the process's: another thread loading OpenSSL's defaults meanwhile would trust this CA
    only, and refuse its server, never accept more. Nothing else here opens TLS connections while chunks
    are read (the Spark task reads, then writes).
    """
    if tls is None or (tls.ca is None and tls.verify != "none"):
        yield
        return
    paths = ssl.get_default_verify_paths()
    names = (paths.openssl_cafile_env, paths.openssl_capath_env)
    with _OPENSSL_DEFAULTS:
        before = {name: os.environ.get(name) for name in names}
        os.environ.update(zip(names, (tls.ca or os.devnull, os.devnull), strict=True))
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def explain_refusal(message: str, address: str, tls: TlsSettings | None, offers_tls: bool | None) -> str | None:
    """What to set when a driver's connection error (its message) is about TLS, or None.

    ``offers_tls``: whether the server's greeting offered TLS (None when unknown). A server requiring
    TLS refuses a plain connection as "access denied" (MariaDB, and MySQL for a ``REQUIRE SSL`` user)
    or as "secure transport required" (MySQL's ``require_secure_transport``).
    """
    lowered = message.lower()
    if tls is None and ("secure transport" in lowered or ("access denied" in lowered and offers_tls)):
        return (f"the server refused {address} without TLS ({_server_words(message)}): it probably requires TLS "
                f"(managed MySQL does, and so does a user created REQUIRE SSL). Set the mysql_cdc connection's ssl "
                f"extra, e.g. {EXAMPLE} with your provider's CA bundle; if it is not TLS, check the login and "
                f"password")
    if tls is None:
        return None
    if "mismatch" in lowered and ("certificate" in lowered or "verif" in lowered):
        return (f"the server's TLS certificate does not name the host of {address} ({_server_words(message)}): "
                f"connect by a name the certificate holds, or set the ssl extra's verify to \"ca\" (check the CA "
                f"only, as Cloud SQL needs)")
    if "certificate verify failed" in lowered or "certificate_verify_failed" in lowered:
        ca = f"the CA in the ssl extra's ca ({tls.ca})" if tls.ca else "the system's CAs (the ssl extra has no ca)"
        return (f"the server's TLS certificate for {address} is not signed by {ca} ({_server_words(message)}): set "
                f"the ssl extra's ca to the CA bundle of the server (RDS: the region's bundle; Cloud SQL: the "
                f"instance's server CA)")
    if "ssl is required but the server" in lowered:
        return (f"the ssl extra asks for TLS, but the server at {address} does not offer it: enable TLS on the "
                f"server, or remove the ssl extra")
    return None


def _server_words(message: str) -> str:
    """The driver's message, one line, without the noise around it."""
    return " ".join(message.split())[:300]
