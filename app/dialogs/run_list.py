"""The run list screen (`l`): the generation processes writing the watched folders, and
`k`/`r` on them; Enter (or `i`) opens one run's details (app/dialogs/run_detail.py).

Runs that ended while gen-tui watched stay listed as "ended", so `r` can start one again
exactly as it was launched, with a new token budget.

Runs writing other folders of a watched host (another project of the same user) are hidden:
`k` on the wrong project's run was one keypress away (issue 31, point 2). `o` shows them,
marked "other folder" with their folder in the host column, and a kill of one names the
folder it writes in its confirmation.

A shared GPU box lists every user's runs: another user's is marked in the host column
("gpu-box · user alice"), and `k` and `r` on it are refused at once, naming the owner
(the host refuses them too). `r` shows the whole command and its folder before Enter.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Label, Static

from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen, ResumeTarget, StartScreen
from gen_tui.app.dialogs.run_detail import RunDetailScreen
from gen_tui.app.dialogs.table_screen import ROW_MOVES, TableScreen
from gen_tui.app.host_links import Kill, Resume, ResumeRun, kill_question
from gen_tui.backends.figures import format_count
from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.key_line import KeyLine
from gen_tui.widgets.run_table import RunRow, RunTable

if TYPE_CHECKING:
    from gen_tui.app.host_links import HostLink
    from gen_tui.backends.hosts import RunProcess

REFRESH_S = 1.0


FOLDER_CHARS = 40
"""The most of another folder's path the host column shows, its end (the end tells two
projects' `out` folders apart; Enter shows it whole): the columns after it stay in sight."""


def folder_tail(folder: str, limit: int = FOLDER_CHARS) -> str:
    """`folder`'s last `limit` characters, "…" for the head left out, made safe to show."""
    shown = one_line(folder)
    return shown if len(shown) <= limit else "…" + shown[-(limit - 1) :]


@dataclass(frozen=True)
class Listed:
    """A row of the list: the run, the link that saw it, and where it stands."""

    link: HostLink
    run: RunProcess
    ended: bool
    elsewhere: bool
    """It writes a folder no link watches on its host: another project's run."""


def watched_folders(links: Sequence[HostLink]) -> set[tuple[str, str]]:
    """(host, output folder) of every link: the folders whose runs are listed by default."""
    return {
        (link.monitor.name, link.monitor.output_dir) for link in links if link.monitor is not None
    }


def host_cell(run: RunProcess, elsewhere: bool = False) -> str:
    """The host column: the host, the owner when the run is another user's, and the folder
    it writes when that is not a watched one."""
    cell = run.identity.host
    if not run.mine:
        cell += f" · user {one_line(run.user or f'uid {run.uid}', 32)}"
    if run.output_dir is None:  # why: in its details (Enter) and its kill question
        cell += " · folder unknown"
    elif elsewhere:
        cell += f" · other folder {folder_tail(run.output_dir)}"
    return cell


def refusal(run: RunProcess, what: str) -> str | None:
    """The line refusing `k`/`r` on another user's run (None: the run is ours)."""
    if run.mine:
        return None
    return f"pid {run.pid} belongs to {run.owner}: gen-tui never {what}"


def resume_command(run: RunProcess) -> Callable[[int | None], str]:
    """The command line `r` will run for a token budget: the run's own, budget flag set."""
    from gen_tui.backends.hosts.resume import edited_command

    def command(budget: int | None) -> str:
        argv, _ = edited_command(run, None, run.datasets, budget, None, run.uid)
        return shlex.join(argv)

    return command


def run_key(run: RunProcess) -> str:
    identity = run.identity
    return f"{identity.host}:{identity.pid}:{identity.start_time:.2f}"


