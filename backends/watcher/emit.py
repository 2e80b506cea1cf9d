"""How the watcher speaks: one JSON line at a time on stdout.

Why a module of its own: the watch loop, the telemetry thread and every one-shot mode write
report lines, and two writers must never interleave half a line each.
"""

from __future__ import annotations

import json
import sys
import threading
import typing

_EMIT_LOCK = threading.Lock()


def _emit(payload: dict[str, typing.Any], flush: bool = True) -> None:
    """Write one report line; `flush` False leaves it for `_flush` (the watch loop sends a
    poll's dataset lines at once: 64 writes and 64 wake-ups of the reader became one)."""
    line = json.dumps(payload, separators=(",", ":")) + "\n"
    with _EMIT_LOCK:  # the telemetry thread writes too: never half a line of each
        sys.stdout.write(line)
        if flush:
            sys.stdout.flush()


def _flush() -> None:
    with _EMIT_LOCK:
        sys.stdout.flush()


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""
