"""A UDP socket standing in for the StatsD daemon Airflow's metrics go to, for the tests of the stream's and
the snapshot's metrics (the ``statsd`` fixture points Airflow's ``Stats`` at it)."""

from __future__ import annotations

import socket
from collections import defaultdict

PREFIX = "cdctest"


class StatsdListener:
    """A UDP socket standing in for the StatsD daemon; ``metrics()`` returns what arrived since last asked."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])

    @staticmethod
    def initialise_stats() -> None:
        """What Airflow's task runner does at start: a backend from ``[metrics]`` as configured now."""
        from airflow.sdk.configuration import conf
        from airflow.sdk.observability import stats
        from airflow.sdk.observability.metrics import stats_utils

        stats.initialize(factory=stats_utils.get_stats_factory(),
                         export_legacy_names=conf.getboolean("metrics", "legacy_names_on"))

    def metrics(self) -> dict[str, list[tuple[float, str]]]:
        """Per metric name (prefix and influx tags removed): (value, kind) in arrival order; the
        influx-style tags, if any, stay in ``self.tagged`` per name."""
        self.sock.settimeout(0.5)
        received: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.tagged: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        while True:
            try:
                packet = self.sock.recv(65536).decode()
            except TimeoutError:
                return received
            for line in packet.splitlines():
                stat, _, rest = line.partition(":")
                value, kind = rest.split("|")[:2]
                name, *tags = stat.split(",")
                assert name.startswith(PREFIX + "."), line
                name = name[len(PREFIX) + 1:]
                received[name].append((float(value), kind))
                self.tagged[name].append((dict(t.split("=", 1) for t in tags), float(value)))


def total(values: list[tuple[float, str]], kind: str) -> float:
    assert {k for _, k in values} == {kind}, values
    return sum(v for v, _ in values)
