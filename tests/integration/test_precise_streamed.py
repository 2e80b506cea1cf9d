"""Precise mode sees how far a streamed answer has got: the in-flight entries it weighs carry
the tokens received so far, from SGLang's frames and from OpenAI's chunks alike, and a run
that does not stream leaves them at 0 (precise then estimates from each request's age).

The engine in-process against the simulator: answers of 400 tokens on average, spread
(cv 0.6) so that they come back one by one, decoded at 2,000 tokens/s in frames of 8: each
is on the wire for about 0.2 s, and the dispatcher, woken by every answer that comes back,
sees the others mid-stream.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.budget import precise
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.sim import LengthProfile
from tests.support.engine import make_config, run
from tests.support.records import read_records, recount

LENGTH = 400
BUDGET = 6000


@pytest.mark.parametrize(("api", "stream"), [("sglang", True), ("openai", True), ("sglang", False)])
async def test_precise_weighs_what_a_stream_has_produced(
    api: str,
    stream: bool,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []
    outlook = precise._outlook

    def spy(inflight: list[InFlight], *args: Any) -> Any:
        seen.extend(request.produced for request in inflight)
        return outlook(inflight, *args)

    monkeypatch.setattr(precise, "_outlook", spy)
    server = await sim(profiles={"A": LengthProfile(mean=LENGTH, cv=0.6)}, tokens_per_s=2000)
    extra: dict[str, Any] = (
        {"api": "openai", "model": "sim-model", "sim_dataset_header": True}
        if api == "openai"
        else {}
    )
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=60),
        tmp_path / "out",
        [server.url],
        budgets={"A": (BUDGET, None)},
        budget_mode=BudgetMode.PRECISE,
        concurrency=8,
        stream=stream,
        sampling={"max_new_tokens": 1500},
        **extra,
    )
    final, _events, _snapshots = await run(config)
    (done,) = final.datasets
    assert recount(tmp_path / "out" / "A") == (done.tokens, done.samples)
    assert seen, "precise never weighed a request in flight"
    longest = max(record["completion_tokens"] for record in read_records(tmp_path / "out" / "A"))
    assert max(seen) <= longest  # a lower bound: never more than an answer holds
    if stream:
        assert sum(count > 0 for count in seen) >= len(seen) // 4, str(seen)
    else:
        assert set(seen) == {0}
