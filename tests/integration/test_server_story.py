"""Issue 32's story (tests/support/server_story.py) with two `gen-tui sim` workers behind
the real sglang-router 0.3.2, in seconds: the same steps as the real SGLang's story in
test_real_sglang_servers.py, so that a break in the wiring shows here without SGLang.
Skipped, saying why, without the router."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.support.records import precision_or_xfail
from tests.support.router import router_problem, router_recipe
from tests.support.server_story import (
    SIM_FLAGS,
    check_sim_story,
    none_left_running,
    play,
    sims_completed,
    story_setup,
)
from tests.support.servers import sim_recipe

BUDGET = 40_000
PROMPTS = 2000


@pytest.mark.timeout(240)
async def test_a_worker_killed_under_a_routed_run_comes_back_and_nothing_is_lost(
    tokenizer_dir: Path, hook: Any, tmp_path: Path
) -> None:
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    url, received = hook
    workers = [sim_recipe(f"w{i}", free_port(), *SIM_FLAGS) for i in range(2)]
    router = router_recipe()
    setup = story_setup(tmp_path, workers, router, url, tokenizer_dir, PROMPTS,
                        "--max-tokens-per-dataset", str(BUDGET))  # fmt: skip
    end = await play(
        config=setup.config, state=tmp_path / "state", workers=workers, router=router,
        run_args=setup.run_args, out=setup.out / "A", victim="w0", kill_at_records=30,
        alerts=received, load_s=30, run_s=120, ledger=sims_completed(workers),
    )  # fmt: skip
    tokens, records, allowed = check_sim_story(end, setup, BUDGET)
    await none_left_running(tmp_path / "state")
    print(
        f"killed pid {end.killed_pid} at {end.records_at_kill} records; exited seen after "
        f"{end.exited_after_s:.1f} s, healthy again after {end.healthy_again_after_s:.1f} s, "
        f"relisted after {end.relisted_after_s:.1f} s; run {end.run_s:.1f} s, "
        f"{records} records"
    )
    precision_or_xfail(tokens, records, BUDGET, allowed, end.stdout)
