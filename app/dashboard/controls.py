"""The keys that change a run: `k` kill, `r` resume, `s` start, `p` pause, and `l` the list
of every run on the watched hosts (where k and r act on runs without a panel).

The selected dataset's source decides what `k` and `r` mean (a :class:`Plan`); this object
carries the plan out: says a refusal, or asks what the plan needs (a confirmation, a
budget) and then acts. --readonly turns these keys off in the screen's `check_action`.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

from gen_tui.app.dashboard.board import Board
from gen_tui.app.dashboard.hosted import HostedRuns
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.sources import (
    Action,
    AskBudget,
    AskTarget,
    Confirm,
    Note,
    PanelSource,
    Plan,
)
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.dialogs.plan_target import PlanTargetScreen
from gen_tui.widgets.dataset_panel import PanelView


class ControlledBoard(Board, Protocol):
    """What the controls need of the dashboard, besides the selection: the run sources and
    a redraw after a change."""

    hosted: HostedRuns
    linked: HostLinks
    readonly: bool

    def refresh_view(self) -> None: ...


class Controls:
    """Carries out the board's run-changing keys on its selected dataset."""

    def __init__(self, board: ControlledBoard) -> None:
        self.board = board

    def kill(self) -> None:
        panel = self.board.target()
        if panel is not None:
            self.carry_out(self._source(panel.dataset, "kill").kill(panel.dataset, panel.view))

    def resume(self) -> None:
        from gen_tui.app.dashboard.starting import detached_resume, guarded

        panel = self.board.target()
        if panel is not None:
            view = panel.view or PanelView()
            board = self.board
            detached = detached_resume(board.hosted, board.linked, panel.dataset, view)
            if detached is not None:
                self.carry_out(detached)
                return
            source = self._source(panel.dataset, "resume")
            plan = source.resume(panel.dataset, view)
            if source is board.hosted:  # in this process: not over another's live writer
                plan = guarded(board.hosted, board.linked, panel.dataset, plan)
            self.carry_out(plan)

    def plan_target(self) -> None:
        """`T`: the selected dataset's run's deadline and cap (a planned run's), asked with
        the new plan previewed; the source says how it reaches the run."""
        panel = self.board.target()
        if panel is None:
            return
        name, view = panel.dataset, panel.view or PanelView()
        source = self._source(name, "kill")  # the source that controls its run
        self.carry_out(source.plan_target(name, view))

    def one(self, what: Literal["stop", "pause"]) -> None:
        """`K`, `P`: stop or pause the selected dataset alone, in a run of this process
        (issue 31, request 4). A run on a host has no channel to one of its datasets: only
        signals to its whole process, which `k` sends."""
        panel = self.board.target()
        if panel is None:
            return
        name, hosted = panel.dataset, self.board.hosted
        if hosted.claims(name, "kill"):
            self.carry_out(hosted.stop_one(name) if what == "stop" else hosted.pause_one(name))
        elif name in self.board.linked.remote:
            self.say(self.board.linked.one(name, what))
        else:
            self.say(Note("no run in this process writes it", title=name, severity="warning"))
        self.board.refresh_view()

    def resume_all(self) -> None:
        """`R`: every dataset of the selected dataset's killed run, in one new run (`r`
        resumes the selected one only). A run on a host starts again as launched; for this
        process's runs it is `s`, which starts every configured dataset."""
        panel = self.board.target()
        if panel is None:
            return
        if panel.dataset in self.board.linked.remote and not self.board.hosted.claims(
            panel.dataset, "kill"
        ):
            self.carry_out(self.board.linked.resume_all(panel.dataset))
        else:
            self.start()

    def start(self) -> None:
        """`s`: confirm what starts, where and with which budgets (see `starting`)."""
        from gen_tui.app.dashboard.starting import start_plan

        board = self.board
        now, wall = time.monotonic(), time.time()
        views = {
            name: next((v for s in board.sources if (v := s.view(name, now, wall))), None)
            for name in board.hosted.names
        }
        self.carry_out(start_plan(board.hosted, board.linked, views))

    def pause(self) -> None:
        self.say(self.board.hosted.pause())
        self.board.refresh_view()

    def runs(self) -> None:
        board = self.board
        if not board.linked.links:
            board.notify(
                "No host is watched: start gen-tui with --host TARGET --remote-dir DIR, or "
                "add [[hosts]] to the config.",
                severity="warning",
            )
            return
        from gen_tui.app.dialogs.run_list import RunsScreen

        board.app.push_screen(RunsScreen(board.linked.links, readonly=board.readonly))

    def carry_out(self, plan: Plan) -> None:
        """Say a refusal, or ask what the plan needs to know and then act on it."""
        app = self.board.app
        match plan:
            case Note():
                self.say(plan)
            case Confirm(title=title, body=body, label=label, then=then):
                app.push_screen(
                    ConfirmScreen(title, body, label),
                    lambda ok: self._after(then()) if ok else None,
                )
            case AskBudget(target=target, then=then):
                app.push_screen(
                    ResumeScreen(target),
                    lambda budget: self._after(then(budget)) if budget is not None else None,
                )
            case AskTarget(current=current, where=where, then=then_target):
                app.push_screen(
                    PlanTargetScreen(current, where),
                    lambda chosen: self._after(then_target(chosen)) if chosen else None,
                )

    def say(self, note: Note) -> None:
        self.board.notify(note.text, title=note.title, severity=note.severity, timeout=note.timeout)

    def _after(self, note: Note | None) -> None:
        if note is not None:
            self.say(note)
        self.board.refresh_view()

    def _source(self, name: str, action: Action) -> PanelSource:
        """The source that carries out `action` on `name`; this process's runs by default
        (they explain what they cannot do)."""
        return next((s for s in self.board.sources if s.claims(name, action)), self.board.hosted)
