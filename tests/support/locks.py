"""Whether a dataset's run.lock is held, read as the watcher reads it: for tests that wait
for a run to take its lock or check that a run's end let go of it."""

from __future__ import annotations

import os
from pathlib import Path

from gen_tui.backends import watcher


def is_locked(path: Path) -> bool:
    """Whether a live process holds `path`, read from /proc/locks (never by taking a lock,
    which could make a starting writer's `flock` fail)."""
    return watcher.lock_status(os.fspath(path), watcher.read_lock_table())[0]
