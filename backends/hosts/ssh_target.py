"""Where and how to connect over SSH: a target as people type it and the client's options.

Apart from the connection (`connection.py`) so that the host-key check (`host_keys.py`),
which the connection calls, can name them without importing it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_KEEPALIVE_S = 2.0
DEFAULT_KEEPALIVE_COUNT = 3
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class SSHError(Exception):
    """A connection problem; the message says what happened and what to do about it."""


_TARGET = re.compile(
    r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?$"
)


@dataclass(frozen=True)
class Target:
    """Where to connect: a config alias or host name, with an optional user and port."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        """Parse `alias`, `host`, `user@host`, `user@host:port` or `user@[v6addr]:port`."""
        match = _TARGET.match(text.strip())
        if not match:
            raise SSHError(f"SSH target {text!r} is not an ~/.ssh/config alias or user@host[:port]")
        host = match["host"]
        if host.startswith("["):
            host = host[1:-1]
        port = int(match["port"]) if match["port"] else None
        if port is not None and not 0 < port < 65536:
            raise SSHError(f"SSH target {text!r}: port {port} is out of range")
        return cls(host=host, user=match["user"], port=port)

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port else ""
        return f"{user}{host}{port}"


@dataclass(frozen=True)
class SSHOptions:
    """Client settings; every None means "what `ssh` would use" (config, agent, known_hosts).

    `known_hosts` may point at another file (tests do), but can never switch verification off.
    """

    config_files: tuple[str, ...] | None = None
    known_hosts: str | None = None
    client_keys: tuple[str, ...] | None = None
    use_agent: bool = True
    keepalive_interval_s: float = DEFAULT_KEEPALIVE_S
    keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    def where_kwargs(self, target: Target) -> dict[str, object]:
        """Where `target` is, as asyncssh reads it: host, port, user and the config files
        (`()` is asyncssh's "the default ~/.ssh/config"; its options class alone would read
        no config at all)."""
        kwargs: dict[str, object] = {
            "host": target.host,
            "config": () if self.config_files is None else list(self.config_files),
        }
        if target.port is not None:
            kwargs["port"] = target.port
        if target.user is not None:
            kwargs["username"] = target.user
        return kwargs

    def connect_kwargs(self, target: Target) -> dict[str, object]:
        kwargs = self.where_kwargs(target) | {
            "keepalive_interval": self.keepalive_interval_s,
            "keepalive_count_max": self.keepalive_count_max,
            "connect_timeout": self.connect_timeout_s,
        }
        if self.known_hosts is not None:
            kwargs["known_hosts"] = self.known_hosts
        if self.client_keys is not None:
            kwargs["client_keys"] = list(self.client_keys)
        if not self.use_agent:
            kwargs["agent_path"] = None
        return kwargs
