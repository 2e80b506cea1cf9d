"""The batch lane in-process against the simulator (issue 33, step 4): budgets kept by
waves, give-back of what a batch did not finish, one record per sample."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.store.batch_journal import JOURNAL_FILE, BatchJournal
from tests.support.engine import make_config, run
from tests.support.records import read_records

KEY = "sk-lane-test-1234"


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GEN_TUI_TEST_KEY", KEY)
    return "GEN_TUI_TEST_KEY"


def batch_config(tokenizer_dir: Path, prompts: Path, out: Path, url: str, **extra: Any) -> Any:
    options: dict[str, Any] = {
        "api": "openai-batch",
        "model": "sim-model",
        "api_key_env": "GEN_TUI_TEST_KEY",
        "sim_dataset_header": True,
        "batch_poll_s": 0.05,
        "sampling": {"max_new_tokens": 512},
    }
    options.update(extra)
    return make_config(tokenizer_dir, prompts, out, [url], **options)


async def test_waves_end_near_the_budget_with_one_record_per_sample(
    sim: Callable[..., Any],
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
    api_key: str,
) -> None:
    server = await sim(
        api_key=KEY,
        batch_delay_s=0.05,
        batch_validate_s=0.0,
        batch_finalize_s=0.0,
        default_profile=LengthProfile(mean=120.0),
        cost_per_million=(1.0, 4.0),
    )
    prompts = prompts_dir(B=3000)
    budget = 60_000
    config = batch_config(
        tokenizer_dir, prompts, tmp_path / "out", server.url, budgets={"B": (budget, None)}
    )
    final, events, _ = await run(config)
    (snap,) = final.datasets
    records = read_records(tmp_path / "out" / "B")
    ids = Counter(r["sample_id"] for r in records)
    assert max(ids.values()) == 1
    tokens = sum(r["completion_tokens"] for r in records)
    assert snap.tokens == tokens and snap.state is DatasetState.DONE
    mean = tokens / len(records)
    assert abs(tokens - budget) <= max(0.002 * budget, mean), (tokens, events)
    created = [m for level, m in events if "created with" in m]
    assert len(created) >= 3, created  # waves, tapering
    assert BatchJournal(tmp_path / "out" / "B").load() == []
    assert not BatchJournal(tmp_path / "out" / "B").open
    assert (tmp_path / "out" / "B" / JOURNAL_FILE).exists()
    assert all(r["cost"] is not None for r in records)
