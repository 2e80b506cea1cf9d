"""The control panel driven by Pilot, hosting the real engine against an in-process simulator.

Each app gets a `SimSource`: the simulator is started inside the engine worker's own event
loop, exactly as `gen-tui --demo` does, so the UI loop only ever sees snapshots and events.
Waits poll the app with a deadline; the assertions are about behaviour, never timing.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from textual.widgets import Input

from gen_tui.app.board import StaleWatch, humanize, plan_layout
from gen_tui.app.demo_tui import SimProcessSource, SimSource
from gen_tui.app.dialogs.modals import ConfirmScreen, HelpScreen, ResumeScreen
from gen_tui.app.heap import HeapSettler
from gen_tui.app.launch import main
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.run_config import DatasetSpec, EngineConfig
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.backends.snapshot import DatasetSnapshot, DatasetState
from gen_tui.widgets.dataset_panel import DatasetPanel, detail_parts
from gen_tui.widgets.header import header_parts
from tests.support.polling import wait_until, wait_until_sync
from tests.support.records import recount
from tests.support.tui import SIZE, Notes, badge, panel, snap


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


def test_stale_watch_rules() -> None:
    def ds(state: DatasetState, tokens: int, last: float | None) -> DatasetSnapshot:
        return DatasetSnapshot(
            name="A", state=state, tokens=tokens, samples=1, max_tokens=1000,
            max_samples=None, budget_mode="predictive", inflight=1, errors=0, malformed=0,
            mean_tokens=None, tok_s=0.0, samples_s=0.0, eta_s=None, resumed_tokens=0,
            resumed_samples=0, started_at=0.0, updated_at=0.0, last_record_at=last, pid=1,
            host="h",
        )  # fmt: skip

    watch = StaleWatch(after_s=10)
    assert watch.check(ds(DatasetState.ACTIVE, 10, None), now=100) == ""
    assert watch.check(ds(DatasetState.ACTIVE, 10, None), now=105) == ""
    assert "no new record" in watch.check(ds(DatasetState.ACTIVE, 10, None), now=111)
    assert watch.check(ds(DatasetState.ACTIVE, 20, 110.5), now=111) == ""
    assert watch.check(ds(DatasetState.PAUSED, 20, 110.5), now=200) == ""
    # back to active after a pause: the quiet time counts from then
    assert watch.check(ds(DatasetState.ACTIVE, 20, 110.5), now=201) == ""
    # past the budget and still growing long after crossing it
    assert watch.check(ds(DatasetState.ACTIVE, 1001, 300), now=300) == ""
    assert (
        watch.check(ds(DatasetState.ACTIVE, 1500, 320), now=320) == "still writing past its budget"
    )
    assert watch.check(ds(DatasetState.DONE, 1500, 320), now=400) == ""


def test_layout_fits_eight_panels_at_80x24_and_uses_160x48() -> None:
    compact = plan_layout((80, 24), 8, extra_rows=1)
    assert (compact.columns, compact.roomy, compact.log) == (2, False, False)
    wide = plan_layout((160, 48), 8, extra_rows=1)
    assert (wide.columns, wide.tall, wide.log) == (4, True, True)
    assert plan_layout((120, 40), 8).columns == 3


def test_event_counts_get_separators_but_ports_do_not() -> None:
    assert humanize("B2: crossed its budget at 10023456 tokens") == (
        "B2: crossed its budget at 10,023,456 tokens"
    )
    assert humanize("server http://127.0.0.1:30000 not answering") == (
        "server http://127.0.0.1:30000 not answering"
    )


async def test_kill_without_a_run_says_so() -> None:
    notes = Notes()
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await pilot.press("k")
        assert not isinstance(app.screen, ConfirmScreen)
        await wait_until(lambda: notes.find("A", "no run in this process"), pause=pilot.pause)


async def test_help_lists_every_binding() -> None:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        screen = await wait_until(
            lambda: isinstance(app.screen, HelpScreen) and app.screen, pause=pilot.pause
        )
        keys = {row.key: row.description for row in screen.rows}
        for key, description in {
            "k": "Kill",
            "r": "Resume",
            "s": "Start",
            "p": "Pause",
            "/": "Filter",
            "?": "Help",
            "q": "Quit",
        }.items():
            assert keys.get(key) == description
        await pilot.press("k")  # dashboard keys are inert under a dialog
        assert app.screen is screen
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, HelpScreen), pause=pilot.pause)
        await pilot.press("question_mark")  # the same screen again, not a new one
        assert await wait_until(lambda: app.screen is screen, pause=pilot.pause)
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, HelpScreen), pause=pilot.pause)


async def test_filter_narrows_the_panels() -> None:
    app = GenTuiApp(None, names=["B1_glaive", "B2_opencodeinstruct", "B3_sharegpt"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"code")
        await pilot.pause(0.1)
        shown = [p.dataset for p in app.dashboard.panels(visible_only=True)]
        assert shown == ["B2_opencodeinstruct"]
        await pilot.press("enter")
        assert isinstance(app.focused, DatasetPanel)
        assert app.focused.dataset == "B2_opencodeinstruct"
        await pilot.press("slash", "escape")
        await pilot.pause(0.1)
        assert len(app.dashboard.panels(visible_only=True)) == 3


async def test_the_key_line_is_rebuilt_only_when_its_keys_change() -> None:
    """Help opening and closing and moves between panels keep the same key widgets (each
    rebuild is garbage that a later full collection pays for in key latency); a focus that
    changes what the keys do, the filter bar taking letters, still redraws the line."""
    app = GenTuiApp(None, names=["A", "B"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        first = list(app.query("FooterKey"))
        assert "kill" in {key.action for key in first}
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), pause=pilot.pause)
        await pilot.press("escape", "right", "left")
        await pilot.pause(0.1)
        assert list(app.query("FooterKey")) == first
        assert all(a is b for a, b in zip(app.query("FooterKey"), first, strict=True))
        await pilot.press("slash")
        typing = await wait_until(
            lambda: (
                (keys := {key.action for key in app.query("FooterKey")})
                != {key.action for key in first}
                and keys
            ),
            pause=pilot.pause,
        )
        assert "kill" not in typing  # the filter bar takes letters: k types a k
        await pilot.press("escape", "escape")
        await wait_until(
            lambda: "kill" in {key.action for key in app.query("FooterKey")}, pause=pilot.pause
        )


def test_the_heap_is_frozen_once_an_import_wave_has_ended() -> None:
    settler = HeapSettler()
    try:
        assert not settler.tick()  # the modules loaded so far, seen for the first time
        assert settler.tick()  # held still for a tick: frozen
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert not settler.tick()
        sys.modules["gen_tui_test_wave"] = types.ModuleType("gen_tui_test_wave")
        assert not settler.tick()  # still importing, as far as it can tell
        assert settler.tick()
        assert gc.get_freeze_count() >= frozen
    finally:
        sys.modules.pop("gen_tui_test_wave", None)
        gc.unfreeze()


async def test_arrow_keys_move_the_selection() -> None:
    app = GenTuiApp(None, names=["A", "B", "C", "D"])
    async with app.run_test(size=SIZE) as pilot:
        assert app.focused.dataset == "A"
        await pilot.press("right")
        assert app.focused.dataset == "B"
        await pilot.press("down")
        assert app.focused.dataset == "D"
        await pilot.press("left", "up")
        assert app.focused.dataset == "A"


async def test_quit_asks_while_a_run_is_active_and_drains_it(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(datasets={"A": (400, 10**9)}, tokens_per_s=500, max_new_tokens=500)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        assert app.is_running and app.runs[0].active
        await pilot.press("q", "y")
        await wait_until(lambda: app.return_code is not None, pause=pilot.pause)
    assert app.return_code == 0, "a drained quit is a clean exit"
    assert not app.runs[0].active
    assert app.runs[0].outcome == "stopped"


async def test_quit_without_a_run_exits_at_once() -> None:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_until(lambda: app.return_code is not None, pause=pilot.pause)
    assert app.return_code == 0


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


def test_main_without_a_config_explains_how_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code = main(argparse.Namespace(tui_demo=False, tui_config=None))
    assert code == 2
    err = capsys.readouterr().err
    assert "gen-tui --demo" in err and "gen-tui --config FILE" in err


def test_main_with_a_bad_config_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text('[run]\ntokenizer = "tok"\nbudget = "10M"\n')
    code = main(argparse.Namespace(tui_demo=False, tui_config=path))
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gen-tui: error: ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--stale-after", "0"], "--stale-after must be more than 0 seconds"),
        (["--host", "gpu-box"], "--host and --remote-dir go together"),
        (["--demo", "--host", "x", "--remote-dir", "y"], "--demo runs on its own"),
    ],
)
def test_main_refuses_bad_flags_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gen_tui.app.cli_parser import build_parser

    code = main(build_parser().parse_args(argv))
    assert code in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_the_window_does_not_wait_for_heavy_imports() -> None:
    """transformers, the engine's aiohttp and the SSH stack load in workers, not at startup."""
    code = (
        "import sys, tempfile, pathlib; import gen_tui.app.cli, gen_tui.app.launch; "
        "from gen_tui.app.demo_tui import DemoSource, stale_source; "
        "stale_source(DemoSource(pathlib.Path(tempfile.mkdtemp()))); "
        "print(sorted(m for m in ('transformers', 'aiohttp', 'asyncssh', 'psutil') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"imported at startup: {out.stdout.strip()}"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_demo_in_a_real_tmux_session(tmp_path: Path) -> None:
    """`gen-tui --demo` at 80x24 in tmux: panels come up, keys answer, q drains and exits."""
    session = f"gen-tui-test-{os.getpid()}"
    command = (
        f"TMPDIR={tmp_path} {sys.executable} -m gen_tui.app.tui --demo; echo EXIT=$?; sleep 30"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command], check=True
    )

    def pane() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_pane(*words: str, timeout: float = 40.0) -> str:
        return wait_until_sync(
            lambda: (text := pane()) and all(word in text for word in words) and text,
            timeout,
            f"{words} in the pane",
            interval=0.2,
            detail=lambda: f"pane:\n{pane()}",
        )

    try:
        text = wait_pane("B1_glaive", "B8_ultrachat", "RUNNING", "tok/s")
        assert list(tmp_path.glob("gen-tui-demo-*")), "the demo works in a temporary folder"
        assert "k Kill" in text and "q Quit" in text
        lines = text.splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
        subprocess.run(["tmux", "send-keys", "-t", session, "?"], check=True)
        wait_pane("gen-tui keys", "Resume")
        subprocess.run(["tmux", "send-keys", "-t", session, "Escape"], check=True)
        time.sleep(0.5)  # a key right after Escape would arrive as alt+key
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        wait_pane("Quit gen-tui?")
        subprocess.run(["tmux", "send-keys", "-t", session, "y"], check=True)
        wait_pane("EXIT=0")
        assert not list(tmp_path.glob("gen-tui-demo-*")), "the demo folder was left behind"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_demo_leaves_nothing_behind_when_its_terminal_dies(tmp_path: Path) -> None:
    """The tmux server killed under a live demo: the app, the stale run it started and the
    demo folder all go (SIGHUP), instead of an orphan spinning on a dead terminal."""
    socket = f"gen-tui-hup-{os.getpid()}"  # a private server: killing it touches nothing else
    tmux = ["tmux", "-L", socket]
    command = f"TMPDIR={tmp_path} {sys.executable} -m gen_tui.app.tui --demo"
    subprocess.run([*tmux, "new-session", "-d", "-s", "hup", "-x", "80", "-y", "24", command],
                   check=True)  # fmt: skip
    try:
        pid = int(
            subprocess.run(
                [*tmux, "list-panes", "-t", "hup", "-F", "#{pane_pid}"],
                capture_output=True, text=True, check=True,
            ).stdout.split()[0]
        )  # fmt: skip
        app = psutil.Process(pid)
        # The stale run is detached (its own session): look for it by its folder.
        stale = wait_until_sync(
            lambda: [
                p
                for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"]
                and "prompts-stale" in " ".join(p.info["cmdline"])
                and str(tmp_path) in " ".join(p.info["cmdline"])
            ],
            60,
            "the demo's stale run",
            interval=0.3,
        )
        family = [app, *app.children(recursive=True), *stale]
        assert list(tmp_path.glob("gen-tui-demo-*"))
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    _gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"still running after the terminal died: {alive}"
    assert not list(tmp_path.glob("gen-tui-demo-*")), "the demo folder was left behind"


