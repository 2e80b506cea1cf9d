"""`T`: a planned run's new deadline and spend cap, with the plan they would make shown
before anything is applied (as `r`'s preview shows a budget's time).

One input, `DEADLINE CAP` (`07:30 60`, `8h none`, `none 45`), checked as it is typed in one
line; the preview re-plans from the rates the run last planned with (pure arithmetic: no
I/O, fine on the event loop). The run re-plans from fresh rates once it takes the target.
"""

from __future__ import annotations

import time
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Input, Label

from gen_tui.app.dialogs.notices import HidesNotices
from gen_tui.backends.plan import DeadlineError, parse_deadline
from gen_tui.backends.plan.control import (
    ControlError,
    PlanTarget,
    parse_target_text,
    stamped,
    target_words,
)
from gen_tui.backends.progress.plan_view import PlanView, replanned
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.plan_line import plan_text


class TargetValidator(Validator):
    """`DEADLINE CAP`, each `none` or a value (`parse_target_text`)."""

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_target_text(value)
        except ControlError as exc:
            return self.failure(str(exc))
        return self.success()


def preview_text(
    current: PlanView, deadline: str | None, max_cost: float | None
) -> tuple[str, bool]:
    """The plan the target would make, from `current`'s rates, in the plan line's words;
    and whether it misses its deadline or cap (said in the warning colour)."""
    try:
        deadline_s = parse_deadline(deadline) if deadline is not None else None
    except DeadlineError as exc:
        return str(exc), True
    made = replanned(current, deadline_s, max_cost)
    if made is None:
        return "no preview: the run's plan carries no rates (an older gen-tui)", False
    line = f"would be: {plan_text(made)}"
    if made.flagged and made.note:
        line += f" · {made.note}"
    return line, made.flagged


def deadline_words(deadline_at: float | None, now: float | None = None) -> str | None:
    """A deadline as the input spells it: its time of day within a day, else minutes."""
    if deadline_at is None:
        return None
    left = deadline_at - (time.time() if now is None else now)
    if left <= 0:
        return None
    if left < 86400 - 60:
        return time.strftime("%H:%M", time.localtime(deadline_at))
    return f"{round(left / 60)}m"


class PlanTargetScreen(HidesNotices, ModalScreen[PlanTarget | None]):
    """Ask for a planned run's new deadline and cap; returns the target or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without changing", id="plan.cancel"),
    ]

    def __init__(self, current: PlanView, where: str) -> None:
        super().__init__()
        self.current = current
        self.where = where

    def compose(self) -> ComposeResult:
        current = self.current
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = Content("Deadline and cap")
            yield Label(one_line(f"Now: {plan_text(current)}"), id="plan-current", markup=False)
            where = Label(one_line(f"Applies to {self.where}"), id="plan-where", markup=False)
            where.display = bool(self.where)
            yield where
            yield Label("New deadline and cap (07:30 60, 8h none, none 45):", id="plan-prompt")
            yield Input(
                target_words(deadline_words(current.deadline_at), current.max_cost),
                validators=[TargetValidator()],
                id="plan-target",
                valid_empty=False,
            )
            yield Label("", id="plan-error", markup=False)
            yield Label("", id="plan-preview", markup=False)
            yield Label("Enter applies · Escape cancels", id="plan-help")

    def on_mount(self) -> None:
        self.query_one("#plan-target", Input).focus()

    @on(Input.Changed, "#plan-target")
    def _changed(self, event: Input.Changed) -> None:
        self._show(event.value, event.validation_result)

    def _show(self, value: str, result: ValidationResult | None) -> bool:
        error = self.query_one("#plan-error", Label)
        preview = self.query_one("#plan-preview", Label)
        if result is not None and not result.is_valid:
            error.update(one_line(" ".join(result.failure_descriptions)))
            preview.update("")
            return False
        try:
            deadline, cap = parse_target_text(value)
        except ControlError as exc:
            error.update(one_line(str(exc)))
            preview.update("")
            return False
        error.update("")
        text, flagged = preview_text(self.current, deadline, cap)
        preview.update(one_line(text))
        preview.set_class(flagged, "-flagged")
        return True

    @on(Input.Submitted, "#plan-target")
    def _submitted(self, event: Input.Submitted) -> None:
        if self._show(event.value, event.validation_result):
            deadline, cap = parse_target_text(event.value)
            self.dismiss(stamped(deadline, cap))

    def action_cancel(self) -> None:
        self.dismiss(None)
