"""The server strip's new figures repaint it; only a new line count re-arranges the screen
(issue 31: a layout at every figure, 4 times a second, was part of the table view's cost)."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.server_strip import ServerLine, ServerStrip


class _Strip(App[None]):
    def compose(self) -> ComposeResult:
        yield ServerStrip()


def _servers(count: int, running: int) -> tuple[ServerLine, ...]:
    return tuple(
        ServerLine(f"http://10.0.0.{i}:30000", "ok", ServerMetrics(running=running))
        for i in range(count)
    )


async def test_new_figures_repaint_and_a_new_line_count_lays_out() -> None:
    app = _Strip()
    async with app.run_test(size=(120, 20)) as pilot:
        strip = app.query_one(ServerStrip)
        strip.show(_servers(1, 1), tall=True)
        await pilot.pause()
        layouts: list[bool] = []
        refresh = strip.refresh

        def spy(*regions: Any, **kwargs: Any) -> Any:
            layouts.append(bool(kwargs.get("layout")))
            return refresh(*regions, **kwargs)

        strip.refresh = spy  # type: ignore[method-assign]
        strip.show(_servers(1, 7), tall=True)
        await pilot.pause()
        assert layouts and not any(layouts), layouts  # repainted, not laid out
        layouts.clear()
        strip.show(_servers(2, 7), tall=True)  # a line per server when tall: one more
        await pilot.pause()
        assert any(layouts), layouts
        assert strip.size.height == strip.line_count == 2
