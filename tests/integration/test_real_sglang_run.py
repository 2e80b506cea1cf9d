"""A real `gen-tui run` against a real SGLang 0.5.23 server on this CPU (tests/support/
real_sglang.py): issue 29's "a real SGLang server" row. A 4,000-token budget at a 128-token
cap with `--concurrency auto` once ended at 8,952 (+124%: auto doubled 16 -> 128 before any
answer was back); it must end within max(0.2%, one mean answer) past the budget, having
crossed it, every record holding the server's own token ids, none twice. The precision is
an expected failure while issue 29 is open (tests/support/records.py's ISSUE_29_OPEN): it
failed 4 runs in 10 here, when the server answered fast."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.real_sglang import RealSGLang
from tests.support.records import budget_end, precision_or_xfail, read_records
from tests.support.runs import finish, run_args, spawn

BUDGET = 4000
CAP = 128


@pytest.mark.timeout(600)  # the session's server may start here: about a minute, cold
async def test_a_budget_ends_within_precision_on_a_real_sglang_server(
    real_sglang: RealSGLang, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    process = await spawn(
        *run_args(real_sglang.model, prompts_dir(A=400), out, real_sglang.url),
        *("--max-tokens-per-dataset", str(BUDGET), "--max-new-tokens", str(CAP)),
        *("--concurrency", "auto"),
    )
    code, stdout, stderr = await finish(process, timeout=400)
    assert code == 0, stderr
    tokens, records, allowed = budget_end(out / "A", BUDGET)
    print(f"ended at {tokens:,} tokens in {records} answers for {BUDGET:,}")  # pytest -s
    assert "A: budget reached" in stdout, stdout[-2000:]
    vocab = json.loads((real_sglang.model / "config.json").read_text())["vocab_size"]
    for record in read_records(out / "A"):
        assert 0 < record["completion_tokens"] <= CAP, record["sample_id"]
        assert all(0 <= token < vocab for token in record["output_ids"]), record["sample_id"]
    precision_or_xfail(tokens, records, BUDGET, allowed, stdout)
