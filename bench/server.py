"""What the benchmarks share: a throwaway MariaDB per run (stopped however the run ends) and options."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dev import mariadb


@contextlib.contextmanager
def throwaway_server(port: int) -> Iterator[mariadb.MariaDbServer]:
    """A server with an empty database ``bench``."""
    with tempfile.TemporaryDirectory(prefix="bench-mariadb-") as base:
        server = mariadb.start(Path(base), port)
        try:
            with server.admin_connect().cursor() as cur:
                cur.execute("CREATE DATABASE bench")
            yield server
        finally:
            mariadb.stop(Path(base))


def bench_arguments(description: str | None, argv: list[str] | None, port: int) -> argparse.Namespace:
    """The options every benchmark takes: table size, chunk size, and the throwaway server's port."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--port", type=int, default=port)
    return parser.parse_args(argv)
