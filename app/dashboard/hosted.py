"""Panels fed by the engine this process hosts: its runs, and what `k`, `r`, `s`, `p` do.

The runs themselves live in worker threads (see `gen_tui.app.engine_run`); this source only
reads their latest snapshots and sends them controls, so every method here is UI-thread work
that never blocks. Starting a run's thread is the app's job (`launch`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from textual.worker import WorkerState

from gen_tui.app.dashboard.rules import StaleWatch, names_title
from gen_tui.app.dashboard.sources import (
    NO_PLAN,
    Action,
    Activity,
    AskBudget,
    AskTarget,
    Confirm,
    Note,
    PanelSource,
)
from gen_tui.app.dialogs.modals import ResumeTarget
from gen_tui.app.engine_run import Calibration, ConfigSource, HostedRun, RunSource
from gen_tui.backends.config.commands import Pause, SetBudget, SetPlanTarget, Stop
from gen_tui.backends.config.run import DatasetSpec, EngineError
from gen_tui.backends.figures import counted, format_count
from gen_tui.backends.plan.control import PlanTarget
from gen_tui.backends.progress.batches import cancel_note
from gen_tui.backends.progress.snapshot import (
    RunSnapshot,
    run_rate,
    whole_rate,
)
from gen_tui.backends.progress.summary import summary_line
from gen_tui.backends.store.tails import (
    HISTORY_TAIL_LINES,
    Peek,
    Tail,
    history_spec,
    local_tail,
    record_spec,
)
from gen_tui.widgets.dataset_panel import PanelView, producing, shown_rates

Budget = tuple[int | None, int | None]
"""(max_tokens, max_samples) a dataset started alone runs to."""


@dataclass
class Ending:
    """How a run ended, for the app to report: toasts, event lines, a bug's traceback."""

    notes: list[Note] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    trace: str = ""


