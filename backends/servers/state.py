"""The small state file of the servers gen-tui started: what a reopened panel adopts.

Why a file: the servers are detached and outlive the panel (or `gen-tui servers up`); the
next one must find them again (same pids, not a second copy on the same GPUs) and keep
their restart count, so a server that crashes every ten minutes still ends down after K
restarts an hour however often the panel is reopened. One JSON object, replaced whole
(write to a temporary file, then rename), in the user's own folder.

Two gen-tui processes may write it at once (a panel and `gen-tui servers stop`, two panels):
each change is a read, a change and a write, so each holds an exclusive `flock` on
`servers.json.lock` (a file that is never replaced, unlike the state file) from its read
to its rename; otherwise one's restart or stop would be lost under the other's write.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gen_tui.backends.hosts import RunIdentity
from gen_tui.backends.servers.launcher import Launched

STATE_FILE = "servers.json"
LOCK_FILE = "servers.json.lock"
MAX_STATE_BYTES = 1 << 20
HOUR_S = 3600.0


@dataclass
class Entry:
    """One server's record: the launch gen-tui made last, and its restarts."""

    launcher: str
    launched: Launched | None = None
    restarts: list[float] = field(default_factory=list)
    """Wall-clock times of its restarts (those of the last hour are kept)."""
    total_restarts: int = 0

    def recent(self, now: float | None = None) -> int:
        """Restarts in the last hour."""
        since = (now or time.time()) - HOUR_S
        return sum(1 for at in self.restarts if at > since)


def _launched(data: object) -> Launched | None:
    if not isinstance(data, dict):
        return None
    identity = data.get("identity")
    try:
        if isinstance(identity, dict):
            identity["cmdline"] = tuple(identity.get("cmdline", ()))
            data["identity"] = RunIdentity(**identity)
        return Launched(**data)
    except TypeError:  # a file of another version: not adopted, started anew
        return None


def local_folder() -> Path:
    """Where this machine keeps the servers' state file, logs and start guard: the user's
    state folder (XDG_STATE_HOME on Linux), `gen-tui/servers` in it."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("gen-tui")) / "servers"


class StateFile:
    """The servers' state file in `folder` (made 0700 when missing)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder).expanduser() / STATE_FILE

    def read(self) -> dict[str, Entry]:
        """Every server's entry; an unreadable file is an empty one (nothing adopted)."""
        try:
            with self.path.open("rb") as handle:
                data = json.loads(handle.read(MAX_STATE_BYTES))
        except (OSError, ValueError):
            return {}
        out: dict[str, Entry] = {}
        if not isinstance(data, dict):
            return out
        for name, raw in data.items():
            if not isinstance(raw, dict) or not isinstance(raw.get("launcher"), str):
                continue
            restarts = [float(at) for at in raw.get("restarts", []) if isinstance(at, int | float)]
            total = raw.get("total_restarts", 0)
            out[name] = Entry(
                raw["launcher"],
                _launched(raw.get("launched")),
                restarts,
                total if isinstance(total, int) else 0,
            )
        return out

    def write(self, entries: dict[str, Entry]) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        since = time.time() - HOUR_S
        data: dict[str, Any] = {}
        for name, entry in entries.items():
            entry.restarts = [at for at in entry.restarts if at > since]
            data[name] = asdict(entry)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".servers.")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(temp, self.path)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the state file's lock (exclusive, across processes) for a read-change-write."""
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def entry(self, name: str, launcher: str) -> Entry:
        return self.read().get(name) or Entry(launcher)

    def update(self, name: str, entry: Entry) -> None:
        with self.locked():
            entries = self.read()
            entries[name] = entry
            self.write(entries)

    def note_launch(self, launcher: str, launched: Launched) -> None:
        with self.locked():
            entries = self.read()
            entry = entries.get(launched.name) or Entry(launcher)
            entry.launcher, entry.launched = launcher, launched
            entries[launched.name] = entry
            self.write(entries)

    def note_stop(self, name: str) -> None:
        """It was stopped on purpose: nothing to adopt (its restarts are kept)."""
        with self.locked():
            entries = self.read()
            if name in entries:
                entries[name].launched = None
                self.write(entries)

    def note_restart(self, name: str, launcher: str, at: float | None = None) -> Entry:
        with self.locked():
            entries = self.read()
            entry = entries.get(name) or Entry(launcher)
            entry.restarts.append(at or time.time())
            entry.total_restarts += 1
            entries[name] = entry
            self.write(entries)
        return entry
