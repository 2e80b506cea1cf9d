"""The servers' history: each event (started, healthy, unhealthy, exited with its code or
signal, restarting, down, failed, draining, stopped) as one JSON line, kept across panels.

Why a file of its own and not each dataset's history.jsonl: a server serves many datasets
(or none yet), and a dataset's history holds its progress points, whose readers count any
other line as a bad one. The servers' history sits beside their state file (the user's
state folder, `gen-tui/servers/history.jsonl`) and follows the same rules as the datasets'
(backends/store/history.py): one `write()` of a whole line to a file opened O_APPEND (two
gen-tui processes append without tearing each other's lines), every text bounded and made
one line (a server's log line is another program's text), and past HISTORY_BYTES the file
is cut to its newest half (under the state file's lock), so a server crashing all night
cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.view import exit_words
from gen_tui.backends.untrusted import one_line

HISTORY_FILE = "history.jsonl"
HISTORY_BYTES = 1 << 20
"""Past this size the file keeps its newest half (an event is about 300 bytes)."""
DETAIL_CHARS = 500
"""The most characters of an event's line kept (it may end with a server's log line)."""
LINE_BYTES = 4096
"""A longer line is none of ours: a reader skips it."""


def event_json(event: ServerEvent) -> dict[str, Any]:
    """The event as its history line holds it (every text one line, bounded)."""
    data: dict[str, Any] = {
        "t": round(event.at, 3),
        "server": one_line(event.name, 64),
        "state": str(event.state),
        "detail": one_line(event.detail, DETAIL_CHARS),
        "ref": one_line(event.ref, 32) if event.ref else None,
        "restarts": event.restarts,
    }
    if event.state is ServerState.EXITED:
        data["exit"] = exit_words(event.detail).removeprefix("exited").lstrip(": ") or None
    return data


class ServerHistory:
    """The history file in `folder` (the state file's), appended to by each event: an
    event sink. A write that fails is given up silently for that event (a gap in the
    history is no harm; the event still reaches the panel, the log and the alerts)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder).expanduser() / HISTORY_FILE
        self.state = StateFile(Path(folder))

    def __call__(self, event: ServerEvent) -> None:
        line = orjson.dumps(event_json(event)) + b"\n"
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > HISTORY_BYTES:
                self._compact()

    def _compact(self) -> None:
        """Keep the newest half (whole lines), replacing the file under the state's lock."""
        with self.state.locked():
            try:
                data = self.path.read_bytes()
            except OSError:
                return
            if len(data) <= HISTORY_BYTES:
                return  # another process compacted it first
            tail = data[len(data) - HISTORY_BYTES // 2 :]
            tail = tail[tail.find(b"\n") + 1 :]
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".history.")
            with os.fdopen(fd, "wb") as handle:
                handle.write(tail)
            os.replace(temp, self.path)

    def read(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The last `limit` events (lines that do not parse, or are too long, skipped)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(max(self.path.stat().st_size - HISTORY_BYTES, 0))
                raw = handle.read(HISTORY_BYTES)
        except OSError:
            return []
        out = []
        for line in raw.splitlines()[-limit:]:
            if len(line) > LINE_BYTES:
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out
