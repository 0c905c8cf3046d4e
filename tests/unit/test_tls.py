"""The ssl extra: its validation, what pymysql and connectorx get from it, and driver errors explained."""

from __future__ import annotations

import os
import ssl

import pytest

from airflow_provider_mysqlcdc.cdc.snapshot.arrow_select import connectorx_reaches, connectorx_url
from airflow_provider_mysqlcdc.cdc.source.connection import ConnectionConfig
from airflow_provider_mysqlcdc.cdc.source.tls import TlsSettings, explain_refusal, only_the_ca
from airflow_provider_mysqlcdc.exceptions import SourceConfigError


def _config(ssl_extra: object = None) -> ConnectionConfig:
    return ConnectionConfig.from_parts("db.example", 3306, "cdc", "p@ss", None, {"ssl": ssl_extra})


@pytest.mark.parametrize(("verify", "mode"), [(True, "identity"), (None, "identity"), ("ca", "ca"), (False, "none")])
def test_verify_modes_and_their_aliases(verify: object, mode: str) -> None:
    extra = {"ca": "/ca.pem"} if verify is None else {"ca": "/ca.pem", "verify": verify}
    tls = TlsSettings.parse(extra)
    assert tls is not None and tls.verify == mode
    assert TlsSettings.parse(tls.to_dict()) == tls


def test_no_extra_means_no_tls_on_every_driver() -> None:
    config = _config()
    assert config.ssl is None and config.pymysql_kwargs()["ssl_disabled"] is True
    assert config.replication_settings()["ssl_disabled"] is True  # the binlog connection too
    assert connectorx_url(config, "shop") == "mysql://cdc:p%40ss@db.example:3306/shop"


def test_connectorx_gets_the_mode_and_the_ca() -> None:
    url = connectorx_url(_config({"ca": "/etc/ssl/rds bundle.pem", "verify": "ca"}), "shop")
    assert url.endswith("/shop?ssl-mode=VERIFY_CA&ssl-ca=%2Fetc%2Fssl%2Frds+bundle.pem")
    assert connectorx_url(_config({}), "shop").endswith("/shop")  # an empty object: no TLS
    assert connectorx_url(_config({"verify": False}), "s").endswith("?ssl-mode=REQUIRED")
    assert connectorx_url(_config({"verify": True}), "s").endswith("?ssl-mode=VERIFY_IDENTITY")
    # a client certificate is beyond connectorx's URL: the snapshot reads through pymysql then
    assert not connectorx_reaches(_config({"cert": "/c.pem", "key": "/k.pem"}))
    assert connectorx_reaches(_config({"ca": "/ca.pem"})) and connectorx_reaches(_config())


def test_the_context_checks_as_verify_says() -> None:
    identity, ca_only, none = (TlsSettings(verify=v).context() for v in ("identity", "ca", "none"))
    assert (identity.check_hostname, identity.verify_mode) == (True, ssl.CERT_REQUIRED)
    assert (ca_only.check_hostname, ca_only.verify_mode) == (False, ssl.CERT_REQUIRED)
    assert (none.check_hostname, none.verify_mode) == (False, ssl.CERT_NONE)


def test_an_unreadable_ca_names_the_files() -> None:
    with pytest.raises(SourceConfigError, match="ssl extra's files cannot be used.*/nowhere/ca.pem"):
        TlsSettings(ca="/nowhere/ca.pem").context()


def test_refusals_say_what_to_set() -> None:
    denied = "Access denied for user 'cdc'@'10.0.0.1' (using password: YES)"
    plain = explain_refusal(denied, "cdc@db:3306", None, offers_tls=True)
    assert plain is not None and "requires TLS" in plain and "ssl extra" in plain
    assert explain_refusal(denied, "cdc@db:3306", None, offers_tls=False) is None  # a wrong password then
    mysql = explain_refusal("Connections using insecure transport are prohibited while --require_secure_transport=ON.",
                            "cdc@db:3306", None, offers_tls=None)
    assert mysql is not None and "ssl extra" in mysql
    tls = TlsSettings(ca="/ca.pem")
    wrong_ca = explain_refusal("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate "
                               "in certificate chain", "cdc@db:3306", tls, None)
    assert wrong_ca is not None and "ssl extra's ca (/ca.pem)" in wrong_ca
    host = explain_refusal("certificate verify failed: IP address mismatch, certificate is not valid for '10.0.0.1'",
                           "cdc@db:3306", tls, None)
    assert host is not None and 'verify to "ca"' in host
    connectorx = ("timed out waiting for connection: TlsError { error:0A000086:SSL routines::certificate verify "
                  "failed (self-signed certificate in certificate chain) }")
    assert "ssl extra's ca" in (explain_refusal(connectorx, "cdc@db:3306", tls, None) or "")
    assert explain_refusal("Unknown database 'shop'", "cdc@db:3306", tls, None) is None


def test_connectorx_trusts_only_the_configured_ca_while_it_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = ssl.get_default_verify_paths()
    file_env, dir_env = paths.openssl_cafile_env, paths.openssl_capath_env
    monkeypatch.setenv(file_env, "/etc/before.pem")
    monkeypatch.delenv(dir_env, raising=False)
    with only_the_ca(TlsSettings(ca="/etc/rds.pem")):
        assert (os.environ[file_env], os.environ[dir_env]) == ("/etc/rds.pem", os.devnull)
    assert os.environ[file_env] == "/etc/before.pem" and dir_env not in os.environ
    with only_the_ca(TlsSettings(verify="none")):  # nothing to verify: no CA loaded at all
        assert os.environ[file_env] == os.devnull
    with only_the_ca(TlsSettings()), only_the_ca(None):  # the system's CAs: they are the defaults
        assert os.environ[file_env] == "/etc/before.pem" and dir_env not in os.environ