class HostedRuns(PanelSource):
    """Every engine run this process started, and the configured source it starts them from.

    `owner` maps a dataset to the latest run that ran it: once a run has shown a panel, that
    panel stays its view (its outcome, its failure) even after it has ended.
    """

    def __init__(
        self,
        source: RunSource | None,
        stale: StaleWatch,
        launch: Callable[[HostedRun], None],
    ) -> None:
        self.source = source
        self.stale = stale
        self.launch = launch
        self.runs: list[HostedRun] = []
        self.owner: dict[str, HostedRun] = {}
        self.budgets: dict[str, Budget] = {}
        """Budgets set with `r` this session: `s` starts with them, not the config's."""
        self.header_note = ""
        """What a calibration asked the header to keep saying (empty: none applied)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Datasets this process can run itself (its configured source)."""
        return self.source.names if self.source is not None else ()

    @property
    def output_dir(self) -> str | None:
        """The folder the configured run writes (a config file's); None without one."""
        if isinstance(self.source, ConfigSource):
            return str(self.source.config.output_dir)
        return None

    def active(self) -> list[HostedRun]:
        return [run for run in self.runs if run.active]

    # starting and steering

    def start(self, only: str | None = None, budget: Budget | None = None) -> HostedRun | None:
        """A new run of the configured source (or of one dataset of it); None without one."""
        if self.source is None:
            return None
        run = HostedRun(len(self.runs) + 1, self.source, only, budget)
        self.runs.append(run)
        for name in run.names:
            self.owner[name] = run
            self.stale.reset(name)
        self.launch(run)
        return run

    def start_all(self) -> HostedRun | None:
        """`s` in this process: the configured run, with the budgets set with `r` this
        session (queued until its engine exists)."""
        run = self.start()
        if run is not None:
            for name, (tokens, samples) in self.budgets.items():
                if name in run.names:
                    run.control(SetBudget(name, tokens, samples))
        return run

    def pause(self) -> Note:
        """`p`: hold or release dispatch in every run that is not stopping."""
        active = [run for run in self.active() if not run.stopping]
        if not active:
            return Note("Nothing to pause: no run is active in this process.")
        paused = not any(run.paused for run in active)
        for run in active:
            run.paused = paused
            run.was_paused = run.was_paused or paused
            run.control(Pause(paused))
        return Note("dispatch paused (in-flight requests finish)" if paused else "dispatch resumed")

    def plan_target(self, name: str, view: PanelView) -> Note | AskTarget:
        """`T`: a new deadline and cap for `name`'s run, handed to its engine (which
        re-plans at once: the plan line shows it at the next refresh)."""
        run = self.owner.get(name)
        snap = view.snapshot
        if run is None or not run.active or run.stopping:
            return Note("its run is not running (or is already stopping)", title=name)
        if snap is None or snap.plan is None:
            return Note(NO_PLAN, title=name, severity="warning")

        def then(target: PlanTarget) -> Note:
            run.control(SetPlanTarget(target.deadline, target.max_cost, target.written_at))
            return Note(f"plan target sent: {target.said()}", title=name)

        return AskTarget(snap.plan, f"this process's run of {', '.join(run.names)}", then)

    def stop_one(self, name: str) -> Note | Confirm:
        """`K`: stop `name` alone in its run (the others go on); asked first."""
        run = self.owner.get(name)
        if run is None or not run.active or run.stopping:
            return Note("its run is not running (or is already stopping)", title=name)
        others = [other for other in run.names if other != name]
        goes_on = f"The run goes on with {', '.join(others)}." if others else "The run then ends."
        return Confirm(
            f"Stop {name} alone?",
            f"No new requests for {name}; its in-flight answers finish and it ends as "
            f"stopped. {goes_on}\nr resumes it later.",
            "Stop",
            lambda: self._stop_one(run, name),
        )

    @staticmethod
    def _stop_one(run: HostedRun, name: str) -> Note:
        run.control(Stop(name))
        run.held.discard(name)
        return Note("stopping alone: its in-flight answers finish", title=name)

    def pause_one(self, name: str) -> Note:
        """`P`: hold or release `name` alone in its run (the others go on)."""
        run = self.owner.get(name)
        if run is None or not run.active or run.stopping:
            return Note("its run is not running (or is already stopping)", title=name)
        paused = name not in run.held
        (run.held.add if paused else run.held.discard)(name)
        run.was_paused = run.was_paused or paused
        run.control(Pause(paused, name))
        return Note("paused alone (in-flight requests finish)" if paused else "resumed", title=name)

    def tick(self, now: float) -> Calibration | None:
        """The refresh's housekeeping: abort runs whose drain ran out, apply calibrations.

        Returns the last calibration applied, if any.
        """
        applied = None
        for run in self.active():
            remaining = run.countdown(now)
            if remaining is not None and remaining <= 0 and not run.escalated:
                run.abort()
            applied = self._calibrate(run, now) or applied
        return applied

    def _calibrate(self, run: HostedRun, now: float) -> Calibration | None:
        if run.only is not None or run.latest is None or run.stop_at is not None:
            return None
        if run.was_paused:  # a pause says nothing about the machine's speed
            return None
        result = run.source.calibrate(run.latest, now - run.started)
        if result is None:
            return None
        for name, tokens in result.budgets.items():
            snap = run.dataset(name)
            run.control(SetBudget(name, tokens, snap.max_samples if snap else None))
        self.header_note = result.header or self.header_note
        return result

    def settle(
        self,
        run: HostedRun,
        state: WorkerState,
        result: RunSnapshot | None,
        error: BaseException | None,
    ) -> Ending | None:
        """Record how `run`'s worker ended; None while it has not (it is still running)."""
        ending = Ending()
        if state is WorkerState.SUCCESS:
            if result is not None:
                run.latest = result
                ending.events.append(("info", summary_line(result)))
            engine = run.engine
            if run.stop_at is not None:
                run.outcome = "aborted" if engine is not None and engine.aborted else "stopped"
                aborted = run.outcome == "aborted"
                ending.notes.append(
                    Note(
                        "in-flight requests aborted; their samples run again on resume"
                        if aborted
                        else "in-flight requests drained; everything completed is on disk",
                        title=f"{names_title(run.names)}: run {run.outcome}",
                        severity="warning" if aborted else "information",
                    )
                )
            else:
                run.outcome = None
        elif state is WorkerState.ERROR:
            if isinstance(error, EngineError):
                run.failure = str(error)
            else:
                run.failure = f"{type(error).__name__}: {error}"
                ending.trace = (
                    "".join(traceback.format_exception(error)) if error else "worker error"
                )
            ending.notes.append(Note(run.failure, title="run failed", severity="error", timeout=15))
            ending.events.append(("error", run.failure))
        elif state is WorkerState.CANCELLED:
            run.failure = run.failure or "cancelled"
        else:
            return None
        run.done.set()
        return ending

    # PanelSource

    def view(self, name: str, now: float, wall: float) -> PanelView | None:
        run = self.owner.get(name)
        if run is None:
            return None
        if run.failure is not None:
            return PanelView(run.dataset(name), failure=run.failure)
        snap = run.dataset(name)
        if snap is None:
            return PanelView(pending="starting" if run.active else "idle")
        reason = self.stale.check(snap, wall) if run.active else ""
        return PanelView(
            snap,
            stale=bool(reason),
            stale_reason=reason,
            countdown_s=run.countdown(now),
            outcome=run.outcome,
        )

    def claims(self, name: str, action: Action) -> bool:
        run = self.owner.get(name)
        if run is not None and run.active:
            return True
        return action == "resume" and name in self.names

    def kill(self, name: str, view: PanelView | None) -> Note | Confirm:
        run = self.owner.get(name)
        if run is None or not run.active:
            writer = view.snapshot if view is not None and run is None else None
            if writer is not None and not writer.state.finished:
                # Written by another process (seen through its progress.json): stopping it
                # from here is the job of the process-control layer, not hooked up yet.
                message = (
                    f"written by pid {writer.pid} on {writer.host}, not by this process; "
                    "stop it there (SIGTERM drains it)"
                )
            else:
                message = "no run in this process writes it"
            return Note(message, title=name, severity="warning")
        snap = run.dataset(name)
        who = f"pid {snap.pid} on {snap.host}" if snap else "this process (starting)"
        datasets = ", ".join(run.names)
        batches = [b for n in run.names if (s := run.dataset(n)) for b in s.batches]
        if run.stopping:
            return Confirm(
                "Abort now?",
                f"The run ({who}) is draining. Abort its in-flight requests now?\n"
                f"Datasets: {datasets}\nCompleted responses are kept; aborted samples "
                "stay undone and run again on the next resume."
                + (
                    f"\nIts {counted(len(batches), 'batch')} still out stay open at the "
                    "provider, in the journal: the next run collects them."
                    if batches
                    else ""
                ),
                "Abort",
                lambda: self._abort(run),
            )
        return Confirm(
            "Kill run?",
            f"Stop the run of {who}?\nDatasets: {datasets}\n"
            f"No new requests; in-flight ones drain for up to {run.grace_s:g} s, then "
            "are aborted. Completed responses are kept."
            + (f"\n{cancel_note(batches)}" if batches else ""),
            "Kill",
            lambda: self._kill(run),
        )

    def _kill(self, run: HostedRun) -> Note | None:
        if not run.active:
            return None
        run.request_stop()
        return Note(
            f"draining in-flight requests for up to {run.grace_s:g} s (k again aborts)",
            title=f"stopping {names_title(run.names)}",
        )

    @staticmethod
    def _abort(run: HostedRun) -> None:
        if run.active:
            run.abort()

    def resume(self, name: str, view: PanelView) -> Note | AskBudget:
        run = self.owner.get(name)
        snap = view.snapshot
        spec = self._spec(name)
        if snap is None and spec is None:
            return Note(f"{name}: nothing known about it yet", severity="warning")
        running = run is not None and run.active
        if running and run is not None and run.stopping:
            return Note(f"{name}: its run is stopping; resume it once it has ended")
        target = ResumeTarget(
            name=name,
            tokens=snap.tokens if snap else 0,
            max_tokens=snap.max_tokens if snap else (spec.max_tokens if spec else None),
            max_samples=snap.max_samples if snap else (spec.max_samples if spec else None),
            tok_s=shown_rates(view)[0],  # a finished dataset's trailing rate is not its pace
            last_tok_s=run_rate(snap) if snap else 0.0,
            others_running=self._others_running(name),
            server_tok_s=whole_rate(run.latest) if run is not None and run.latest else 0.0,
            running=running and snap is not None and not snap.state.finished,
            where=self._backend(run),
            prompts_left=snap.prompts_left if snap else None,
            mean_tokens=snap.mean_tokens if snap else None,
        )
        return AskBudget(target, lambda budget: self._resume(target, budget))

    def _others_running(self, name: str) -> int:
        """This process's other datasets producing now: they share the server with it."""
        return sum(
            1
            for other, run in self.owner.items()
            if other != name and run.active and producing(PanelView(run.dataset(other)))
        )

    def _resume(self, target: ResumeTarget, budget: int) -> Note:
        name = target.name
        run = self.owner.get(name)
        self.budgets[name] = (budget, target.max_samples)
        if (
            run is not None
            and run.active
            and not run.stopping
            and run.control(SetBudget(name, budget, target.max_samples))
        ):
            return Note(f"budget set to {format_count(budget)}", title=name)
        if name not in self.names:
            return Note(f"{name}: not part of a run this panel can start", severity="warning")
        self.start(only=name, budget=(budget, target.max_samples))
        return Note(f"resuming to {format_count(budget)} in a new in-process run", title=name)

    def _backend(self, run: HostedRun | None) -> str:
        """Which server the in-process engine sends a dataset to, for the resume modal."""
        engine = run.engine if run is not None else None
        config = engine.config if engine is not None else None
        if config is None and isinstance(self.source, ConfigSource):
            config = self.source.config
        if config is None:
            return "in this process"
        names = {"openai": "OpenAI-compatible API", "openai-batch": "OpenAI-compatible Batch API"}
        api = names.get(config.api, "SGLang")
        urls = ", ".join(config.server_urls[:2]) + (" ..." if len(config.server_urls) > 2 else "")
        model = f", model {config.model}" if config.model else ""
        return f"in this process: {api} at {urls}{model}"

    def peek(self, name: str) -> Peek | None:
        run = self.owner.get(name)
        engine = run.engine if run is not None else None
        config = engine.config if engine is not None else None
        if config is None and isinstance(self.source, ConfigSource):
            config = self.source.config
        if config is None or name not in (run.names if run is not None else self.names):
            return None
        folder = str(config.output_dir)

        def records(count: int) -> Tail:
            return local_tail(record_spec(folder, name, count), count)

        def history() -> Tail:
            return local_tail(history_spec(folder, name), HISTORY_TAIL_LINES)

        spec = next((s for s in config.datasets if s.name == name), None)
        return Peek(
            records,
            None,
            config.tokenizer or None,
            history,
            prompts=spec.prompts if spec is not None else None,
            no_prompts="the run names no prompt file for it",
        )

    def _spec(self, name: str) -> DatasetSpec | None:
        if isinstance(self.source, ConfigSource):
            return next((s for s in self.source.config.datasets if s.name == name), None)
        return None

    def activity(self, now: float) -> Activity | None:
        active = self.active()
        if not active:
            return None
        latest = [run.latest for run in active if run.latest is not None]
        countdowns = [c for run in active if (c := run.countdown(now)) is not None]
        if any(run.escalated for run in active):
            state = "aborting"
        elif countdowns:
            state = "stopping"
        elif not latest:
            state = "starting"
        elif any(run.paused for run in active):
            state = "paused"
        else:
            state = "running"
        return Activity(state, active[0].names, latest, countdowns)
