"""The control panel under Textual's Pilot: one app hosting the real engine, and how the tests
read it (a dataset's panel, its snapshot and badge, the notifications it raised).

Shared by the TUI tests and the chaos suite's abuse test, which drive the same app.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import RichLog

from gen_tui.app.cli.launch import demo_app
from gen_tui.app.dashboard.parts import Parts
from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.dialogs.peek import SampleScreen
from gen_tui.app.engine_run import RunSource
from gen_tui.app.host_links import HostLink
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.sim import LengthProfile, SimConfig, SimServer
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.widgets.dataset_panel import DatasetPanel, badge_for
from tests.support.polling import wait_until

SIZE = (80, 24)
"""The smallest terminal gen-tui supports: what most tests run the app at."""


class SimSource(RunSource):
    """A run against a simulator started in the engine's own loop, as the demo's is: the TUI
    tests' in-process run."""

    label = "in-process run"

    def __init__(self, config: EngineConfig, sim: SimConfig) -> None:
        super().__init__([spec.name for spec in config.datasets], grace_s=config.grace_s)
        self.config = config
        self.sim = sim

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        sim = self.sim() if callable(self.sim) else copy.deepcopy(self.sim)
        server = await stack.enter_async_context(SimServer(sim))
        return replace(self.config, server_urls=[server.url])


def make_app(
    tmp_path: Path,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    vocab_size: int,
    *,
    datasets: dict[str, tuple[int, int | None]],
    mean: float = 300.0,
    tokens_per_s: float = 1e6,
    slots: int = 32,
    grace_s: float = 30.0,
    max_new_tokens: int = 4096,
    stale_after_s: float = 60.0,
    autostart: bool = True,
) -> GenTuiApp:
    """datasets: name -> (prompt count, token budget)."""
    folder = prompts_dir(**{name: count for name, (count, _) in datasets.items()})
    config = EngineConfig(
        datasets=[
            DatasetSpec(name, folder / f"{name}.jsonl", max_tokens=budget)
            for name, (_, budget) in datasets.items()
        ],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        concurrency=slots,
        sampling={"max_new_tokens": max_new_tokens},
        parallel_datasets=len(datasets),
        grace_s=grace_s,
    )
    sim = SimConfig(
        slots=slots,
        tokens_per_s=tokens_per_s,
        vocab_size=vocab_size,
        default_profile=LengthProfile(mean=mean),
    )
    return GenTuiApp(SimSource(config, sim), autostart=autostart, stale_after_s=stale_after_s)


def panel(app: GenTuiApp, name: str) -> DatasetPanel:
    return app.query_one(f"#{panel_id(name)}", DatasetPanel)


def snap(app: GenTuiApp, name: str) -> DatasetSnapshot | None:
    view = panel(app, name).view
    return view.snapshot if view else None


def log_text(log: RichLog) -> str:
    """The event log as a person reads it: its lines joined, each wrapped message whole again.

    Where a message wraps depends on the width and on what it quotes (a temporary folder's
    path is as long as pytest's base folder makes it), so the line ends are read as spaces.
    """
    return re.sub(" +", " ", " ".join(strip.text for strip in log.lines))


@dataclass(frozen=True)
class DemoUp:
    """The demo under Pilot, its dashboard mounted (see :func:`demo_up`)."""

    app: GenTuiApp
    pilot: Pilot[int]
    dashboard: DashboardScreen
    parts: Parts
    stale: HostLink
    """The link of the demo's stale run (its host's watcher reads the simulated GPUs)."""


@contextlib.asynccontextmanager
async def demo_up(tmp_path: Path, size: tuple[int, int] = SIZE) -> AsyncIterator[DemoUp]:
    """The whole demo (`gen-tui --demo` in `tmp_path`) under Pilot at `size`; its stale run
    is SIGKILLed on the way out (:func:`end_started_runs`: these tests are not about the
    quit)."""
    app = demo_app(tmp_path)
    stale = app.links[0]
    async with app.run_test(size=size) as pilot:
        try:
            dashboard = app.dashboard
            assert dashboard is not None
            parts = dashboard.parts
            assert parts is not None
            yield DemoUp(app, pilot, dashboard, parts, stale)
        finally:
            end_started_runs(stale)


def end_started_runs(link: HostLink) -> None:
    """SIGKILL the runs `link` started (the demo's stale run), so that leaving does not wait
    for their drain: some 30 s, the whole grace of a run that never finishes its answer
    (issue 31 point 3). For tests whose subject is not the quit; tests/tui/test_tui_quit.py
    and the demo folder's tests in test_demo_security.py leave the way a user does."""
    for identity in link.started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(identity.pid, signal.SIGKILL)


async def started_stale_run(app: GenTuiApp, pilot: Pilot[int]) -> tuple[HostLink, int]:
    """The demo's stale run, once its link has started it: (the link, the run's pid)."""
    link = app.links[0]
    await wait_until(lambda: link.started, 60, "the stale run started", pause=pilot.pause)
    return link, link.started[0].pid


def in_flight(link: HostLink, name: str) -> int:
    """The answers in flight in dataset `name` as `link` last saw them (0 before it has)."""
    monitor = link.monitor
    seen = monitor.snapshot(name, 0.0) if monitor is not None else None
    return seen.inflight if seen is not None else 0


def badge(app: GenTuiApp, name: str) -> str:
    view = panel(app, name).view
    assert view is not None
    return badge_for(view)[0]


class Notes:
    """Collects the app's notifications through `message_hook`."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            n = message.notification
            self.items.append((n.title, n.message, n.severity))

    def find(self, *words: str) -> list[tuple[str, str, str]]:
        return [i for i in self.items if all(w in f"{i[0]} {i[1]}" for w in words)]


async def sample_screen(pilot: Pilot[int], app: GenTuiApp, lines: tuple[str, ...]) -> SampleScreen:
    """`v`'s screen of dataset "A" over record `lines` (the newest last), pushed once the
    dashboard is up: a SampleScreen, read the first time."""
    peek = Peek(records=lambda n: Tail(lines=lines[-n:]))
    await wait_until(lambda: app.screen is app.dashboard, 10, pause=pilot.pause)
    await app.push_screen(SampleScreen("A", peek))
    screen = app.screen
    assert isinstance(screen, SampleScreen)
    return screen
