"""What `s` means: always a question first, saying what will start, where, and with which
budgets (issue 31, defect 5 and request 5).

Why a question: `s` used to start the whole configured run at once, and after everything
had finished it silently began again from the config, dropping the budgets set with `r`.
Where the configured run can start as a detached `gen-tui run` process (a config file on
this machine, watched through a host link with its run command), it does, through the same
guarded start as `r` on a host: quitting the panel then leaves it running. Otherwise (the
demo, a run source without a file) it runs in this process, as before.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence

from gen_tui.app.dashboard.hosted import Budget, HostedRuns
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.sources import AskBudget, Confirm, Note, Plan
from gen_tui.app.host_links import HostLink, Start
from gen_tui.backends.figures import format_count
from gen_tui.backends.hosts.argv import template_argv
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.dataset_panel import PanelView

NO_BUDGET: Budget = (None, None)


def groups(names: Sequence[str], budgets: Mapping[str, Budget]) -> list[tuple[Budget, list[str]]]:
    """The datasets by the budget they start with (the config's own: `NO_BUDGET`), in
    order: one run per budget, since a run's budget flags hold for all its datasets."""
    grouped: dict[Budget, list[str]] = {}
    for name in names:
        grouped.setdefault(budgets.get(name, NO_BUDGET), []).append(name)
    return list(grouped.items())


def _budget_words(budget: Budget) -> str:
    tokens, samples = budget
    if tokens is None and samples is None:
        return "the config's budgets"
    said = [
        f"{format_count(tokens)} tokens" if tokens else "",
        f"{samples:,} samples" if samples else "",
    ]
    return " and ".join(word for word in said if word) + " (set with r)"


def all_finished(names: Sequence[str], views: Mapping[str, PanelView | None]) -> bool:
    """Whether every dataset has a snapshot and is finished (at its budget, out of prompts).
    One never started is not: its first start is no "start again" (a new user's first `s`
    was asked "Start again? Every dataset has finished" of a dataset shown "not started")."""
    snaps = [view.snapshot if view is not None else None for view in map(views.get, names)]
    return bool(names) and all(
        snap is not None and snap.state.finished and snap.state is not DatasetState.NOT_STARTED
        for snap in snaps
    )


def _title(finished: bool) -> str:
    return "Start again?" if finished else "Start the run?"


def _again(finished: bool) -> str:
    """The first line when every dataset has finished: `s` starts them all over."""
    return (
        "Every dataset has finished (budget reached or prompts done): this starts them again.\n"
        if finished
        else ""
    )


def starter(linked: HostLinks, names: Sequence[str]) -> HostLink | None:
    """The link that can start `names` detached: a connected one with a run command that
    watches them (a folder no run has made yet is not watched: the run starts here then)."""
    for link in linked.links:
        usable = link.source.has_template and link.state == "connected"
        if usable and set(names) <= set(link.datasets):
            return link
    return None


def live_writer(hosted: HostedRuns, linked: HostLinks, names: Sequence[str]) -> Note | None:
    """Why `names` must not start in this process: a run of another process seen writing
    one of them in the configured output folder (a detached run `s` started, perhaps from
    a panel since quit), said in one line with its pid; None if no link sees one.

    `r` and `s` start in this process when the link to that folder cannot start them
    detached at that moment (still connecting, its stream stale, the folder not there
    yet); the run then failed on the dataset's lock. The link's last survey still names
    the writer, and by the time a budget is typed it has usually surveyed again: both
    moments ask here (issue 31)."""
    folder = hosted.output_dir
    if folder is None:
        return None
    for link in linked.links:
        monitor = link.monitor
        if link.source.remote or monitor is None:
            continue
        if os.path.normpath(monitor.output_dir) != os.path.normpath(folder):
            continue
        for name in names:
            writer = monitor.writer(name)
            if writer is not None and writer.pid != os.getpid():
                return Note(
                    f"pid {writer.pid} still writes it: press k first (a second writer is refused)",
                    title=name,
                    severity="warning",
                )
    return None


def guarded(hosted: HostedRuns, linked: HostLinks, name: str, plan: Plan) -> Plan:
    """`r`'s in-process plan for `name`, refused at once or once its budget is typed if a
    run of another process writes it (`live_writer`); a budget for this process's live
    run of it is only a budget change, and goes through."""

    def running_here() -> bool:
        run = hosted.owner.get(name)
        return run is not None and run.active

    if running_here() or not isinstance(plan, AskBudget):
        return plan
    refused = live_writer(hosted, linked, [name])
    if refused is not None:
        return refused
    ask = plan

    def then(budget: int) -> Note | None:
        if not running_here():
            late = live_writer(hosted, linked, [name])
            if late is not None:
                return late
        return ask.then(budget)

    return AskBudget(ask.target, then)


def start_plan(
    hosted: HostedRuns, linked: HostLinks, views: Mapping[str, PanelView | None]
) -> Note | Confirm:
    """`s`: what would start, to confirm; or why nothing does."""
    names = hosted.names
    if not names:
        return Note("Nothing to start: no run is configured.", severity="warning")
    if hosted.active():
        return Note("A run is already active in this process (k stops it).")
    finished = all_finished(names, views)
    link = starter(linked, names)
    if link is not None:
        return _detached(link, names, hosted.budgets, finished)
    refused = live_writer(hosted, linked, names)
    if refused is not None:
        return refused
    lines = [
        f"{one_line(', '.join(group), 300)}: {_budget_words(budget)}"
        for budget, group in groups(names, hosted.budgets)
    ]
    body = _again(finished) + "Runs in this process: quitting the panel stops it.\n"
    body += "\n".join(lines)
    return Confirm(_title(finished), body, "Start", lambda: _in_process(hosted, linked))


def _in_process(hosted: HostedRuns, linked: HostLinks) -> Note:
    refused = live_writer(hosted, linked, hosted.names)  # seen while the question was open
    if refused is not None:
        return refused
    if hosted.start_all() is None:
        return Note("Nothing to start: no run is configured.", severity="warning")
    return Note("starting the configured run in this process")


def _detached(
    link: HostLink, names: Sequence[str], budgets: Mapping[str, Budget], finished: bool
) -> Note | Confirm:
    monitor = link.monitor
    template = getattr(monitor.host, "template", None) if monitor is not None else None
    if monitor is None or template is None:
        return Note(f"{link.name}: {link.state}; try s again in a moment", severity="warning")
    writing = [name for name in names if monitor.writer(name) is not None]
    if writing:
        return Note(
            f"{', '.join(writing)}: a run already writes it (k stops it); nothing was started",
            severity="warning",
        )
    planned = groups(names, budgets)
    commands = [
        shlex.join(template_argv(template, group, budget[0], budget[1]))
        for budget, group in planned
    ]
    body = _again(finished) + (
        f"On {one_line(link.name, 80)}, as a detached process: quitting the panel leaves it "
        "running (k stops it).\n" + "\n".join(one_line(command, 500) for command in commands)
    )

    def send() -> Note:
        for budget, group in planned:
            link.send(Start(tuple(group), budget[0], budget[1]))
        return Note(f"starting {len(planned)} detached run(s) on {link.name}")

    then: Callable[[], Note | None] = send
    return Confirm(_title(finished), body, "Start", then)


def detached_resume(
    hosted: HostedRuns, linked: HostLinks, name: str, view: PanelView
) -> Plan | None:
    """`r` on a configured dataset no run of this process has, where `s` would start it
    detached: a detached start of it alone too (the host link's resume, through the same
    guarded start), its budget kept for the next `s`. None: `r` is this process's."""
    run = hosted.owner.get(name)
    if (run is not None and run.active) or name not in hosted.names:
        return None
    link = starter(linked, [name])
    if link is None or linked.remote.get(name) is not link:
        return None
    plan = linked.resume(name, view)
    if not isinstance(plan, AskBudget):
        return plan
    ask = plan

    def then(budget: int) -> Note | None:
        hosted.budgets[name] = (budget, ask.target.max_samples)
        return ask.then(budget)

    return AskBudget(ask.target, then)
