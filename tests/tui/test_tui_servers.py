"""The server strip under the header: the in-process run's server load, read from the
simulator's /metrics, short on one line at 80×24 and in full at 160×48."""

from __future__ import annotations

from collections.abc import Callable

from gen_tui.app.tui import GenTuiApp
from gen_tui.widgets.server_strip import ServerStrip
from tests.support.polling import wait_until
from tests.support.tui import SIZE


def _strip_text(app: GenTuiApp) -> str:
    strip = app.query_one("#servers", ServerStrip)
    return str(strip.render()) if strip.display else ""


async def test_the_strip_shows_the_servers_load_compact_at_80x24(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    # 8 in flight against a server of 4 slots: it runs 4 and queues 4.
    app = app_factory(datasets={"A": (400, 10**9)}, tokens_per_s=50, slots=8, mean=2000)
    app.source.sim.slots = 4  # type: ignore[attr-defined]
    async with app.run_test(size=SIZE) as pilot:
        text = await wait_until(
            lambda: "run 4" in (t := _strip_text(app)) and t, pause=pilot.pause, timeout=30
        )
        assert text.startswith("srv 127.0.0.1:")
        assert "q 4" in text and "KV " in text and "tok/s" in text
        assert "cache" not in text  # the compact form leaves the rarer fields out
        strip = app.query_one("#servers", ServerStrip)
        assert strip.size.height == 1 and len(text.splitlines()) == 1


async def test_the_strip_says_every_field_when_tall(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(datasets={"A": (400, 10**9)}, tokens_per_s=50, slots=8, mean=2000)
    async with app.run_test(size=(160, 48)) as pilot:
        text = await wait_until(
            lambda: "run " in (t := _strip_text(app)) and t, pause=pilot.pause, timeout=30
        )
        assert "retr 0" in text and "cache 0%" in text