class RunsScreen(TableScreen):
    """A table of runs from every host link, refreshed every second."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "k",
            "kill",
            "Kill",
            tooltip="Stop the selected run: SIGTERM, drain, then SIGKILL",
            id="kill",
        ),
        Binding(
            "r",
            "resume",
            "Resume",
            tooltip="Start the selected ended run again, as launched, with a new token budget",
            id="resume",
        ),
        Binding(
            "s",
            "start",
            "Start",
            tooltip="Start a dataset on the selected run's host with a token budget",
            id="start",
        ),
        Binding(
            "i",
            "details",
            "Details",
            tooltip="The selected run whole: command, folders, start, owner (also Enter)",
            id="runs.details",
        ),
        Binding(
            "o",
            "others",
            "Other folders",
            tooltip="Show or hide runs writing folders this panel does not watch",
            id="runs.others",
        ),
        Binding("escape", "close", "Panels", tooltip="Back to the dataset panels", id="runs.close"),
        Binding("l", "close", "Panels", show=False, id="runs"),
        *ROW_MOVES,
    ]
    """The keys that act on a run, the one that opened the list (it closes it) and the
    moves share the dashboard's binding ids: `[keys]` and `vim = true` move them here too,
    so `k` moves with vim and kill is `x` in both (`build_keymap` checks their
    clashes)."""

    def __init__(self, links: list[HostLink], *, readonly: bool = False) -> None:
        super().__init__()
        self.links = links
        self.readonly = readonly
        """--readonly: k, r and s are off here too."""
        self.show_others = False
        """`o`: runs writing folders no link watches are listed too."""
        self.hidden = 0
        """Runs of other folders left out at the last refresh (said in the title)."""
        self._rows: dict[str, Listed] = {}

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # None: shown dimmed and off (False would hide them, where the docs say dimmed).
        return None if self.readonly and action in ("kill", "resume", "start") else True

    def compose(self) -> ComposeResult:
        yield Label("", id="runs-title", markup=False)
        yield Static("", id="runs-hosts", markup=False)
        yield RunTable(id="runs")
        yield KeyLine()

    def on_mount(self) -> None:
        self.refresh_rows()
        self.set_interval(REFRESH_S, self.refresh_rows, name="runs-refresh")
        self.query_one(RunTable).focus()

    def rows(self) -> list[RunRow]:
        rows: list[RunRow] = []
        found: dict[str, Listed] = {}
        watched = watched_folders(self.links)
        hidden: set[str] = set()
        for link in self.links:
            monitor = link.monitor
            if monitor is None:
                continue
            listed = [(r, False) for r in monitor.runs] + [(r, True) for r in monitor.ended]
            for run, ended in listed:
                key = run_key(run)
                if key in found:
                    continue
                elsewhere = (run.identity.host, run.output_dir) not in watched
                if elsewhere and not self.show_others:
                    hidden.add(key)
                    continue
                found[key] = Listed(link, run, ended, elsewhere)
                counting = [link.countdown[n] for n in run.datasets if n in link.countdown]
                state = "ended" if ended else run.state
                if counting and not ended:
                    state = f"stopping {min(counting)}s"
                rows.append(
                    RunRow(
                        key=key,
                        host=host_cell(run, elsewhere),
                        pid=run.pid,
                        state=state,
                        elapsed_s=run.elapsed_s,
                        datasets=run.datasets,
                        command=run.identity.command,
                    )
                )
        self._rows = found
        self.hidden = len(hidden)
        return rows

    def refresh_rows(self) -> None:
        rows = self.rows()
        live = sum(1 for listed in self._rows.values() if not listed.ended)
        title = f" Runs: {live} live, {len(rows) - live} ended"
        if self.hidden:
            title += f" · {self.hidden} in other folders hidden (o shows them)"
        elif self.show_others:
            title += " · other folders shown (o hides them)"
        self.query_one("#runs-title", Label).update(title)
        # Each host's state in full, a line each (wrapped, never cut: this is where a host
        # error the header had to shorten is read). It quotes SSH and host failures: one
        # line per host, no control characters.
        states = [one_line(f"{link.name}: {link.state}") for link in self.links]
        self.query_one("#runs-hosts", Static).update("\n".join(states) or "no host watched")
        self.query_one(RunTable).show(rows)

    def _selected(self) -> Listed | None:
        key = self.query_one(RunTable).selected_key
        return self._rows.get(key) if key is not None else None

    def _picked(self) -> Listed | None:
        """The selected row, or None having said that none is."""
        picked = self._selected()
        if picked is None:
            self.notify("no run selected", severity="warning")
        return picked

    def action_kill(self) -> None:
        if (picked := self._picked()) is None:
            return
        link, run = picked.link, picked.run
        if picked.ended:
            self.notify(f"pid {run.pid} has already ended", severity="warning")
            return
        if (refused := refusal(run, "stops another user's run")) is not None:
            self.notify(refused, severity="error")
            return
        identity = run.identity
        folder = run.written_folder if picked.elsewhere else None
        batches: list[BatchView] = []  # its batches in flight, which the kill cancels
        if link.monitor is not None and not picked.elsewhere:
            for name in run.datasets:
                if (snap := link.monitor.snapshot(name)) is not None:
                    batches.extend(snap.batches)
        question = kill_question(
            identity, run.datasets, "-", link.grace_s, folder=folder, batches=batches
        )
        self.app.push_screen(
            ConfirmScreen("Kill run?", question, "Kill"),
            lambda ok: link.send(Kill(identity)) if ok else None,
        )

    def action_resume(self) -> None:
        if (picked := self._picked()) is None:
            return
        link, run, ended = picked.link, picked.run, picked.ended
        if (refused := refusal(run, "runs another user's command line")) is not None:
            self.notify(refused, severity="error")
            return
        if not ended:
            self.notify(f"pid {run.pid} is still running: k stops it first", severity="warning")
            return
        monitor = link.monitor
        # Our panels' figures are our folder's: another folder's B2 is another dataset.
        snaps = []
        if monitor is not None and not picked.elsewhere:
            snaps = [monitor.snapshot(name) for name in run.datasets]
        # Budgets are per dataset: preview against the one furthest along.
        tokens = max((snap.tokens for snap in snaps if snap is not None), default=0)
        target = ResumeTarget(
            name=", ".join(run.datasets) or f"pid {run.pid}",
            tokens=tokens,
            max_tokens=next((s.max_tokens for s in snaps if s is not None), None),
            max_samples=None,
            tok_s=0.0,
            last_tok_s=max(
                (monitor.last_rate(name) for name in run.datasets if not picked.elsewhere),
                default=0.0,
            )
            if monitor is not None
            else 0.0,
            running=False,
            where=f"on {link.name}, as launched, with the new token budget"
            + (f" (it writes {run.written_folder}, another folder)" if picked.elsewhere else ""),
            command=resume_command(run),
            cwd=run.cwd or "the login directory",
        )

        def decided(budget: int | None) -> None:
            if budget is not None:
                link.send(ResumeRun(run, budget))
                self.notify(f"starting pid {run.pid}'s command again to {format_count(budget)}")

        self.app.push_screen(ResumeScreen(target), decided)

    def action_start(self) -> None:
        picked = self._selected()
        link = picked.link if picked is not None else (self.links[0] if self.links else None)
        if link is None:
            return
        how = (
            "gen-tui runs the host's command template with --datasets and the budget."
            if link.source.has_template
            else "gen-tui reuses the command line of the last run seen writing the dataset "
            "(or named in its lock file), with the new budget."
        )

        def decided(choice: tuple[str, int] | None) -> None:
            if choice is not None:
                name, budget = choice
                link.send(Resume(name, budget, None))
                self.notify(f"starting {name} on {link.name} to {format_count(budget)}")

        self.app.push_screen(StartScreen(link.name, how), decided)

    def action_details(self) -> None:
        if (picked := self._picked()) is None:
            return
        monitor, run = picked.link.monitor, picked.run
        snaps = []  # a live run's datasets, as our panels show them (their batches, cost)
        if monitor is not None and not picked.elsewhere and not picked.ended:
            snaps = [s for name in run.datasets if (s := monitor.snapshot(name)) is not None]
        self.app.push_screen(
            RunDetailScreen(run, ended=picked.ended, elsewhere=picked.elsewhere, snapshots=snaps)
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: its details."""
        event.stop()
        self.action_details()

    def action_others(self) -> None:
        self.show_others = not self.show_others
        self.refresh_rows()