# ---- a separate process: the demo's stale run, stopped with `k` and resumed with `r` ------


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_separate_run_goes_stale_is_killed_then_resumed_to_its_budget(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    # One slow slot: a 300-token record about every 3 s, so with a 1 s threshold it is stale
    # between records while still writing. No token budget, like the seeds' forgotten run.
    folder = prompts_dir(S=2000)
    out = tmp_path / "out"
    source = SimProcessSource(
        "S",
        out,
        SimConfig(
            slots=1, tokens_per_s=100, vocab_size=vocab_size,
            default_profile=LengthProfile(mean=300),
        ),
        lambda: (folder, tokenizer_dir),
        ("--concurrency", "1", "--max-new-tokens", "1024"),
        grace_s=20.0,
    )  # fmt: skip
    notes = Notes()
    app = GenTuiApp(None, hosts=[source], stale_after_s=1.0)
    link = app.links[0]
    pids: list[int] = []
    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(
                lambda: snap(app, "S") and snap(app, "S").samples >= 1, 90, pause=pilot.pause
            )
            first = source.launched
            assert first is not None
            pids.append(first.pid)
            assert snap(app, "S").pid == first.pid and snap(app, "S").host == "local"
            assert snap(app, "S").max_tokens is None
            await wait_until(lambda: badge(app, "S") == "stale · press k", 30, pause=pilot.pause)
            assert "no new record" in panel(app, "S").view.stale_reason

            await pilot.press("k")
            confirm = await wait_until(
                lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause
            )
            assert confirm
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {first.pid}" in body and "local" in body and "S" in body
            await pilot.press("y")
            await wait_until(lambda: link.outcome.get("S") is not None, 60, pause=pilot.pause)
            assert link.outcome["S"] == "stopped", notes.items
            assert not _alive(first.pid)
            await wait_until(lambda: badge(app, "S") == "stopped", 10, pause=pilot.pause)
            tokens, records = recount(out / "S")
            await wait_until(
                lambda: (snap(app, "S").tokens, snap(app, "S").samples) == (tokens, records),
                pause=pilot.pause,
            )

            budget = tokens + 500
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            modal.query_one("#budget", Input).insert_text_at_cursor(str(budget))
            await pilot.press("enter")
            await wait_until(lambda: len(link.started) == 2, 60, pause=pilot.pause)
            second = link.started[-1]
            assert second is not None and second.pid != first.pid
            pids.append(second.pid)
            await wait_until(lambda: not _alive(second.pid), 90, pause=pilot.pause)
            await wait_until(lambda: badge(app, "S") == "budget reached", 30, pause=pilot.pause)
            assert snap(app, "S").max_tokens == budget and snap(app, "S").pid == second.pid
            assert notes.find("S", f"pid {second.pid}")
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for pid in pids:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
    final_tokens, final_records = recount(out / "S")
    assert budget <= final_tokens < budget + 1024 and final_records > records
    assert not any(_alive(pid) for pid in pids)


# ---- an OpenAI-compatible API with cost -------------------------------------------------


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
