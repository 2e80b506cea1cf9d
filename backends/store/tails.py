"""The end of a file on a host: a dataset's last records (the sample viewer), a run's log,
and a dataset's history spread over its whole span (the plot view).

Why through the watcher: the record file may be 10 GB on a GPU box behind SSH; the watcher
reads it backwards from its end on that box, and only the last lines cross the link, capped
in size. The same request runs in-process for the local host.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.store.prompt_heads import PromptHeads, prompt_heads

RECORD_TAIL_BYTES = 4 << 20
"""The most bytes of records fetched for the sample viewer (a 32k-token answer with its
ids is about 250 kB, so a dozen of the longest fit)."""
LOG_TAIL_BYTES = 64 << 10
"""The most bytes of a log fetched for one look (`L` polls it while shown)."""
HISTORY_TAIL_LINES = watcher.TAIL_MAX_LINES
"""The most history points fetched for the plot view, spread by the watcher from the file's
first point to its last (`watcher.spread_lines`): a whole night, whatever its length, in as many
points as a plot of 80 to 200 columns can show."""
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
    numbers: tuple[int, ...] = ()
    """Each line's number in the file (counted from `start`), for a `spread` request."""
    start: int = 0
    """Where a `spread` request began reading: 0, or the bytes of a huge file's start."""
    total: int = 0
    """The lines a `spread` request picked `lines` from (0 for a plain tail)."""

    @classmethod
    def parse(cls, report: Mapping[str, Any] | None, limit: int) -> Tail:
        """A watcher's `tail` line, whatever it holds (at most `limit` lines are kept)."""
        if not isinstance(report, Mapping):
            return cls(error="the host answered nothing usable")
        lines = report.get("lines")
        numbers = report.get("numbers")
        kept = tuple(str(line) for line in lines[-limit:]) if isinstance(lines, list) else ()
        if isinstance(numbers, list) and len(numbers) == len(lines or ()):
            numbered = tuple(_count(n) for n in numbers[len(numbers) - len(kept) :])
        else:
            numbered = ()
        return cls(
            lines=kept,
            path=str(report.get("path") or ""),
            size=_count(report.get("size")),
            cut=bool(report.get("cut")),
            error=str(report["error"]) if report.get("error") else None,
            numbers=numbered,
            start=_count(report.get("start")),
            total=_count(report.get("total")),
        )


def _count(value: Any) -> int:
    """A count or size from a host's answer: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def local_tail(spec: Mapping[str, Any], limit: int) -> Tail:
    """A tail request run here, in this thread (blocks on the disk)."""
    return Tail.parse(watcher.tail_request(dict(spec)), limit)


def record_spec(output_dir: str, dataset: str, count: int) -> dict[str, Any]:
    """The tail request for a dataset's last `count` whole records."""
    path = posixpath.join(output_dir, dataset, watcher.RAW_FILE)
    return {"path": path, "lines": count, "max_bytes": RECORD_TAIL_BYTES, "whole": True}


def history_spec(output_dir: str, dataset: str) -> dict[str, Any]:
    """The request for a dataset's history file (`history.py`): at most HISTORY_TAIL_LINES
    points spread over all of it, first and last included, a point being written left out."""
    path = posixpath.join(output_dir, dataset, watcher.HISTORY_FILE)
    return {
        "path": path,
        "lines": HISTORY_TAIL_LINES,
        "max_bytes": HISTORY_TAIL_BYTES,
        "whole": True,
        "spread": True,
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


@dataclass(frozen=True)
class Peek:
    """How to read the end of a dataset's record file (`v`), of its run's log (`L`) and of
    its history (`h`).

    Both block (a disk read, an SSH round trip): the screens call them in thread workers.
    `log` None: the run is this process's, whose log is the events pane.
    """

    records: Callable[[int], Tail]
    log: Callable[[int], Tail] | None = None
    tokenizer: str | None = None
    """The run's tokenizer, to decode answers recorded as ids only (None: not known)."""
    history: Callable[[], Tail] | None = None
    """The end of the dataset's history.jsonl (`h`'s plots); None: not known."""
    prompts: Path | None = None
    """The dataset's prompt file on this machine (`v` shows each answer's prompt head)."""
    no_prompts: str = ""
    """Why `prompts` is None, said in place of the heads."""
    heads: Callable[[Sequence[str]], PromptHeads] | None = None
    """Looks the heads up where the prompt file is, for a run on another host (`prompts`
    is then None): the watcher does it there."""

    def prompt_heads(self, keys: Sequence[str]) -> PromptHeads:
        """The prompt heads of the samples `keys`, wherever the prompt file is (blocks)."""
        if self.heads is not None:
            return self.heads(keys)
        return prompt_heads(self.prompts, keys, self.no_prompts)
