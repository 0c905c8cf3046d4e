"""Certificates for the TLS tests and benchmark, made with the ``openssl`` command line: a CA, a server certificate
it signs for ``127.0.0.1`` and ``localhost``, a client certificate it signs, and an unrelated CA.

The unrelated CA signs nothing the server shows: a client trusting it must refuse the server (the
"wrong CA" tests). Keys are 2048-bit RSA, the certificates valid for a day: made per test session.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_DAYS = "1"


@dataclass(frozen=True)
class TlsFiles:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(folder: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", _DAYS, "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=folder)


def _signed(folder: Path, name: str, subject: str, extensions: str) -> None:
    """``name``.pem and ``name``.key: a certificate for ``subject`` signed by ca.pem."""
    (folder / f"{name}.ext").write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=folder)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", _DAYS, "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=folder)


def make_tls_files(folder: Path) -> TlsFiles:
    folder.mkdir(parents=True, exist_ok=True)
    _ca(folder, "ca")
    _ca(folder, "other-ca")
    _signed(folder, "server", "/CN=localhost",
            "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _signed(folder, "client", "/CN=cdc", "extendedKeyUsage=clientAuth\n")
    return TlsFiles(
        ca=str(folder / "ca.pem"), server_cert=str(folder / "server.pem"), server_key=str(folder / "server.key"),
        client_cert=str(folder / "client.pem"), client_key=str(folder / "client.key"),
        other_ca=str(folder / "other-ca.pem"),
    )
