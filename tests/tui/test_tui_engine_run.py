"""A run hosted by this process, under Pilot: its panels, `k` and `r` on it, stale, failure, cost.

Each app gets a `SimSource`: the simulator is started inside the engine worker's own event
loop, exactly as `gen-tui --demo` does, so the UI loop only ever sees snapshots and events.
Waits poll the app with a deadline; the assertions are about behaviour, never timing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Input

from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.widgets.dataset_panel import DatasetPanel, detail_parts
from gen_tui.widgets.header import header_parts
from tests.support.polling import wait_until
from tests.support.records import recount
from tests.support.tui import SIZE, Notes, SimSource, badge, panel, snap


@pytest.mark.quick
async def test_panels_appear_and_update(app_factory: Callable[..., GenTuiApp]) -> None:
    app = app_factory(datasets={"A": (400, 10**9), "B": (400, 10**9)}, tokens_per_s=3000)
    async with app.run_test(size=SIZE) as pilot:
        assert [p.dataset for p in app.query(DatasetPanel)] == ["A", "B"]
        assert isinstance(app.focused, DatasetPanel)
        first = await wait_until(
            lambda: (s := snap(app, "A")) and s.tokens > 0 and s, pause=pilot.pause
        )
        assert badge(app, "A") == "running"
        await wait_until(lambda: snap(app, "A").tokens > first.tokens, pause=pilot.pause)
        await wait_until(lambda: (s := snap(app, "B")) and s.tokens > 0, pause=pilot.pause)
        assert app.query_one("#header").view.state == "running"
        assert app.query_one("#header").view.total == 2


async def test_kill_cancel_leaves_the_run_alone(app_factory: Callable[..., GenTuiApp]) -> None:
    app = app_factory(datasets={"A": (400, 10**9)}, tokens_per_s=500)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("k")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        run = app.runs[0]
        assert run.active and run.stop_at is None
        tokens = snap(app, "A").tokens
        await wait_until(lambda: snap(app, "A").tokens > tokens, pause=pilot.pause)
        assert badge(app, "A") == "running"


@pytest.mark.quick
async def test_kill_confirm_drains_with_a_countdown_then_stopped(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    notes = Notes()
    # At most 400 tokens at 100 tok/s per slot: in-flight requests drain within 4 s, long
    # enough to see the countdown even on a loaded machine.
    app = app_factory(
        datasets={"A": (400, 10**9), "B": (400, 10**9)}, tokens_per_s=100, max_new_tokens=400
    )
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("k")
        screen = await wait_until(
            lambda: isinstance(app.screen, ConfirmScreen) and app.screen, pause=pilot.pause
        )
        body = str(screen.query_one("#confirm-body").render())
        s = snap(app, "A")
        assert f"pid {s.pid} on {s.host}" in body
        assert "A, B" in body
        await pilot.press("y")
        await wait_until(lambda: app.runs[0].stop_at is not None, pause=pilot.pause)
        header = app.query_one("#header")
        assert header.view.state == "stopping" and header.view.countdown_s is not None
        assert badge(app, "A").startswith("draining ")
        await wait_until(lambda: app.runs and not app.runs[0].active, pause=pilot.pause)
        await pilot.pause(0.1)
        assert badge(app, "A") == "stopped" and badge(app, "B") == "stopped"
        assert app.runs[0].outcome == "stopped"
        assert notes.find("run stopped")
        assert header.view.state == "idle"
        shown = snap(app, "A").tokens
    tokens, records = recount(tmp_path / "out" / "A")
    assert records > 0 and tokens == shown


async def test_kill_escalates_to_abort_after_the_grace(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    # 300-token answers at 5 tok/s: nothing completes within the 0.5 s grace.
    app = app_factory(datasets={"A": (50, 10**9)}, tokens_per_s=5, grace_s=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("k", "y")
        await wait_until(lambda: app.runs and not app.runs[0].active, pause=pilot.pause)
        await pilot.pause(0.1)
        assert app.runs[0].outcome == "aborted"
        assert badge(app, "A") == "aborted"


async def test_resume_refuses_bad_budgets_then_reaches_the_new_one(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    notes = Notes()
    app = app_factory(datasets={"A": (2000, 20_000)}, mean=300)
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, pause=pilot.pause)
        await pilot.pause(0.1)
        assert badge(app, "A") == "budget reached"
        # the crossing, in the events log naming the dataset and the count, and the final
        # count on the line under the header (not a toast over the panels)
        crossing = [text for _, text in app.events if "A: crossed its budget at" in text]
        assert crossing, app.events
        assert not notes.find("A", "crossed its"), "a budget toast covers the panels"
        first_tokens, _ = recount(tmp_path / "out" / "A")
        assert first_tokens >= 20_000
        assert app.dashboard is not None and f"{first_tokens:,}" in app.dashboard.notice
        summary = [text for _, text in app.events if text.startswith("summary: ")]
        assert len(summary) == 1 and f"A done {first_tokens:,}/20,000 (+" in summary[0]

        await pilot.press("r")
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        await pilot.press(*"12 tokens")
        await pilot.pause(0.1)
        error = str(modal.query_one("#budget-error").render())
        assert "not a number" in error
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert app.screen is modal, "an invalid budget must not close the modal"
        for _ in range(len("12 tokens")):
            await pilot.press("backspace")
        await pilot.press(*"60k")
        await pilot.pause(0.1)
        assert str(modal.query_one("#budget-error").render()) == ""
        assert "to go" in str(modal.query_one("#budget-preview").render())
        await pilot.press("enter")
        await wait_until(lambda: app.screen is not modal, pause=pilot.pause)
        assert len(app.runs) == 2 and app.runs[1].only == "A"
        await wait_until(lambda: not app.runs[1].active, pause=pilot.pause)
        await pilot.pause(0.1)
        assert badge(app, "A") == "budget reached"
        assert snap(app, "A").max_tokens == 60_000
    tokens, _ = recount(tmp_path / "out" / "A")
    assert 60_000 <= tokens < 60_000 + 4096


async def test_resume_in_a_running_engine_sets_its_budget(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    # A reaches its small budget while B keeps the engine busy; `r` then raises A's budget
    # through Engine.set_budget in the same engine.
    # (A slow simulator keeps the process mostly idle: Pilot waits for idleness after a key.)
    app = app_factory(
        datasets={"A": (2000, 2000), "B": (5000, 10**9)}, tokens_per_s=1000, max_new_tokens=600
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: badge(app, "A") == "budget reached", pause=pilot.pause)
        assert app.runs[0].active
        await pilot.press("r")
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        # Typed in one go: Pilot waits for the process to go idle after every key, which a
        # busy engine thread delays by up to a second each.
        modal.query_one("#budget", Input).insert_text_at_cursor("5e3")
        await pilot.press("enter")
        await wait_until(lambda: not isinstance(app.screen, ResumeScreen), pause=pilot.pause)
        await wait_until(lambda: snap(app, "A").max_tokens == 5000, pause=pilot.pause)
        await wait_until(lambda: badge(app, "A") == "budget reached", pause=pilot.pause)
        assert len(app.runs) == 1 and app.runs[0].active
    tokens, _ = recount(tmp_path / "out" / "A")
    assert tokens >= 5000


async def test_stale_when_no_record_arrives_then_paused(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    # 300-token answers at 2 tok/s per slot: requests are in flight, no record arrives.
    app = app_factory(datasets={"A": (50, 10**9)}, tokens_per_s=2, stale_after_s=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await wait_until(lambda: badge(app, "A") == "stale · press k", pause=pilot.pause)
        assert "no new record" in panel(app, "A").view.stale_reason
        await pilot.press("p")
        await wait_until(lambda: badge(app, "A") == "paused", pause=pilot.pause)
        assert app.query_one("#header").view.state == "paused"
        await pilot.press("p")
        await wait_until(lambda: snap(app, "A").state is DatasetState.ACTIVE, pause=pilot.pause)


async def test_engine_error_is_a_notification_not_a_traceback(
    tmp_path: Path, prompts_dir: Callable[..., Path]
) -> None:
    notes = Notes()
    folder = prompts_dir(A=10)
    config = EngineConfig(
        datasets=[DatasetSpec("A", folder / "A.jsonl")],
        server_urls=[],
        tokenizer=str(tmp_path / "no-such-tokenizer"),
        output_dir=tmp_path / "out",
    )
    app = GenTuiApp(SimSource(config, SimConfig()))
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, pause=pilot.pause)
        await pilot.pause(0.1)
        assert badge(app, "A") == "failed"
        failed = notes.find("run failed", "does not exist")
        assert failed and failed[0][2] == "error"
        assert "Traceback" not in failed[0][1]
        assert app.is_running


async def test_cost_shows_in_panels_and_header_and_resume_names_the_backend(
    tmp_path: Path,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    vocab_size: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEN_TUI_TEST_KEY", "sk-test-not-a-secret")
    folder = prompts_dir(C=400)
    config = EngineConfig(
        datasets=[DatasetSpec("C", folder / "C.jsonl", max_tokens=40_000)],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        concurrency=8,
        sampling={"max_new_tokens": 1024},
        api="openai",
        model="sim-model",
        api_key_env="GEN_TUI_TEST_KEY",
    )
    sim = SimConfig(
        slots=8,
        tokens_per_s=2000,
        vocab_size=vocab_size,
        default_profile=LengthProfile(mean=200),
        cost_per_million=(1.0, 10.0),
    )
    app = GenTuiApp(SimSource(config, sim))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(
            lambda: snap(app, "C") and (snap(app, "C").cost or 0) > 0, 60, pause=pilot.pause
        )
        s = snap(app, "C")
        assert s.cost is not None and s.projected_cost is not None
        await wait_until(
            lambda: "$" in " ".join(detail_parts(panel(app, "C").view)[0]), pause=pilot.pause
        )
        header = app.dashboard.query_one("#header").view
        assert header.cost is not None and header.cost > 0
        assert any(part.startswith("$") for part in header_parts(header))
        await pilot.press("r")
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        where = str(modal.query_one("#resume-where").render())
        assert "OpenAI-compatible API" in where and "sim-model" in where
        assert "sk-test" not in where
        await pilot.press("escape")
        for run in app.runs:
            run.abort()
        await wait_until(lambda: not app.active_runs(), 30, pause=pilot.pause)
