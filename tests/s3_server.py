"""An S3 server on loopback for the lake-on-S3 tests: moto's server (``moto[server]``), one bucket.

It runs as a subprocess of its own, not as a thread of the test process: the Spark executors' Python
workers and the killed stream workers are other processes that reach it over HTTP anyway, and a
server in its own process neither competes with the test for the GIL nor dies with a test thread.
The code under test finds it as a user's deployment would: through a lake connection (an ``aws``
connection made of ``variables``, with no AWS variable set), or through the standard AWS variables.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

BUCKET = "bucket"


@dataclass(frozen=True)
class S3Server:
    process: subprocess.Popen[bytes]
    endpoint: str
    bucket: str

    def variables(self) -> dict[str, str]:
        """The environment a client of this server needs: endpoint, test credentials, region, and plain
        http allowed (delta-rs refuses an http endpoint without ``AWS_ALLOW_HTTP``)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",  # noqa: S105  (moto accepts any)
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> object:
        """A boto3 S3 client of this server (boto3 comes with moto)."""
        import boto3

        v = self.variables()
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=v["AWS_REGION"],
                            aws_access_key_id=v["AWS_ACCESS_KEY_ID"], aws_secret_access_key=v["AWS_SECRET_ACCESS_KEY"])

    def keys(self, prefix: str) -> list[str]:
        """Every object key under ``prefix`` in the bucket."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)  # type: ignore[attr-defined]
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(log: Path, bucket: str = BUCKET) -> S3Server:
    """moto's S3 server on 127.0.0.1 and a free port (its request log in ``log``), with ``bucket`` created."""
    port = _free_port()
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()  # noqa: S310  (loopback http)
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto's S3 server did not start on port {port}: see {log}") from None
            time.sleep(0.2)
    server = S3Server(process, endpoint, bucket)
    server.client().create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    return server


def stop(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def reach_only_through(server: S3Server, conn_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS variable at all, in this process and the ones it starts: ``server`` reached only through the
    Airflow ``aws`` connection ``conn_id`` (set in the environment), as a deployment with a lake connection."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    variables = server.variables()
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({
        "conn_type": "aws", "login": variables["AWS_ACCESS_KEY_ID"], "password": variables["AWS_SECRET_ACCESS_KEY"],
        "extra": {"endpoint_url": server.endpoint, "region_name": variables["AWS_REGION"]},
    }))
