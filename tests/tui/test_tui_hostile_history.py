"""`h` and `a` on a history another writer left with a point at `"t": 1e308` (issue 30,
point 9): before, `h` stayed on "reading the history…" and `a` stretched the time axis to
2e+304 h. The real app watching the folder through a local host link, its watcher's tail."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Label

from gen_tui.app.dialogs.history import HistoryScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import TimeAxis
from gen_tui.backends.watcher import HISTORY_FILE, RAW_FILE
from tests.support.polling import wait_until
from tests.support.tui import SIZE

T0 = 1.7e9


def point(t: str, tokens: int) -> bytes:
    line = HistoryPoint(T0, 7, "active", tokens, tokens, 1.0, 1, 0).to_line()
    return line.replace(b'"t":1700000000.0', b'"t":' + t.encode())


def dataset(folder: Path, hostile: str) -> None:
    folder.mkdir(parents=True)
    (folder / RAW_FILE).write_text('{"sample_id": "a", "completion_tokens": 5}\n')
    lines = [point(str(T0), 1), point(hostile, 2), point(str(T0 + 600), 3)]
    (folder / HISTORY_FILE).write_bytes(b"".join(lines))


def summary(app: GenTuiApp) -> str:
    return str(app.screen.query_one("#history-summary", Label).render())


async def test_h_and_a_leave_a_point_at_1e308_out_and_name_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    dataset(out / "A", "1e308")
    dataset(out / "B", "-1e308")
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            lambda: app.dashboard is not None and set(app.dashboard.names) >= {"A", "B"},
            20,
            pause=pilot.pause,
        )
        await pilot.press("h")
        screen = await wait_until(
            lambda: isinstance(app.screen, HistoryScreen) and app.screen, pause=pilot.pause
        )
        await wait_until(lambda: screen.histories, 20, "the history read", pause=pilot.pause)
        text = summary(app)
        assert text.startswith("A: 3 tokens") and "1 bad line" in text, text
        assert "2 points over 10 min" in text, text
        await pilot.press("a")
        await wait_until(lambda: len(screen.histories) == 2, 10, pause=pilot.pause)
        axis = TimeAxis.over(screen.histories)  # the plots' time axis
        assert (axis.span, axis.unit) == (600.0, "min"), "the axis spans the sane points only"
        shown = summary(app)
        assert max(len(word) for word in shown.split()) < 20, shown
