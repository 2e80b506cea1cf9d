"""Drain notices: a server being stopped on purpose tells the runs on its machine.

Why a file: a run sent straight to several servers (repeated `--server-url`, no router)
learns of nothing else; the servers' supervisor drains a server before it stops it, and the
drain only empties it when the runs send it nothing new. So the supervisor writes one small
file per draining server in the user's state folder on the machine the server runs on
(`gen-tui/servers/draining/PORT.json`, beside the servers' state file; written whole, then
renamed), and removes it when the server answers its health check again (started anew).
Every run on that machine looks at the folder every POLL_S and sends no new request to a
server on this machine whose port has a notice; its requests in flight finish there.

A port names one server on one machine, so a notice applies only to a URL whose host is
this machine (loopback, or its own host name). The files are anyone's who can write to the
folder (0700, the user's own): each is read to MAX_NOTICE_BYTES at most and one whose
content is not a notice is ignored, said in one line.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

NOTICE_FOLDER = "draining"
"""The notices' folder, in the servers' state folder."""
MAX_NOTICE_BYTES = 4096
"""A notice is a few dozen bytes: a bigger file is not one."""
MAX_NOTICES = 256
"""Files looked at in the folder at most (one per server of this machine)."""
POLL_S = 0.5
"""How often a run looks at the notices: a drain is seen within this."""
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_NAME = re.compile(r"^([0-9]{1,5})\.json$")


def local_notice_folder() -> Path:
    """This machine's notices folder (as `servers.state.local_folder` / NOTICE_FOLDER)."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("gen-tui")) / "servers" / NOTICE_FOLDER


def notice_name(port: int) -> str:
    """The file name of the notice of the server on `port`."""
    return f"{port}.json"


def notice_text(port: int, url: str, wait_s: float) -> str:
    """A notice's content: the server on `port` (reached at `url`) drains, `wait_s` at most."""
    data = {"port": port, "url": url[:200], "since": time.time(), "wait_s": wait_s}
    return json.dumps(data)


def write_notice(folder: Path, port: int, url: str, wait_s: float) -> None:
    """Say that the server on `port` (reached at `url`) drains, for `wait_s` at most."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".notice.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(notice_text(port, url, wait_s))
        os.replace(temp, folder / notice_name(port))
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def remove_notice(folder: Path, port: int) -> bool:
    """The server on `port` serves again: its notice goes (whether there was one)."""
    try:
        (folder / notice_name(port)).unlink()
    except FileNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class Notices:
    """What the folder says now: the ports draining, and a line per file that is not a
    notice (its path and why)."""

    ports: frozenset[int]
    bad: tuple[tuple[str, str], ...] = ()


def _port_of(path: Path, port: int) -> str | None:
    """Why the file at `path` (named for `port`) is not a notice; None when it is one."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_NOTICE_BYTES + 1)
    except FileNotFoundError:
        return "gone"
    except OSError as exc:
        return f"unreadable ({exc.strerror or type(exc).__name__})"
    if len(raw) > MAX_NOTICE_BYTES:
        return f"larger than {MAX_NOTICE_BYTES} bytes"
    try:
        data = json.loads(raw)
    except ValueError:
        return "not JSON"
    if not isinstance(data, dict) or data.get("port") != port:
        return "not a drain notice (no port, or not the one of its name)"
    return None


def read_notices(folder: Path) -> Notices:
    """The notices in `folder` (none when it does not exist)."""
    ports: set[int] = set()
    bad: list[tuple[str, str]] = []
    try:
        names = sorted(entry.name for entry in os.scandir(folder))[:MAX_NOTICES]
    except OSError:
        return Notices(frozenset())
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue  # a notice being written (.notice.*), or someone else's file
        port = int(match.group(1))
        why = _port_of(folder / name, port)
        if why is None:
            ports.add(port)
        elif why != "gone":
            bad.append((str(folder / name), why))
    return Notices(frozenset(ports), tuple(bad))


def this_machine() -> set[str]:
    """The host names a URL to a server on this machine may use."""
    names = set(LOCAL_HOSTS)
    try:
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return names


def local_port(url: str, local: set[str]) -> int | None:
    """The port of `url` when its host is this machine (one of `local`); None otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if not host or (host not in local and not host.startswith("127.")):
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return port
