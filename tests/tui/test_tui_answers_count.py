"""`v` names the answers it shows by their real count: one answer written is not "the last
20 answers" (issue 31, tried as a new user in the panel demo)."""

from __future__ import annotations

import json

from textual.widgets import Label

from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until
from tests.support.tui import SIZE, sample_screen


def _record(i: int) -> str:
    return json.dumps(
        {"sample_id": i, "finish_reason": "stop", "completion_tokens": 5, "text": f"answer {i}"}
    )


async def _title(lines: tuple[str, ...]) -> str:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        screen = await sample_screen(pilot, app, lines)
        await wait_until(lambda: screen.samples or "no answers" in screen.title_text, 10,
                         pause=pilot.pause)  # fmt: skip
        await pilot.pause()
        return str(screen.query_one("#peek-title", Label).render())


async def test_v_with_one_answer_says_one_not_the_count_asked() -> None:
    title = await _title((_record(0),))
    assert "one answer" in title and "20" not in title, title


async def test_v_with_three_answers_says_three() -> None:
    title = await _title(tuple(_record(i) for i in range(3)))
    assert "the last 3 answers" in title, title


async def test_v_with_none_says_none_yet() -> None:
    title = await _title(())
    assert "no answers written yet" in title, title
