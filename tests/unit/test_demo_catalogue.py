"""One demo catalogue: both demos name, size and budget their datasets from backends/demo.py.

Two demos once had datasets of the same names with different budgets; the panel's demo and
`gen-tui run --demo` now read the same entries, and their prompt files cover the budget.
"""

from __future__ import annotations

import math
from pathlib import Path

from gen_tui.app.demo_tui import STORY_START, DemoSource
from gen_tui.backends import demo


def test_both_demos_read_one_catalogue() -> None:
    names = [d.name for d in demo.DEMO_DATASETS]
    assert len(set(names)) == len(names) == 8
    assert demo.DEMO_DATASETS[:3] == demo.HEADLESS_DATASETS
    source = DemoSource(Path("/nonexistent"))
    assert source.datasets is demo.DEMO_DATASETS
    # B2 starts below its 10M, for the story's `r` with 10M (app/demo_tui.py, STORY_START)
    assert source.budgets == {
        d.name: STORY_START if d.name == demo.STAR else d.budget for d in demo.DEMO_DATASETS
    }
    assert STORY_START < demo.DEMO_DATASETS[1].budget == 10_000_000
    assert demo.STAR in names
    profiles = demo.demo_sim_config().profiles
    assert {name: p.mean for name, p in profiles.items()} == {
        d.name: d.mean_tokens for d in demo.HEADLESS_DATASETS
    }


def test_prompt_files_cover_the_budget_with_headroom(tmp_path: Path) -> None:
    written = demo.write_demo_prompts(tmp_path)
    assert list(written) == [d.name for d in demo.HEADLESS_DATASETS]
    for spec in demo.HEADLESS_DATASETS:
        lines = written[spec.name].read_bytes().count(b"\n")
        assert lines == spec.prompts
        assert lines * spec.mean_tokens >= demo.PROMPT_HEADROOM * spec.budget
        assert lines == math.ceil(demo.PROMPT_HEADROOM * spec.budget / spec.mean_tokens)


def test_calibrated_budgets_are_whole_numbers_of_tokens() -> None:
    """The panel's demo scales every budget by one factor once it has seen the machine's
    speed; each stays an int (round(x, -5) of a float is a float: found by mypy)."""
    from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot

    source = DemoSource(Path("/nonexistent"))

    def snapshot(star_tokens: int, star_budget: int | None = None) -> RunSnapshot:
        fields = dict(
            samples=0, max_samples=None, budget_mode="predictive", inflight=1, errors=0,
            malformed=0, mean_tokens=None, tok_s=0.0, samples_s=0.0, eta_s=None,
            resumed_tokens=0, resumed_samples=0, started_at=0.0, updated_at=0.0,
            last_record_at=None, pid=1, host="demo",
        )  # fmt: skip
        datasets = tuple(
            DatasetSnapshot(
                name=d.name,
                state=DatasetState.ACTIVE,
                tokens=star_tokens if d.name == demo.STAR else 0,
                max_tokens=star_budget
                if star_budget is not None and d.name == demo.STAR
                else source.budgets[d.name],  # as configured
                **fields,
            )
            for d in source.datasets
        )
        return RunSnapshot(datasets, 64, 64, 1.0, 0.0, 0.0, stopping=False, paused=False)

    # B2's budget set with `r` (the story's 10M) is the user's: never scaled, nor the rest
    user = [source.calibrate(snapshot(1000 * t, 10_000_000), float(t)) for t in range(15, 30)]
    assert user == [None] * len(user)
    source = DemoSource(Path("/nonexistent"))
    results = [source.calibrate(snapshot(1000 * t), float(t)) for t in range(15, 30)]
    (result,) = [r for r in results if r is not None]  # a slow machine: scaled once
    assert result.budgets[demo.STAR] < demo.DEMO_DATASETS[0].budget * 100
    assert all(type(tokens) is int for tokens in result.budgets.values()), result.budgets
