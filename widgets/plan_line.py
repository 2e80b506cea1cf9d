"""The fleet plan under the header, in one line: what each lane takes, when the run ends and
what it costs against the cap (issue 34):

    plan box 61M by 07:40 · api 31M $43 by 07:12 · finish 07:28 · $43 of $60 · deadline 07:30

Said in the warning colour (the `-flagged` class) when the plan misses the deadline or passes
the cap (or cannot be made at all), with the planner's note after it. Hidden while no run on
the panel has a plan. Plain text (the lane names and the note come from a progress.json:
untrusted, cleaned there), drawn as a `Text`, never as markup.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gen_tui.backends.figures import format_count, format_dollars
from gen_tui.backends.progress.plan_view import PlanView


def clock(at: float | None, now: float | None = None) -> str:
    """`at` as the time of day it falls on (`07:28`; `tomorrow 07:28` past the next
    midnight); "never" when unknown."""
    if at is None:
        return "never"
    when = time.localtime(at)
    today = time.localtime(time.time() if now is None else now)
    shown = time.strftime("%H:%M", when)
    if when.tm_yday != today.tm_yday or when.tm_year != today.tm_year:
        days = round((at - (time.time() if now is None else now)) / 86400)
        return f"{shown} +{days}d" if days > 1 else f"tomorrow {shown}"
    return shown


def plan_text(plan: PlanView, now: float | None = None) -> str:
    """`plan` in one line (without the leading "plan")."""
    parts = []
    for lane in plan.lanes:
        if lane.tokens <= 0:
            continue
        part = f"{lane.name} {format_count(lane.tokens)}"
        if lane.cost > 0:
            part += f" {format_dollars(lane.cost)}"
        if lane.finish_at is not None:
            part += f" by {clock(lane.finish_at, now)}"
        parts.append(part)
    if plan.status == "stalled":
        parts.append("no lane is up")
    else:
        parts.append(f"finish {clock(plan.finish_at, now)}")
    spent = format_dollars(plan.cost)
    if plan.max_cost is not None:
        spent += f" of {format_dollars(plan.max_cost)}"
    parts.append(spent)
    if plan.deadline_at is not None:
        parts.append(f"deadline {clock(plan.deadline_at, now)}")
    return " · ".join(parts)


def newest(plans: Iterable[tuple[object, PlanView | None]]) -> tuple[PlanView, int] | None:
    """The newest of `plans`, each with the run it is of (its host and pid, say: each of a
    run's datasets carries its plan), and how many other planned runs there are."""
    runs: dict[object, PlanView] = {}
    for run, plan in plans:
        if plan is not None and (run not in runs or plan.made_at > runs[run].made_at):
            runs[run] = plan
    if not runs:
        return None
    return max(runs.values(), key=lambda plan: plan.made_at), len(runs) - 1


class PlanLine(Widget):
    """The plan of the newest planned run on the panel; hidden while there is none."""

    DEFAULT_CSS = """
    PlanLine { height: 1; padding: 0 1; }
    PlanLine.-flagged { color: $warning; text-style: bold; }
    """

    view: reactive[PlanView | None] = reactive(None, layout=False)
    others: reactive[int] = reactive(0)

    def show(self, plans: Iterable[tuple[object, PlanView | None]]) -> None:
        """Show the newest of `plans` (see `newest`; only when changed: an equal view costs
        no redraw)."""
        found = newest(plans)
        plan, others = found if found is not None else (None, 0)
        if plan != self.view:
            self.view = plan
        if others != self.others:
            self.others = others
        self.set_class(plan is not None and plan.flagged, "-flagged")
        self.display = plan is not None

    @property
    def line_count(self) -> int:
        """The lines it takes above the board (0 while hidden): the layout's to plan for."""
        return 1 if self.view is not None else 0

    @property
    def flagged(self) -> bool:
        return self.view is not None and self.view.flagged

    def render(self) -> Text:
        plan = self.view
        if plan is None:
            return Text("")
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("plan ", style="bold")  # (Text's own style would be the whole line's)
        line.append(plan_text(plan))
        if plan.flagged and plan.note:
            line.append(f" · {plan.note}")
        if self.others:
            line.append(f" (+{self.others} more planned run{'s' * (self.others > 1)})")
        return line
