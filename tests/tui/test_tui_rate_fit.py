"""A panel's rate line never ends in a cut figure: `103.6 req/` (issue 31, tried as a new user
at 120x36) read as a whole one. The decimal goes first, then req/s; what still does not fit
ends in "…"."""

from __future__ import annotations

import re

import pytest

from gen_tui.widgets.dataset_panel import DatasetPanel
from tests.support.panel_snapshots import run_of, shown, snapshot, static_app

NAMES = [f"B{i}" for i in range(1, 10)]
WHOLE = re.compile(r"\d+(\.\d+)?[kMG]? tok/s( \d+(\.\d)? req/s)?( \d+% cut)?$")


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (160, 48), (100, 30), (90, 24)])
async def test_every_rate_line_is_whole_or_ends_in_an_ellipsis(size: tuple[int, int]) -> None:
    app, static = static_app(NAMES)
    run = run_of(*(snapshot(name, tok_s=1_234_567.0, samples_s=103.6) for name in NAMES))
    async with app.run_test(size=size) as pilot:
        await shown(pilot, app, static, run)
        await pilot.pause()
        seen = 0
        for panel in app.screen.query(DatasetPanel):
            for y in range(panel.size.height):
                row = panel.render_line(y).text
                if "tok/s" not in row:
                    continue
                seen += 1
                rate = row.strip().split("  ")[0].strip("│ ")
                rate = re.split(r" [▁▂▃▄▅▆▇█]", rate)[0].strip()
                assert WHOLE.search(rate) or rate.endswith("…"), (size, row)
        assert seen, f"no rate line drawn at {size}"
