"""The control panel's dialogs: confirmations (kill, quit), the resume and start budgets, help."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, Label, Static

from gen_tui.app.dialogs.notices import HidesNotices
from gen_tui.backends.budget.rules import runs_out_at
from gen_tui.backends.figures import CountError, counted, format_count, parse_count
from gen_tui.backends.untrusted import clean, one_line
from gen_tui.widgets.format import format_duration


class ConfirmScreen(HidesNotices, ModalScreen[bool]):
    """Ask before something irreversible; `y`/Enter confirms, `n`/Escape cancels.

    The body quotes command lines and names from processes and files: it is shown as plain
    text (never markup) without control characters, and so is the title.
    """

    BINDINGS = [
        Binding("y", "confirm", "Yes", tooltip="Go ahead", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", tooltip="Leave things as they are", id="confirm.no"),
        Binding("left,right", "app.focus_next", "Move", show=False),
    ]

    def __init__(self, title: str, body: str, confirm: str, *, danger: bool = True) -> None:
        super().__init__(classes="-danger" if danger else "")
        self.title_text = one_line(title)
        self.body = clean(body)
        self.confirm_label = confirm

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = Content(self.title_text)
            yield Static(self.body, id="confirm-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm_label} \\[y]", id="confirm", variant="error")
                yield Button("Cancel \\[n]", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class BudgetValidator(Validator):
    """A token budget as people type it: `10M`, `2.5e6`, `500k`; parsed by `parse_count`."""

    def validate(self, value: str) -> ValidationResult:
        try:
            budget = parse_count(value, what="budget")
        except CountError as exc:
            return self.failure(str(exc))
        if budget <= 0:
            return self.failure("budget: must be more than 0 tokens")
        return self.success()


@dataclass(frozen=True)
class ResumeTarget:
    """What the resume modal needs to know of a dataset."""

    name: str
    tokens: int
    max_tokens: int | None
    max_samples: int | None
    tok_s: float
    running: bool
    where: str = ""
    """Who will run it: "in this process, sglang at http://...", "on gpu-box, as a new process"."""
    command: Callable[[int | None], str] | None = None
    """The command line that will run, for a budget (None: the budget as launched); shown
    whole before Enter, so nobody starts a command line they have not read."""
    cwd: str = ""
    """The folder it will run in."""
    prompts_left: int | None = None
    """Answers its prompt file can still give (None: unknown)."""
    mean_tokens: float | None = None
    last_tok_s: float = 0.0
    """Its rate when it last produced, for the estimate while `tok_s` is 0 (a stopped or
    finished dataset produces nothing now, yet its last run's pace is the best guess)."""
    others_running: int | None = None
    """Other datasets producing on its server now (None: unknown). Its last run's rate was
    its share beside them; alone it gets the whole server (issue 31: `r` on B2 said "about
    1m28s at 56.8k tok/s", its rate beside seven others, and alone it did the 5M in 8 s)."""
    server_tok_s: float = 0.0
    """The server's rate in the run it last ran in, every dataset's tokens over the time
    requests were in flight (`whole_rate`): what it can expect with no other dataset
    running (0: unknown)."""


def resume_shown(
    preview: tuple[Callable[[int | None], list[str]] | None, str | None], dataset: str
) -> dict[str, Any]:
    """A host's `resume_preview` as the ResumeTarget fields that show it (`command`, `cwd`)."""
    argv_for, cwd = preview
    if argv_for is None:
        lock_words = (
            f"the command line {dataset}'s run.lock names (run only if you alone can write "
            "that file)"
        )
        return {"command": lambda budget: lock_words, "cwd": ""}
    found = argv_for
    return {
        "command": lambda budget: shlex.join(found(budget)),
        "cwd": cwd or "the login directory",
    }


def resume_preview(target: ResumeTarget, budget: int) -> str:
    """One line: what setting `budget` will do, e.g. "3.6M to go, about 1m40s at 36k tok/s"."""
    togo = budget - target.tokens
    if togo <= 0:
        if target.running:
            return (
                f"at or below the {format_count(target.tokens)} tokens written: "
                "it stops dispatching now"
            )
        return f"already reached: {format_count(target.tokens)} tokens are written; nothing to do"
    end = runs_out_at(target.tokens, budget, target.prompts_left, target.mean_tokens)
    short = ""
    if end is not None:
        # The file runs out first: the run ends "exhausted" there, and that is the time.
        short = (
            f"; its prompts run out at ~{format_count(end)} ({target.prompts_left:,} left), "
            f"short of {format_count(budget)}"
        )
        togo = end - target.tokens
    pace, basis = estimate_pace(target)
    if pace > 0:
        eta = format_duration(togo / pace)
        return f"{format_count(togo)} to go, about {eta} at {basis}{short}"
    return f"{format_count(togo)} to go (no rate yet to estimate the time){short}"


def estimate_pace(target: ResumeTarget) -> tuple[float, str]:
    """The tok/s the resume's estimate uses, and what it is based on, said with it: its
    rate now while it runs; with no other dataset running, the server's whole rate (its
    last run's was a share); else its last run's, which the datasets running now share."""
    others = target.others_running
    if target.tok_s > 0:
        pace, basis = target.tok_s, "its current {} tok/s"
    elif others == 0 and target.server_tok_s > 0:
        pace = max(target.server_tok_s, target.last_tok_s)
        basis = "{} tok/s, the server's rate in its last run (nothing else runs now)"
    else:
        pace, basis = target.last_tok_s, "its last run's {} tok/s"
    if pace <= 0:
        return 0.0, ""
    said = basis.format(format_count(float(f"{pace:.3g}")))
    if others:
        said += f", shared with {counted(others, 'running dataset')}: faster once they finish"
    return pace, said


class ResumeScreen(HidesNotices, ModalScreen[int | None]):
    """Set a new token budget for one dataset; returns the budget or None."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without changing", id="resume.cancel"),
    ]

    def __init__(self, target: ResumeTarget) -> None:
        super().__init__()
        self.target = target

    def compose(self) -> ComposeResult:
        t = self.target
        budget = format_count(t.max_tokens) if t.max_tokens is not None else "none"
        samples = f", sample cap {format_count(t.max_samples)}" if t.max_samples else ""
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = Content(one_line(f"Resume {t.name}"))
            yield Label(
                f"{format_count(t.tokens)} tokens written, budget {budget}{samples}",
                id="resume-current",
                markup=False,
            )
            where = Label(one_line(f"Runs {t.where}"), id="resume-where", markup=False)
            where.display = bool(t.where)
            yield where
            command = Static(self._command(None), id="resume-command", markup=False)
            command.display = t.command is not None
            yield command
            cwd = Label(f"In: {one_line(t.cwd)}", id="resume-cwd", markup=False)
            cwd.display = t.command is not None and bool(t.cwd)
            yield cwd
            yield Label("New token budget (10M, 2.5e6, 500k):", id="resume-prompt")
            yield Input(
                placeholder="e.g. 12M",
                validators=[BudgetValidator()],
                id="budget",
                valid_empty=False,
            )
            yield Label("", id="budget-error", markup=False)
            yield Label("", id="budget-preview", markup=False)
            yield Label("Enter resumes · Escape cancels", id="resume-help")

    def on_mount(self) -> None:
        self.query_one("#budget", Input).focus()

    def _command(self, budget: int | None) -> str:
        """ "Command: ...", the whole command line for `budget`, as one clean line."""
        if self.target.command is None:
            return ""
        return f"Command: {one_line(self.target.command(budget))}"

    @on(Input.Changed, "#budget")
    def _changed(self, event: Input.Changed) -> None:
        self._show(event.value, event.validation_result)

    def _show(self, value: str, result: ValidationResult | None) -> bool:
        error = self.query_one("#budget-error", Label)
        preview = self.query_one("#budget-preview", Label)
        if not value.strip():
            error.update("")
            preview.update("")
            return False
        if result is not None and not result.is_valid:
            error.update(one_line(" ".join(result.failure_descriptions)))
            preview.update("")
            return False
        error.update("")
        budget = parse_count(value)
        preview.update(resume_preview(self.target, budget))
        if self.target.command is not None:
            self.query_one("#resume-command", Static).update(self._command(budget))
        return True

    @on(Input.Submitted, "#budget")
    def _submitted(self, event: Input.Submitted) -> None:
        result = event.validation_result
        if not event.value.strip():
            self.query_one("#budget-error", Label).update(
                "budget: type a number like 10M, 2.5e6 or 500k"
            )
            return
        if self._show(event.value, result):
            budget = parse_count(event.value)
            if budget <= self.target.tokens and not self.target.running:
                # The preview says "nothing to do": Enter used to say "resuming to 10M in a
                # new in-process run" all the same, and start a run that did nothing.
                self.query_one("#budget-error", Label).update(
                    f"budget: {format_count(self.target.tokens)} tokens are written already: "
                    "type a larger budget, or Escape"
                )
                return
            self.dismiss(budget)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DatasetNameValidator(Validator):
    """A dataset name as every other part of gen-tui accepts it (`check_dataset_name`)."""

    def validate(self, value: str) -> ValidationResult:
        from gen_tui.backends.store.prompts import DatasetNameError, check_dataset_name

        try:
            check_dataset_name(value)
        except DatasetNameError as exc:
            return self.failure(str(exc))
        return self.success()


class StartScreen(HidesNotices, ModalScreen[tuple[str, int] | None]):
    """Start a dataset on a host with a token budget; returns (dataset, budget) or None."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without starting", id="start.cancel"),
    ]

    def __init__(self, host: str, how: str) -> None:
        super().__init__()
        self.host = host
        self.how = how

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = Content(one_line(f"Start a dataset on {self.host}"))
            yield Label(self.how, id="start-how", markup=False)
            yield Input(placeholder="dataset, e.g. B2_opencodeinstruct", id="dataset",
                        validators=[DatasetNameValidator()], valid_empty=False)  # fmt: skip
            yield Input(placeholder="token budget, e.g. 10M", id="budget",
                        validators=[BudgetValidator()], valid_empty=False)  # fmt: skip
            yield Label("", id="budget-error", markup=False)
            yield Label("Enter starts · Escape cancels", id="start-help")

    def on_mount(self) -> None:
        self.query_one("#dataset", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        name = self.query_one("#dataset", Input)
        budget = self.query_one("#budget", Input)
        error = self.query_one("#budget-error", Label)
        for field, what in ((name, "dataset"), (budget, "budget")):
            result = field.validate(field.value)
            if not field.value.strip() or (result is not None and not result.is_valid):
                reasons = result.failure_descriptions if result is not None else []
                error.update(one_line(" ".join(reasons)) or f"{what}: required")
                field.focus()
                return
        self.dismiss((name.value.strip(), parse_count(budget.value)))

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class HelpRow:
    key: str
    description: str
    detail: str = ""


class HelpScreen(HidesNotices, ModalScreen[None]):
    """Every binding with what it does, in a dialog that scrolls and searches.

    At 80x24 the rows, the badge legend and "Escape closes" are taller than the screen:
    the dialog is a scrolling container with the focus, so ↑ ↓, PageUp/PageDown, Home/End
    and the wheel reach every line; `/` narrows it to the rows that mention some text
    (issue 31 point 4).
    """

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", tooltip="Close help", id="help.close"),
        Binding("slash", "search", "Search", key_display="/", id="help.search"),
    ]

    def __init__(self, rows: Sequence[HelpRow], about: str = "") -> None:
        super().__init__()
        self.rows = tuple(rows)
        self.about = about

    def table(self, needle: str = "") -> Table:
        """The rows that mention `needle` (any case; all of them for "")."""
        needle = needle.strip().lower()
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column()
        for row in self.rows:
            if needle in f"{row.key} {row.description} {row.detail}".lower():
                table.add_row(Text(row.key), Text(row.description), Text(row.detail, style="dim"))
        return table

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="help-scroll") as dialog:
            dialog.border_title = "gen-tui keys"
            dialog.border_subtitle = "↑ ↓ PgUp PgDn scroll · / search"
            search = Input(placeholder="search the keys (Enter: back to scrolling)",
                           id="help-search")  # fmt: skip
            search.display = False
            yield search
            yield Static(self.table(), id="help-table")
            if self.about:
                yield Static(self.about, id="help-about", markup=False)
            yield Label("Escape closes", id="help-close")

    def on_mount(self) -> None:
        self.query_one("#help-scroll", VerticalScroll).focus()

    def on_screen_resume(self) -> None:
        """Kept installed between `?`s: each opens at the top, whole, with the keys to
        scroll."""
        search = self.query_one("#help-search", Input)
        if search.value:
            search.value = ""
        search.display = False
        scroll = self.query_one("#help-scroll", VerticalScroll)
        scroll.scroll_home(animate=False)
        scroll.focus()

    def action_search(self) -> None:
        search = self.query_one("#help-search", Input)
        search.display = True
        search.focus()

    @on(Input.Changed, "#help-search")
    def _narrowed(self, event: Input.Changed) -> None:
        self.query_one("#help-table", Static).update(self.table(event.value))
        about = self.query(Static).filter("#help-about")
        for widget in about:
            widget.display = event.value.strip().lower() in self.about.lower()

    @on(Input.Submitted, "#help-search")
    def _searched(self) -> None:
        self.query_one("#help-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
