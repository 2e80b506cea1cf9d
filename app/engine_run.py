"""An engine run hosted in the app: where its config comes from, and how the UI sees it.

The engine runs in a worker thread under its own `asyncio.run`. That thread only swaps
`HostedRun.latest` (the snapshot coalescing) and posts messages; controls go the other way through
`Engine.send`, queued until the engine exists.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message
from textual.worker import Worker

from gen_tui.app.messages import BudgetAnnounced, EngineEvent
from gen_tui.backends.config.commands import EngineCommand, Stop
from gen_tui.backends.config.run import EngineConfig, EngineError
from gen_tui.backends.progress.snapshot import DatasetSnapshot, RunSnapshot

if TYPE_CHECKING:  # aiohttp: loaded in the engine's worker, not at startup
    from gen_tui.backends.engine import Engine


# ---- where a run comes from ---------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """New budgets a source asks for once it has seen the machine's speed, and why."""

    budgets: dict[str, int]
    notice: str
    header: str = ""
    """A few words the header keeps for good ("budgets 30%: slow machine"): the notice is
    overwritten by the next message, and a budget scaled down must not pass for the one
    promised (issue 31, point 8)."""
    said: str = ""
    """The why, for the events log (the notice says what the panel now uses)."""


class RunSource:
    """Produces the :class:`EngineConfig` of an in-process run.

    `prepare` runs inside the engine worker's own event loop (never the UI's), so it may
    build tokenizers, write files or start servers; anything it enters on `stack` lives as
    long as the engine does.
    """

    label = "in-process run"
    removed_on_exit: Path | None = None
    """A folder the app removes as it ends (the demo's temporary one): the exit line names
    it as such, never as a path to go and look in."""
    notice = ""

    def __init__(self, names: Sequence[str], grace_s: float = 30.0) -> None:
        self.names = tuple(names)
        self.grace_s = grace_s

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        raise NotImplementedError

    def calibrate(self, snapshot: RunSnapshot, elapsed_s: float) -> Calibration | None:
        return None


class ConfigSource(RunSource):
    """A run described by a config file (already merged into an EngineConfig)."""

    label = "configured run"

    def __init__(self, config: EngineConfig, path: Path | None = None) -> None:
        super().__init__([spec.name for spec in config.datasets], grace_s=config.grace_s)
        self.config = config
        self.path = path
        self.planned = config.planned_budgets()

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        return self.config


def only_dataset(
    config: EngineConfig, name: str, budget: tuple[int | None, int | None]
) -> EngineConfig:
    """The same run narrowed to one dataset with a new (max_tokens, max_samples) budget."""
    specs = [
        replace(spec, max_tokens=budget[0], max_samples=budget[1])
        for spec in config.datasets
        if spec.name == name
    ]
    if not specs:
        raise EngineError(f"{name} is not in this run's config")
    # The budget given is the one it runs to, not a share of the run's total.
    return replace(config, datasets=specs, max_total_tokens=None)


# ---- one in-process engine ----------------------------------------------------------------


class HostedRun:
    """One engine hosted in a worker thread, as the UI sees it.

    Written from the engine thread: `latest` (a plain attribute swap, the snapshot
    coalescing), `engine` (under `_lock`) and `done`. Everything else belongs to the UI.
    """

    def __init__(
        self,
        number: int,
        source: RunSource,
        only: str | None = None,
        budget: tuple[int | None, int | None] | None = None,
    ) -> None:
        self.number = number
        self.source = source
        self.only = only
        self.budget = budget
        self.names = (only,) if only else source.names
        self.engine: Engine | None = None
        self.worker: Worker[RunSnapshot] | None = None
        self.latest: RunSnapshot | None = None
        self.done = threading.Event()
        self.started = time.monotonic()
        self.stop_at: float | None = None
        self.escalated = False
        self.paused = False
        self.was_paused = False
        self.held: set[str] = set()
        """Its datasets paused alone (`P`)."""
        self.outcome: str | None = None
        self.failure: str | None = None
        self.grace_s = source.grace_s
        self._lock = threading.Lock()
        self._pending: list[EngineCommand] = []

    @property
    def active(self) -> bool:
        return not self.done.is_set()

    @property
    def stopping(self) -> bool:
        return self.stop_at is not None and self.active

    def shape(self, config: EngineConfig) -> EngineConfig:
        if self.only is None:
            return config
        assert self.budget is not None
        return only_dataset(config, self.only, self.budget)

    def store(self, snapshot: RunSnapshot) -> None:
        """The engine's `on_snapshot` (engine thread): keep only the latest."""
        self.latest = snapshot

    def attach(self, engine: Engine) -> None:
        """Engine thread, on the engine's loop: publish the engine, replay queued controls."""
        with self._lock:
            self.engine = engine
            self.grace_s = engine.config.grace_s
            pending, self._pending = self._pending, []
        for command in pending:
            engine.apply(command)

    def control(self, command: EngineCommand) -> bool:
        """UI thread: hand a command to the engine's loop.

        Before the engine exists (tokenizer still loading, say) the call is queued and
        replayed by `attach`. False if the engine has already finished.
        """
        with self._lock:
            engine = self.engine
            if engine is None:
                self._pending.append(command)
                return True
        try:
            engine.send(command)
        except (EngineError, RuntimeError):  # not running yet / loop already closed
            return False
        return True

    def request_stop(self) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic()
        self.control(Stop())

    def abort(self) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic()
            self.control(Stop())
        self.escalated = True
        self.control(Stop())

    def countdown(self, now: float) -> float | None:
        if self.stop_at is None or not self.active:
            return None
        return self.grace_s - (now - self.stop_at)

    def host(self, post: Callable[[Message], object]) -> RunSnapshot:
        """The worker thread's body: the engine (and whatever its source starts) under its
        own asyncio.run; events and budget crossings are posted (`post`) to the UI."""
        try:
            return asyncio.run(self._main(post))
        finally:
            self.done.set()

    async def _main(self, post: Callable[[Message], object]) -> RunSnapshot:
        from gen_tui.backends.engine import Engine  # aiohttp: off the UI's startup path

        async with AsyncExitStack() as stack:
            config = self.shape(await self.source.prepare(stack))
            engine = Engine(
                config,
                on_snapshot=self.store,
                on_event=functools.partial(self._event, post),
                on_budget=lambda event: post(BudgetAnnounced(event)),
            )
            task = asyncio.create_task(engine.run())
            await asyncio.sleep(0)  # run() has bound its loop: send() works from here
            self.attach(engine)
            return await task

    def _event(self, post: Callable[[Message], object], level: str, text: str) -> None:
        """The engine's `on_event` (engine thread): hand it to the UI, never block."""
        post(EngineEvent(level, text))

    def snapshots(self) -> tuple[DatasetSnapshot, ...]:
        """Each dataset's latest snapshot (none before the first)."""
        latest = self.latest
        return tuple(latest.datasets) if latest is not None else ()

    def dataset(self, name: str) -> DatasetSnapshot | None:
        if self.latest is None:
            return None
        for snap in self.latest.datasets:
            if snap.name == name:
                return snap
        return None
