"""Issue 32's story through a real Slurm (tests/support/server_story.py's steps): two
`gen-tui sim` workers submitted as batch jobs (`launcher = "slurm"`) behind the real
sglang-router 0.3.2, a budgeted `gen-tui run` through the router, and, while it writes,
`scancel` of one worker's job standing in for the crash: the job seen ended (CANCELLED)
within 30 s, off the router's list, submitted again (a new job id), healthy again, back on
the list; the run ends at its budget with every record once and every answer the workers
completed written; the alert target told "exited" and "healthy again".

test_slurm_servers.py cancels a job under a run sent straight to the nodes, with no router
and no alerts; this is the whole story. Skipped, saying why, without the one-node Slurm of
`.ci/slurm-up` or the router's environment (GEN_TUI_ROUTER_PYTHON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.support.records import precision_or_xfail
from tests.support.router import router_problem, router_recipe
from tests.support.server_story import (
    SCANCEL,
    SIM_FLAGS,
    check_sim_story,
    play,
    sims_completed,
    story_setup,
)
from tests.support.servers import sim_recipe
from tests.support.slurm import Cluster

BUDGET = 40_000
PROMPTS = 2000


@pytest.mark.timeout(300)
async def test_a_worker_job_cancelled_under_a_routed_run_comes_back_and_nothing_is_lost(
    slurm: Cluster, prefix: str, tokenizer_dir: Path, hook: Any, tmp_path: Path
) -> None:
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    url, received = hook
    slurm_table = (("partition", slurm.partition), ("time", "30"))
    workers = [
        # `address`: the node the one-node cluster runs every job on, where the router
        # and the story reach the worker.
        sim_recipe(
            f"{prefix}w{i}",
            free_port(),
            *SIM_FLAGS,
            launcher="slurm",
            address=slurm.node,
            slurm=slurm_table,
            startup_s=60.0,
        )
        for i in range(2)
    ]
    router = router_recipe()
    setup = story_setup(tmp_path, workers, router, url, tokenizer_dir, PROMPTS,
                        "--max-tokens-per-dataset", str(BUDGET))  # fmt: skip
    end = await play(
        config=setup.config, state=tmp_path / "state", workers=workers, router=router,
        run_args=setup.run_args, out=setup.out / "A", victim=workers[0].name,
        kill_at_records=30, alerts=received, load_s=60, run_s=180, crash=SCANCEL,
        ledger=sims_completed(workers),
    )  # fmt: skip
    tokens, records, allowed = check_sim_story(end, setup, BUDGET)
    print(
        f"cancelled job {end.killed_pid} at {end.records_at_kill} records; exited seen after "
        f"{end.exited_after_s:.1f} s, healthy again after {end.healthy_again_after_s:.1f} s, "
        f"relisted after {end.relisted_after_s:.1f} s; run {end.run_s:.1f} s, "
        f"{records} records, {tokens:,} tokens for a {BUDGET:,} budget "
        f"(+{allowed:,.0f} allowed)"
    )
    precision_or_xfail(tokens, records, BUDGET, allowed, end.stdout)
