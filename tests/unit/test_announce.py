"""Budget announcements for a watched dataset: a crossing once, and a predictive run that
stops short of its budget (no crossing to see) said as reached, once."""

from __future__ import annotations

from dataclasses import replace

from gen_tui.app.dashboard.announce import BudgetAnnouncer
from gen_tui.backends.progress.snapshot import BudgetEvent, DatasetSnapshot, DatasetState

BASE = DatasetSnapshot(
    name="B2", state=DatasetState.ACTIVE, tokens=0, samples=0, max_tokens=10_000_000,
    max_samples=None, budget_mode="predictive", inflight=150, errors=0, malformed=0,
    mean_tokens=3793.0, tok_s=1.0, samples_s=1.0, eta_s=None, resumed_tokens=0,
    resumed_samples=0, started_at=0.0, updated_at=0.0, last_record_at=None, pid=1, host="gpu",
)  # fmt: skip


def _announcer() -> tuple[BudgetAnnouncer, list[str], list[str]]:
    toasts: list[str] = []
    events: list[str] = []
    announcer = BudgetAnnouncer(lambda text, title: toasts.append(f"{title}: {text}"),
                                lambda level, text: events.append(text))  # fmt: skip
    return announcer, toasts, events


def test_a_watched_crossing_is_said_once() -> None:
    announcer, toasts, events = _announcer()
    seen = [
        (9_990_000, DatasetState.ACTIVE),
        (10_003_000, DatasetState.DRAINING),
        (10_006_000, DatasetState.DONE),
        (10_006_000, DatasetState.DONE),
    ]
    for tokens, state in seen:
        announcer.watched("gpu-box", replace(BASE, tokens=tokens, state=state))
    assert toasts == ["B2: crossed its 10M budget at 10,003,000 tokens"]
    assert events == ["B2 on gpu-box: crossed its 10M budget at 10,003,000 tokens"]


def test_a_watched_run_that_stops_short_is_said_reached_once() -> None:
    announcer, toasts, events = _announcer()
    seen = [
        (9_990_000, DatasetState.ACTIVE),
        (9_997_348, DatasetState.DONE),
        (9_997_348, DatasetState.DONE),
    ]
    for tokens, state in seen:
        announcer.watched("gpu-box", replace(BASE, tokens=tokens, state=state))
    said = "budget reached: 9,997,348 of 10,000,000 tokens (no room for one more)"
    assert toasts == [f"B2: {said}"] and events == [f"B2 on gpu-box: {said}"]


def test_a_dataset_already_done_when_first_seen_is_not_announced() -> None:
    announcer, toasts, _ = _announcer()
    announcer.watched("gpu-box", replace(BASE, tokens=9_997_348, state=DatasetState.DONE))
    announcer.watched("gpu-box", replace(BASE, tokens=9_997_348, state=DatasetState.DONE))
    assert toasts == []


def test_the_final_count_after_a_crossing_says_done_not_reached_again() -> None:
    """A new user read "crossed its 12M budget at 12,002,035" then "budget reached:
    12,010,268" as two figures for one event: the second is the run's end, said so."""
    announcer, toasts, _ = _announcer()
    announcer.engine(BudgetEvent("B6", "crossed", 12_002_035, 3_100, 12_000_000))
    announcer.engine(BudgetEvent("B6", "done", 12_010_268, 3_102, 12_000_000))
    assert toasts == [
        "B6: crossed its 12M budget at 12,002,035 tokens",
        "B6: done: 12,010,268 tokens, 3,102 samples, with the answers in flight at the crossing",
    ]
