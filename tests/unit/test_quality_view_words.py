"""The `d` view's words agree with its counts (issue 31, tried again at 160x48: `d` on the
demo's B9_stale, one answer written, said "1 answers this run")."""

from __future__ import annotations

from gen_tui.backends.progress.quality import Quality, QualityWatch
from gen_tui.widgets.quality_view import quality_text
from tests.support.panel_snapshots import snapshot


def quality_of(answers: int) -> Quality:
    watch = QualityWatch()
    for _ in range(answers):
        watch.answer(3130, "stop", 63.0)
    return watch.published()


def test_one_answer_is_one_answer() -> None:
    text = quality_text(snapshot("B9_stale", quality=quality_of(1))).plain
    assert "1 answer this run" in text, text.splitlines()[0]


def test_many_answers_keep_their_plural_and_thousands() -> None:
    text = quality_text(snapshot("B2", quality=quality_of(1234))).plain
    assert "1,234 answers this run" in text, text.splitlines()[0]
