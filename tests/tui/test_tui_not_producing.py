"""A dataset that is not producing shows 0 tok/s and no ETA in the grid, the table and the
header alike (issue 31, tried again: `IDLE 58.83M tok 19 tok/s` beside `B9_stale draining
13s ... 17 tok/s`, and at 80x24 the grid said `ETA -` where the table said 15h11m).

A draining run with nothing arriving, a stopped and a paused dataset, each with what an
engine's trailing window still says a while after its last record (19 tok/s, an ETA of
15 hours), fed beside a dataset that does produce: one rule (widgets/dataset_panel.py's
`producing`) for the three views.
"""

from __future__ import annotations

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.widgets.dataset_panel import ARRIVING_S
from tests.support.polling import wait_until
from tests.support.table_app import T0, board, run_of, shown, snapshot, static_app, table_text
from tests.support.tui import SIZE, panel

DECAYED = {"tok_s": 19.0, "samples_s": 0.1, "eta_s": 15 * 3600 + 11 * 60.0}
"""What a trailing window says a while after the last record."""
QUIET = {**DECAYED, "last_record_at": T0 - 3 * ARRIVING_S}

IDLE = {
    "drained": snapshot("drained", state=DatasetState.DRAINING, inflight=1, **QUIET),
    "stopped": snapshot("stopped", state=DatasetState.STOPPED, inflight=0, **QUIET),
    "paused": snapshot("paused", state=DatasetState.PAUSED, inflight=0, **QUIET),
}
LIVE = snapshot("live", tok_s=20_000.0, eta_s=75.0)


def panel_text(app: GenTuiApp, name: str) -> str:
    widget = panel(app, name)
    return "\n".join(widget.render_line(y).text for y in range(widget.size.height))


async def test_grid_table_and_header_say_0_and_no_eta_for_what_is_not_producing() -> None:
    names = [*IDLE, LIVE.name]
    app, static = static_app(names)
    async with app.run_test(size=(160, 48)) as pilot:
        await shown(pilot, app, static, run_of(*IDLE.values(), LIVE))
        for name in IDLE:
            text = panel_text(app, name)
            assert "19 tok/s" not in text and "15h" not in text, f"{name}:\n{text}"
            assert "ETA" not in text, f"{name}:\n{text}"
        live = panel_text(app, LIVE.name)
        assert "20k tok/s" in live and "ETA 1m15s" in live, live
        header = str(app.query_one("#header").render())
        assert "20k tok/s" in header, header  # the live one's alone: not 20,057

        await pilot.press("t")
        await wait_until(lambda: board(app).table_shown, 3, pause=pilot.pause)
        rows = {line.split()[0]: line for line in table_text(app)[2:] if line.strip()}
        for name in IDLE:
            assert rows[name].split()[-3:-1] == ["0", "-"], rows[name]  # tok/s, ETA
        assert "1m15s" in rows[LIVE.name], rows[LIVE.name]


async def test_a_draining_run_whose_answers_still_arrive_shows_their_rate_and_no_eta() -> None:
    arriving = snapshot(
        "arriving", state=DatasetState.DRAINING, last_record_at=T0 - 1, **{"tok_s": 5_000.0}
    )
    app, static = static_app([arriving.name])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(arriving))
        text = panel_text(app, arriving.name)
        assert "5k tok/s" in text and "ETA" not in text, text
