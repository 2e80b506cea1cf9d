"""`v` on a dataset watched through a host link (as a GPU box over SSH is) shows each answer's
prompt head, looked up by the watcher in the prompt file the run's manifest names."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from rich.text import Text
from textual.widgets import Static

from gen_tui.app.dialogs.peek import SampleScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until
from tests.support.records import read_records
from tests.support.run_output import copy_run
from tests.support.tui import SIZE


def body(app: GenTuiApp) -> str:
    rendered = app.screen.query_one("#peek-body", Static).render()
    return rendered.plain if isinstance(rendered, Text) else str(rendered)


@pytest.mark.quick
async def test_v_on_a_linked_host_shows_prompt_heads_from_the_hosts_prompt_file(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    newest = str(read_records(out / "A")[-1]["sample_id"])
    lines = (finished_run[1] / "A.jsonl").read_bytes().splitlines()
    text = next(
        p["messages"][-1]["content"] for p in map(orjson.loads, lines) if str(p["id"]) == newest
    )
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.dashboard is not None and app.dashboard.names, 20,
                         pause=pilot.pause)  # fmt: skip
        await pilot.press("v")
        screen = await wait_until(
            lambda: isinstance(app.screen, SampleScreen) and app.screen, pause=pilot.pause
        )
        await wait_until(lambda: screen.prompts is not None, 30, "the heads", pause=pilot.pause)
        assert screen.prompts is not None
        shown = {sample.sample_id for sample in screen.samples}
        assert shown and set(screen.prompts.heads) == shown, screen.prompts.missing
        at = body(app).index(f"#{newest} · ")
        assert f"prompt\n{text[:60]}" in body(app)[at:], "the head sits above its answer"
