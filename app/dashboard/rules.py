"""What the dashboard decides, apart from the widgets: layout, staleness, and wording."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gen_tui.backends.figures import format_count
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.widgets.dataset_panel import SHORT_ROWS
from gen_tui.widgets.format import format_duration

PANEL_WIDTH = 38
"""Narrowest column a panel gets; 80 columns hold two, 160 hold four."""
MAX_COLUMNS = 4
COMPACT_ROWS = 5
"""Panels shrink to SHORT_ROWS when compact ones would not all fit, and to TINY_ROWS when
short ones would not: every panel whole beats the last row cut to its title, or a board
that scrolls (9 datasets at 80x24, under the server and GPU lines)."""
ROOMY_ROWS = 9
TALL_ROWS = 13
MIN_LOG_ROWS = 6


# ---- stale detection ----------------------------------------------------------------------


class StaleWatch:
    """Decides when a dataset is stale, from its snapshots and the UI's wall clock.

    Stale: active but no new record for `after_s` (counted from the later of its last
    record and the moment it was seen active, so a resumed or unpaused dataset gets the
    full time), or still writing `after_s` after it crossed its token budget.
    """

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._active_since: dict[str, float] = {}
        self._crossed: dict[str, tuple[float, int]] = {}

    def reset(self, name: str) -> None:
        self._active_since.pop(name, None)
        self._crossed.pop(name, None)

    def check(self, snap: DatasetSnapshot, now: float) -> str:
        """The reason `snap` is stale, or "" if it is not."""
        name = snap.name
        if snap.state is DatasetState.ACTIVE:
            since = self._active_since.setdefault(name, now)
        else:
            self._active_since.pop(name, None)
            since = None
        over = snap.max_tokens is not None and snap.tokens >= snap.max_tokens
        if not over or snap.state.finished:
            self._crossed.pop(name, None)
        else:
            crossed_at, tokens = self._crossed.setdefault(name, (now, snap.tokens))
            if snap.tokens > tokens and now - crossed_at > self.after_s:
                return "still writing past its budget"
        if since is not None:
            quiet = now - max(snap.last_record_at or 0.0, since)
            if quiet > self.after_s:
                return f"no new record for {format_duration(quiet)}"
        return ""


# ---- helpers ------------------------------------------------------------------------------

_COUNT = re.compile(r"(?<![\w.:/,-])\d{4,}(?![\w.:/,-])")


def humanize(text: str) -> str:
    """Engine messages carry raw counts; show them with thousands separators (not ports)."""
    return _COUNT.sub(lambda m: f"{int(m.group()):,}", text)


def crossing_text(budget: int | None, tokens: int) -> str:
    """What a budget crossing says, whoever saw it (the engine here, or a host's records)."""
    of = f"its {format_count(budget)} budget" if budget is not None else "its budget"
    return f"crossed {of} at {tokens:,} tokens"


def names_title(names: Sequence[str]) -> str:
    """Dataset names for a title: a couple by name, more by count."""
    return ", ".join(names) if len(names) <= 2 else f"{len(names)} datasets"


def panel_id(name: str) -> str:
    return "panel-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)


# ---- layout -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How the panels sit: columns, panel size, and whether the events log has room."""

    columns: int
    roomy: bool
    tall: bool
    log: bool
    short: bool = False
    tiny: bool = False

    @property
    def grid_classes(self) -> str:
        return " ".join(
            [f"-cols-{self.columns}"]
            + ["-roomy"] * self.roomy
            + ["-tall"] * self.tall
            + ["-short"] * self.short
            + ["-tiny"] * self.tiny
        )

    @property
    def board_classes(self) -> str:
        return "-with-log" if self.log else ""


def plan_layout(size: tuple[int, int], count: int, extra_rows: int = 0) -> Layout:
    """Two columns at 80 wide, four at 160; panels grow (and a log appears) with height.
    `extra_rows`: the lines above the board besides the header (notice, filter, the
    server and GPU strips)."""
    width, height = size
    count = max(1, count)
    columns = max(1, min(MAX_COLUMNS, width // PANEL_WIDTH, count))
    rows = math.ceil(count / columns)
    chrome = 2 + extra_rows  # header and footer
    roomy = rows * ROOMY_ROWS + chrome + MIN_LOG_ROWS <= height
    tall = rows * TALL_ROWS + chrome + 2 * MIN_LOG_ROWS <= height
    short = rows * COMPACT_ROWS + chrome > height and rows * SHORT_ROWS + chrome <= height
    tiny = rows * SHORT_ROWS + chrome > height
    # The events log whenever compact panels leave it room, not only beside roomy ones: at
    # 120x36 nine compact panels left 16 empty rows and no log, so a kill's outcome, `r`'s
    # new budget and the demo's scaling were said nowhere once their toast went.
    log = roomy or rows * COMPACT_ROWS + chrome + MIN_LOG_ROWS <= height
    return Layout(columns, roomy, tall, log, short, tiny)
