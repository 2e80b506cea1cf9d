"""`gen-tui run`'s live table fits a narrow tmux pane: every figure whole at 80 columns."""

from __future__ import annotations

import io
import re
from dataclasses import replace

import pytest
from rich.console import Console

from gen_tui.app.cli.live_table import live_table, shorten
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import PanelView, state_word

NAMES = [
    "B1_glaive",
    "B2_opencodeinstruct",
    "B3_sharegpt",
    "B4_magpie_reasoning_long",
    "B5_ultrachat",
    "B6_code_feedback",
    "B7_wildchat_en",
    "B8_lmsys_chat_1m",
]


def _dataset(index: int, name: str) -> DatasetSnapshot:
    return DatasetSnapshot(
        name=name,
        state=[DatasetState.ACTIVE, DatasetState.DRAINING, DatasetState.EXHAUSTED][index % 3],
        tokens=9_870_000 + index,
        samples=26_512 + index,
        max_tokens=10_000_000,
        max_samples=30_000,
        budget_mode="predictive",
        inflight=150,
        errors=0,
        malformed=0,
        mean_tokens=3793.0,
        tok_s=6265.4,
        samples_s=1.6,
        eta_s=3725.0 + index,
        resumed_tokens=0,
        resumed_samples=0,
        started_at=0.0,
        updated_at=0.0,
        last_record_at=None,
        pid=4242,
        host="gpu",
    )


def _render(width: int, names: list[str]) -> list[str]:
    return _render_datasets(width, tuple(_dataset(i, name) for i, name in enumerate(names)))


def _render_datasets(width: int, datasets: tuple[DatasetSnapshot, ...]) -> list[str]:
    snap = RunSnapshot(
        datasets=datasets,
        concurrency=150,
        inflight=150,
        utilisation=0.99,
        elapsed_s=7322.0,
        active_s=7322.0,
        stopping=False,
        paused=False,
    )
    stream = io.StringIO()
    Console(file=stream, width=width, color_system=None).print(live_table(snap, width))
    return stream.getvalue().splitlines()


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_every_figure_is_whole_at_any_width_from_60(width: int) -> None:
    lines = _render(width, NAMES)
    assert all(len(line) <= width for line in lines), lines
    rows = lines[2:]
    assert len(rows) == len(NAMES)
    for row in rows:
        for figure in ("9.87M/10M", "6.27k", "150", "1h02m"):
            assert figure in row, (figure, row)
        assert re.search(r"\b(running|draining|exhausted)\b", row), row
    if width >= 80:
        assert [row.split()[0] for row in rows] == NAMES, "a name was cut with room to spare"


def test_at_80_columns_the_samples_stay_and_at_160_the_bar_and_full_names_appear() -> None:
    narrow = _render(80, NAMES)
    assert "samples" in narrow[1] and "26,512/30,000" in narrow[2]
    wide = _render(160, NAMES)
    assert all(name in "\n".join(wide) for name in NAMES)
    assert "━" in wide[2], "a wide terminal gets the progress bar"


def test_a_short_name_set_keeps_its_names_whole_at_80() -> None:
    lines = _render(80, NAMES[:3])
    assert all(name in "\n".join(lines) for name in NAMES[:3])


@pytest.mark.parametrize("state", list(DatasetState))
def test_each_state_in_the_panels_badge_words(state: DatasetState) -> None:
    """Issue 31: the panel's badge and table said "running" and "budget reached" where
    `gen-tui run`'s table said the engine's "active" and "done": one state, two words."""
    dataset = replace(_dataset(0, "B1"), state=state)
    shown = state_word(PanelView(snapshot=dataset))
    row = _render_datasets(80, (dataset,))[2]
    assert re.search(rf"^B1 +{re.escape(shown)} ", row), (shown, row)
    if state in (DatasetState.ACTIVE, DatasetState.DONE):
        assert str(state) not in row.split(), row


def test_shorten_keeps_both_ends() -> None:
    assert shorten("B2_opencodeinstruct", 10) == "B2_op…ruct"
    assert len(shorten("B2_opencodeinstruct", 10)) == 10
    assert shorten("B1", 10) == "B1"


def test_a_piped_run_prints_its_final_status_block_once() -> None:
    """Issue 31, defect 18: the run's last snapshot printed by the periodic status and then
    again as the final block made two identical blocks in a log."""
    from gen_tui.app.cli.headless import HeadlessDisplay

    snap = RunSnapshot(
        datasets=(_dataset(0, "B1"), _dataset(1, "B2")),
        concurrency=150,
        inflight=0,
        utilisation=0.5,
        elapsed_s=10.0,
        active_s=10.0,
        stopping=False,
        paused=False,
    )
    stream = io.StringIO()
    display = HeadlessDisplay(stream, status_every_s=0.0)
    display.live_mode = False
    display.snapshot(snap)
    display.write_status(snap, final=True)
    lines = [line.split(" ", 1)[1] for line in stream.getvalue().splitlines()]
    assert len(lines) == len(set(lines)) == 3, lines
    assert "26,512/30,000 samples" in lines[0], lines
