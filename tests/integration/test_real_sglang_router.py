"""The real sglang-router 0.3.2 (.venv-router) in front of a real SGLang 0.5.23 server on this
CPU (tests/support/real_sglang.py): the router lists the server as a healthy worker at
`GET /workers`, and a `gen-tui run` through the router sees the worker behind it and ends at
its budget (within issue 29's precision: an expected failure while that issue is open, as in
tests/integration/test_real_sglang_run.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_sglang import RealSGLang
from tests.support.records import budget_end, precision_or_xfail
from tests.support.router import get_json
from tests.support.runs import finish, run_args, spawn

BUDGET = 4000


@pytest.mark.timeout(600)  # the session's server may start here: about a minute, cold
async def test_a_run_through_the_router_ends_at_its_budget(
    real_sglang: RealSGLang, router: Any, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    url = await router(real_sglang.url)
    listing = get_json(f"{url}/workers")
    assert isinstance(listing, dict), listing
    workers = listing["workers"]
    assert [(w["url"], w["is_healthy"]) for w in workers] == [(real_sglang.url, True)], listing
    out = tmp_path / "out"
    process = await spawn(
        *run_args(real_sglang.model, prompts_dir(A=400), out, url),
        *("--max-tokens-per-dataset", str(BUDGET), "--max-new-tokens", "128"),
        *("--concurrency", "auto"),
    )
    code, stdout, stderr = await finish(process, timeout=400)
    assert code == 0, stderr
    tokens, records, allowed = budget_end(out / "A", BUDGET)
    print(f"ended at {tokens:,} tokens in {records} answers for {BUDGET:,}")  # pytest -s
    said = [line for line in stdout.splitlines() if "is an SGLang router over 1 worker" in line]
    assert len(said) == 1 and real_sglang.url in said[0], stdout[-3000:]
    precision_or_xfail(tokens, records, BUDGET, allowed, stdout)
