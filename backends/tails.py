"""The end of a file on a host: a dataset's last records (the sample viewer), a run's log.

Why through the watcher: the record file may be 10 GB on a GPU box behind SSH; the watcher
reads it backwards from its end on that box, and only the last lines cross the link, capped
in size. The same request runs in-process for the local host.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gen_tui.backends import watcher

RECORD_TAIL_BYTES = 4 << 20
"""The most bytes of records fetched for the sample viewer (a 32k-token answer with its
ids is about 250 kB, so a dozen of the longest fit)."""
LOG_TAIL_BYTES = 64 << 10
"""The most bytes of a log fetched for one look (`L` polls it while shown)."""
HISTORY_TAIL_LINES = watcher.TAIL_MAX_LINES
"""The most history points fetched for the plot view: at a point every 5 s, the last 80
minutes of a file not yet compacted; after compaction (an hour at full pace, then one a
minute) the last few hours."""
HISTORY_TAIL_BYTES = 512 << 10
"""The byte cap of that fetch (a point is about 150 bytes: 1,000 fit three times over)."""


@dataclass(frozen=True)
class Tail:
    """The last lines of a file on a host, or why there are none."""

    lines: tuple[str, ...] = ()
    path: str = ""
    size: int = 0
    cut: bool = False
    """Fewer lines than asked because the size cap was reached."""
    error: str | None = None

    @classmethod
    def parse(cls, report: Mapping[str, Any] | None, limit: int) -> Tail:
        """A watcher's `tail` line, whatever it holds (at most `limit` lines are kept)."""
        if not isinstance(report, Mapping):
            return cls(error="the host answered nothing usable")
        lines = report.get("lines")
        size = report.get("size")
        return cls(
            lines=tuple(str(line) for line in lines[-limit:]) if isinstance(lines, list) else (),
            path=str(report.get("path") or ""),
            size=size if isinstance(size, int) and not isinstance(size, bool) else 0,
            cut=bool(report.get("cut")),
            error=str(report["error"]) if report.get("error") else None,
        )


def local_tail(spec: Mapping[str, Any], limit: int) -> Tail:
    """A tail request run here, in this thread (blocks on the disk)."""
    return Tail.parse(watcher.tail_request(dict(spec)), limit)


def record_spec(output_dir: str, dataset: str, count: int) -> dict[str, Any]:
    """The tail request for a dataset's last `count` whole records."""
    path = posixpath.join(output_dir, dataset, watcher.RAW_FILE)
    return {"path": path, "lines": count, "max_bytes": RECORD_TAIL_BYTES, "whole": True}


def history_spec(output_dir: str, dataset: str) -> dict[str, Any]:
    """The tail request for the end of a dataset's history file (`history.py`)."""
    path = posixpath.join(output_dir, dataset, watcher.HISTORY_FILE)
    return {
        "path": path,
        "lines": HISTORY_TAIL_LINES,
        "max_bytes": HISTORY_TAIL_BYTES,
        "whole": True,
    }


def log_spec(output_dir: str, dataset: str, pid: int | None, lines: int) -> dict[str, Any]:
    """The tail request for the log of the run writing `dataset` (see `watcher.log_of`)."""
    return {
        "pid": pid,
        "dataset": dataset,
        "output_dir": output_dir,
        "lines": lines,
        "max_bytes": LOG_TAIL_BYTES,
    }
