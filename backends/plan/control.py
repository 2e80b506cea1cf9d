"""The plan's control file: a new deadline or spend cap for a run that is already going.

A panel that hosts no engine (a headless `gen-tui run`, here or over SSH) changes a run's
deadline or cap by writing `plan-control.json` into one of the run's dataset folders; the
run's planner looks for it every CONTROL_POLL_S and re-plans at once with what it says.
The file comes from whoever can write the folder, so it is read as untrusted: a regular
file, at most CONTROL_MAX_BYTES, each field checked; one that fails says why in one line
and changes nothing. A file written before the run started is an old run's and is ignored.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_tui.backends.figures import format_dollars
from gen_tui.backends.plan.deadline import DeadlineError, parse_deadline
from gen_tui.backends.watcher import BadFile, read_json_object

CONTROL_FILE = "plan-control.json"
CONTROL_MAX_BYTES = 1024
CONTROL_POLL_S = 1.0
"""How often a running plan looks for a new control file (a stat per dataset folder)."""
DEADLINE_CHARS = 16
"""The longest deadline spelled (`2h30m`, `07:30`): more is no deadline."""
NO_DEADLINE = "none"
"""How the dialog and the file spell "no deadline" (and "no cap")."""


class ControlError(ValueError):
    """A control value that cannot be used: the message says which and why, in one line."""


@dataclass(frozen=True)
class PlanTarget:
    """A new deadline and cap: `deadline` as `--deadline` spells it (None: none), `max_cost`
    in dollars (None: no cap). `written_at` is when it was asked (Unix time)."""

    deadline: str | None
    max_cost: float | None
    written_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The control file's fields (`parse_target` reads them back)."""
        return {
            "deadline": self.deadline or NO_DEADLINE,
            "max_cost": self.max_cost,
            "written_at": self.written_at,
        }

    def said(self) -> str:
        """`deadline 07:30, cap $60.00`, for the log line that says the plan's change."""
        cap = f"cap {format_dollars(self.max_cost)}" if self.max_cost is not None else "no cap"
        return f"deadline {self.deadline or 'none'}, {cap}"


def check_deadline(text: str) -> str | None:
    """`text` as a deadline (None: "none" or empty); raise ControlError naming it."""
    spelled = text.strip()
    if not spelled or spelled.lower() == NO_DEADLINE:
        return None
    if len(spelled) > DEADLINE_CHARS:
        raise ControlError(f"deadline: more than {DEADLINE_CHARS} characters")
    try:
        parse_deadline(spelled)
    except DeadlineError as exc:
        raise ControlError(f"deadline {exc}") from None
    return spelled


def check_cost(value: object) -> float | None:
    """`value` (a number or its text; "none" or empty: no cap) as a cap in dollars; raise
    ControlError naming it."""
    if value is None:
        return None
    if isinstance(value, str):
        spelled = value.strip().lstrip("$").replace(",", "")
        if not spelled or spelled.lower() == NO_DEADLINE:
            return None
        try:
            value = float(spelled)
        except ValueError:
            said = spelled[:20]
            raise ControlError(f"cap {said!r}: expected dollars (60, 12.50) or none") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ControlError("cap: expected a number of dollars")
    if not math.isfinite(value) or not 0 <= value <= 1e9:
        raise ControlError(f"cap {value!r}: expected dollars from 0 to 1e9")
    return float(value)


def parse_target(value: Any) -> PlanTarget:
    """A control file's content as a target; raise ControlError saying what is wrong."""
    if not isinstance(value, dict):
        raise ControlError("not a JSON object")
    deadline = value.get("deadline")
    if deadline is not None and not isinstance(deadline, str):
        raise ControlError("deadline: expected text (07:30, 8h or none)")
    written = value.get("written_at")
    if isinstance(written, bool) or not isinstance(written, int | float):
        raise ControlError("written_at: expected a Unix time")
    if not 0 <= written < 1e10:
        raise ControlError("written_at: expected a Unix time")
    return PlanTarget(check_deadline(deadline or ""), check_cost(value.get("max_cost")), written)


def read_target(path: Path) -> PlanTarget | None:
    """The control file at `path` (None: there is none); raise ControlError for one that
    cannot be used (unreadable, too big, of another shape)."""
    try:
        content = read_json_object(str(path), CONTROL_MAX_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, BadFile) as exc:
        raise ControlError(str(exc)) from None
    return parse_target(content)


def target_text(target: PlanTarget) -> str:
    """The control file's content for `target` (one line of JSON, well under the bound):
    the host writes it (backends/hosts/base.py `write_plan_target`)."""
    return json.dumps(target.to_json(), allow_nan=False)


def stamped(deadline: str | None, max_cost: float | None) -> PlanTarget:
    """A target asked now."""
    return PlanTarget(deadline, max_cost, time.time())


def parse_target_text(text: str) -> tuple[str | None, float | None]:
    """The panel's one-line answer `DEADLINE CAP` (`07:30 60`, `8h $45`, `none 60`,
    `2h30m none`) as (deadline, cap); raise ControlError saying what is wrong."""
    words = text.split()
    if len(words) != 2:
        raise ControlError("type a deadline and a cap: 07:30 60, 8h none, none 45")
    deadline, cap = words
    return check_deadline(deadline), check_cost(cap)


def target_words(deadline: str | None, max_cost: float | None) -> str:
    """(deadline, cap) as `parse_target_text` reads them back: the dialog's starting text."""
    cap = NO_DEADLINE if max_cost is None else f"{max_cost:g}"
    return f"{deadline or NO_DEADLINE} {cap}"
