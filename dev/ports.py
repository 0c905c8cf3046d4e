"""A free TCP port on loopback, for the throwaway servers the dev tools and the tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice); a server started on it soon after gets it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
