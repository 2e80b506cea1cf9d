"""One demo catalogue: both demos name, size and budget their datasets from backends/sim/demo.py.

Two demos once had datasets of the same names with different budgets; the panel's demo and
`gen-tui run --demo` now read the same entries, and their prompt files cover the budget.
"""

from __future__ import annotations

import math
from pathlib import Path

from gen_tui.app.demo_tui import DemoSource
from gen_tui.backends.sim import demo


def test_both_demos_read_one_catalogue() -> None:
    names = [d.name for d in demo.DEMO_DATASETS]
    assert len(set(names)) == len(names) == 8
    assert demo.DEMO_DATASETS[:3] == demo.HEADLESS_DATASETS
    source = DemoSource(Path("/nonexistent"))
    assert source.datasets is demo.DEMO_DATASETS
    assert source.budgets == {d.name: d.budget for d in demo.DEMO_DATASETS}
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
