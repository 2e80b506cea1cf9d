"""Issue 31, tried again as a new user in tmux at 80x24, 120x36 and 160x48 (the demo):

- `/name` then Enter with no dataset matching left the focus in the filter bar, so `k` was
  typed into the filter ("namek") and did nothing until Escape;
- at 120x36 nine compact panels left 16 empty rows and no events log: the kill's outcome,
  `r`'s new budget were said nowhere once their toast had gone;
- a notice that timed out while a dialog hid it (the resume dialog open over the kill's
  "B9_stale: stopped") was never seen.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input
from textual.widgets._toast import Toast

from gen_tui.app.cli.launch import demo_app
from gen_tui.app.dashboard.rules import plan_layout
from gen_tui.app.demo_tui import STALE, STALE_GRACE_S
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.widgets.event_log import EventLog
from tests.support.panel_snapshots import run_of, shown, snapshot, static_app
from tests.support.polling import wait_until
from tests.support.tui import SIZE, Notes, end_started_runs, panel, started_stale_run

NINE = [f"B{n}" for n in range(1, 10)]


async def test_k_after_a_filter_that_matches_nothing_says_so_and_types_nothing() -> None:
    notes = Notes()
    app, static = static_app(["A", "B"])
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A"), snapshot("B")))
        await pilot.press("slash", *"name", "enter")
        await pilot.pause()
        bar = app.screen.query_one("#filter", Input)
        assert not bar.has_focus
        await pilot.press("k")
        await pilot.pause()
        assert bar.value == "name"  # not "namek": the key went to the board
        assert notes.find("No dataset selected", "filter matches none"), notes.items
        await pilot.press("escape")  # the filter goes, the panels come back
        await pilot.pause()
        assert bar.value == "" and not isinstance(app.screen, ConfirmScreen)


async def test_the_events_log_shows_under_nine_compact_panels_at_120x36() -> None:
    # The demo at 120x36 has three lines over the board (its note, the server's and the
    # GPUs'); here one, the note, on a screen two lines shorter: the same room.
    assert plan_layout((120, 36), 9, extra_rows=3).log
    app, static = static_app(NINE)
    app.notice = "demo: B9 turns stale: k stops it"
    async with app.run_test(size=(120, 34)) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in NINE)))
        app.record_event("information", "B9: pid 4242 drained for its whole grace (10 s)")
        await pilot.pause()
        log = app.screen.query_one("#events", EventLog)
        assert log.display and log.region.height >= 6, log.region
    app, static = static_app(NINE)
    async with app.run_test(size=SIZE) as pilot:  # 80x24: no room for it, as before
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in NINE)))
        assert not app.screen.query_one("#events", EventLog).display


def drawn(app: object, words: str) -> list[Toast]:
    screen = app.screen  # type: ignore[attr-defined]
    return [t for t in screen.query(Toast) if t.region.area > 0 and words in str(t.render())]


async def test_a_notice_that_timed_out_under_a_dialog_shows_once_it_closes() -> None:
    app, static = static_app(["A"])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        app.notify("before the dialog", title="B9_stale", timeout=1.0)
        await app.push_screen(ConfirmScreen("Resume?", "B2", "Resume"))
        app.notify("stopped while it was open", title="B9_stale", timeout=1.0)
        await pilot.pause(1.5)  # both time out behind the dialog
        assert not drawn(app, "stopped")
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await wait_until(lambda: drawn(app, "stopped while it was open"), 5, pause=pilot.pause)
        assert drawn(app, "before the dialog")
        # said once more, not for ever: gone after their time, and not again
        await wait_until(lambda: not drawn(app, "stopped"), 5, pause=pilot.pause)
        await app.push_screen(ConfirmScreen("Resume?", "B2", "Resume"))
        await pilot.press("n")
        await pilot.pause(0.5)
        assert not drawn(app, "stopped")


async def test_y_on_the_kill_of_a_run_on_a_host_says_its_grace_at_80x24(tmp_path: Path) -> None:
    """The panel's own line for a kill under way ("SIGTERM sent; SIGKILL in 15 s") has no
    room in a compact panel at 80x24 (nor beside host and pid in a 40-column one): the
    grace the question named is said in a notice as the kill is sent, for the whole wait."""
    notes = Notes()
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE, notifications=True, message_hook=notes) as pilot:
        try:
            link, pid = await started_stale_run(app, pilot)
            await wait_until(
                lambda: link.monitor is not None and link.monitor.writer(STALE) is not None,
                60, "B9's writer seen", pause=pilot.pause,
            )  # fmt: skip
            panel(app, STALE).focus()
            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            await pilot.press("y")
            grace = f"SIGTERM sent to pid {pid}: it drains in-flight requests for up to its "
            grace += f"grace, {STALE_GRACE_S:g} s; SIGKILL if it is still there"
            await wait_until(
                lambda: notes.find(grace), 5, pause=pilot.pause, detail=lambda: notes.items
            )
            await wait_until(lambda: drawn(app, f"pid {pid}"), 5, "drawn", pause=pilot.pause)
        finally:
            end_started_runs(app.links[0])
