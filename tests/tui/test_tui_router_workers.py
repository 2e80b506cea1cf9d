"""The panel behind a real sglang-router shows both workers at 80×24: the router's line with
its workers healthy and their summed load, and an indented line per worker with its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.app.engine_run import ConfigSource
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.sim import LengthProfile
from gen_tui.widgets.format import server_name
from gen_tui.widgets.server_strip import ServerStrip
from tests.support.engine import make_config
from tests.support.polling import wait_until
from tests.support.tui import SIZE


async def test_the_strip_shows_the_router_and_each_worker_at_80x24(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    slow = {"tokens_per_s": 20.0, "default_profile": LengthProfile(mean=20_000, cv=0.01)}
    small, large = await sim(slots=3, **slow), await sim(slots=5, **slow)
    url = await router(small.url, large.url)
    config = make_config(
        tokenizer_dir, prompts_dir(A=100), tmp_path / "out", [url], concurrency=12,
        metrics_interval_s=0.2, grace_s=1.0,
    )  # fmt: skip
    app = GenTuiApp(ConfigSource(config))
    async with app.run_test(size=SIZE) as pilot:
        strip = app.query_one("#servers", ServerStrip)

        def lines() -> list[str] | None:
            found = str(strip.render()).splitlines() if strip.display else []
            return found if len(found) == 3 and "run 8 q 4" in found[0] else None

        shown = await wait_until(lines, pause=pilot.pause, timeout=60, what="the router's lines")
        assert shown[0].startswith(f"srv {server_name(url)} 2/2 workers healthy · run 8 q 4")
        # Each worker's own line, in URL order (the router's listing order changes); the KV
        # share grows as they generate, so it is only checked to be there.
        expected = sorted(
            [
                (f"    {server_name(small.url)} run 3 q 3", "60 tok/s"),
                (f"    {server_name(large.url)} run 5 q 1", "100 tok/s"),
            ]
        )
        parts = [tuple(line.split(" KV ")) for line in shown[1:]]
        assert [(head, tail.split("% ")[1]) for head, tail in parts] == expected
        assert all(len(line) <= SIZE[0] for line in shown)
        await wait_until(lambda: strip.size.height == 3, pause=pilot.pause, what="3 rows")
