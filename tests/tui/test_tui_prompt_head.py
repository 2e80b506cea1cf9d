"""`v` shows above each answer the head of the prompt it answers, looked up in the run's
prompt file by sample id (records keep the id and the prompt's length, not the prompt)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
from rich.text import Text
from textual.widgets import Static

from gen_tui.app.dialogs.peek import SampleScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.store.prompt_heads import PROMPT_HEAD_CHARS
from tests.support.polling import wait_until
from tests.support.records import read_records
from tests.support.tui import SIZE


def body(app: GenTuiApp) -> str:
    rendered = app.screen.query_one("#peek-body", Static).render()
    return rendered.plain if isinstance(rendered, Text) else str(rendered)


async def test_v_shows_each_answers_prompt_head_from_the_prompt_file(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    app = app_factory(datasets={"A": (30, None)}, mean=40)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, 60, pause=pilot.pause)
        records = read_records(tmp_path / "out" / "A")
        lines = (tmp_path / "prompts" / "A.jsonl").read_bytes().splitlines()
        prompts = {
            str(line["id"]): line["messages"][-1]["content"] for line in map(orjson.loads, lines)
        }
        await pilot.press("v")
        screen = await wait_until(
            lambda: isinstance(app.screen, SampleScreen) and app.screen, pause=pilot.pause
        )
        await wait_until(lambda: screen.prompts is not None, 30, "the heads", pause=pilot.pause)
        assert screen.prompts is not None
        shown = [sample.sample_id for sample in screen.samples]
        assert set(screen.prompts.heads) == set(shown), "every shown answer's prompt found"
        newest = str(records[-1]["sample_id"])
        head, prompt = screen.prompts.heads[newest], prompts[newest]
        assert (
            head == prompt
            if len(prompt) <= PROMPT_HEAD_CHARS
            else (
                head.startswith(prompt[:PROMPT_HEAD_CHARS]) and head.endswith(" more characters)")
            )
        )
        text = body(app)
        at = text.index(f"#{newest} · ")
        block = text[at : text.index("answer\n", at)]
        assert f"prompt\n{prompts[newest][:60]}" in block, "the head sits above its answer"


async def test_v_says_why_a_prompt_head_is_missing(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    app = app_factory(datasets={"A": (10, None)}, mean=40)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, 60, pause=pilot.pause)
        (tmp_path / "prompts" / "A.jsonl").write_bytes(b"")  # the file emptied since the run
        await pilot.press("v")
        screen = await wait_until(
            lambda: isinstance(app.screen, SampleScreen) and app.screen, pause=pilot.pause
        )
        await wait_until(lambda: screen.prompts is not None, 30, "the heads", pause=pilot.pause)
        assert "prompt (not shown: not in " in body(app)
        assert "A.jsonl (changed since the run?)" in body(app)
