"""A dataset this process's engine stops short of its budget (precise mode, no room for one
more) is said as reached, in the words a watched one gets, not as a bare final count."""

from __future__ import annotations

from gen_tui.app.dashboard.announce import BudgetAnnouncer
from gen_tui.backends.progress.snapshot import BudgetEvent


def _announcer() -> tuple[BudgetAnnouncer, list[str]]:
    toasts: list[str] = []
    announcer = BudgetAnnouncer(lambda text, title: toasts.append(f"{title}: {text}"),
                                lambda level, text: None)  # fmt: skip
    return announcer, toasts


def test_an_engine_dataset_done_short_is_said_reached_with_no_room() -> None:
    announcer, toasts = _announcer()
    announcer.engine(BudgetEvent("B2", "done", 9_997_348, 2_600, 10_000_000))
    assert toasts == ["B2: budget reached: 9,997,348 of 10,000,000 tokens (no room for one more)"]


def test_a_finish_after_a_crossing_still_says_its_final_count() -> None:
    announcer, toasts = _announcer()
    announcer.engine(BudgetEvent("B2", "crossed", 10_003_000, 2_600, 10_000_000))
    announcer.engine(BudgetEvent("B2", "done", 10_006_000, 2_601, 10_000_000))
    assert toasts[1].startswith("B2: done: 10,006,000 tokens, 2,601 samples")
