"""A free loopback port: the one helper every test that starts a server needs."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS's pick; a race with another binder is
    possible in principle, and the servers' own start errors say so if it happens)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
