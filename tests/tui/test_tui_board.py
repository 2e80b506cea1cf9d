"""The dashboard itself, with no run needed: layout, selection, help, the filter, the key line,
the stale rules, the event text and the heap freeze."""

from __future__ import annotations

import gc
import sys
import types

from gen_tui.app.dashboard.rules import StaleWatch, humanize, plan_layout
from gen_tui.app.dialogs.modals import ConfirmScreen, HelpScreen
from gen_tui.app.heap import HeapSettler
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.widgets.dataset_panel import DatasetPanel
from tests.support.polling import wait_until
from tests.support.tui import SIZE, Notes


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
