"""Issue 32's story (tests/support/server_story.py) with two `gen-tui sim` workers behind
the real sglang-router 0.3.2, in seconds: the same steps as the real SGLang's story in
test_real_sglang_servers.py, so that a break in the wiring shows here without SGLang.
Skipped, saying why, without the router."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.demo import write_prompts
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.records import budget_end, precision_or_xfail
from tests.support.router import router_problem, router_recipe
from tests.support.runs import run_args
from tests.support.server_story import check_once, play, sim_completed, story_config
from tests.support.servers import sim_recipe, still_running

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
    flags = ("--slots", "16", "--tokens-per-s", "200", "--default-mean", "200")
    workers = [sim_recipe(f"w{i}", free_port(), *flags) for i in range(2)]
    router = router_recipe()
    config = story_config(tmp_path / "gen-tui.toml", workers, router, url)
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", PROMPTS)
    ids = {str(json.loads(line)["id"]) for line in (prompts / "A.jsonl").open()}
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts, out, router.url(), "--concurrency", "16")
    args += ["--max-tokens-per-dataset", str(BUDGET)]
    end = await play(
        config=config, state=tmp_path / "state", workers=workers, router=router,
        run_args=args, out=out / "A", victim="w0", kill_at_records=30, alerts=received,
        load_s=30, run_s=120,
        ledger=lambda: sim_completed(workers[0].url()) + sim_completed(workers[1].url()),
    )  # fmt: skip
    assert end.code == 0, end.stderr[-2000:]
    servers = tmp_path / "state" / "gen-tui" / "servers"  # the router too (retitled)
    await wait_until(lambda: not still_running(servers), 10, "no server left running",
                     detail=lambda: str(still_running(servers)))  # fmt: skip
    written = check_once(out / "A", ids)
    live = end.ledger
    assert live, "the workers answered nothing after the restart"
    unwritten = set(live) - set(written)
    assert not unwritten, f"{len(unwritten)} answer(s) the servers completed were not written"
    print(
        f"killed pid {end.killed_pid} at {end.records_at_kill} records; exited seen after "
        f"{end.exited_after_s:.1f} s, healthy again after {end.healthy_again_after_s:.1f} s, "
        f"relisted after {end.relisted_after_s:.1f} s; run {end.run_s:.1f} s, "
        f"{len(written)} records"
    )
    tokens, records, allowed = budget_end(out / "A", BUDGET)
    precision_or_xfail(tokens, records, BUDGET, allowed, end.stdout)
