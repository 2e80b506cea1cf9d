"""`--turns all` on a real SGLang 0.5.23 server on this CPU (tests/support/real_sglang.py):
each turn after the first finds the turn before it in the server's prefix cache (issue 35:
the history is cheap only if the ids gen-tui sends for turn k begin with those the server
saw for turn k-1; a history re-rendered or re-tokenized otherwise would miss). The server's
own count: `sglang:cached_tokens_total` and `sglang:prompt_tokens_total` on /metrics, read
before and after the run (one conversation, one request at a time, so the difference is
this run's)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.support.real_sglang import RealSGLang
from tests.support.records import read_records
from tests.support.runs import finish, run_args, spawn

TURNS = 4


def _counters(url: str) -> tuple[float, float]:
    """(cached prompt tokens, prompt tokens) the server has counted so far."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        lines = answer.read().decode().splitlines()

    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{"))

    return total("sglang:cached_tokens_total"), total("sglang:prompt_tokens_total")


@pytest.mark.timeout(600)  # the session's server may start here: about a minute, cold
async def test_each_turn_finds_the_one_before_in_a_real_servers_prefix_cache(
    real_sglang: RealSGLang, tmp_path: Path
) -> None:
    # Words no other test sends, so turn 1 finds next to nothing cached.
    messages = [{"role": "system", "content": "quokka tangerine basalt orbit"}]
    for turn in range(1, TURNS + 1):
        messages += [
            {"role": "user", "content": f"question {turn}: walrus {turn * 7} lantern"},
            {"role": "assistant", "content": "another model's answer"},
        ]
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "C.jsonl").write_text(json.dumps({"id": "c1", "messages": messages}) + "\n")
    cached_before, prompt_before = _counters(real_sglang.url)
    out = tmp_path / "out"
    process = await spawn(
        *run_args(real_sglang.model, prompts, out, real_sglang.url),
        *("--turns", "all", "--max-new-tokens", "16", "--concurrency", "1"),
    )
    code, _, stderr = await finish(process, timeout=400)
    assert code == 0, stderr
    records = sorted(read_records(out / "C"), key=lambda record: record["turn"])
    assert [record["turn"] for record in records] == list(range(1, TURNS + 1))
    cached_after, prompt_after = _counters(real_sglang.url)
    cached, prompts_sent = cached_after - cached_before, prompt_after - prompt_before
    assert prompts_sent == sum(record["prompt_tokens"] for record in records)
    # Turn k's request begins with turn k-1's prompt, all cached: at least their sum.
    history = sum(record["prompt_tokens"] for record in records[:-1])
    print(f"cached {cached:.0f} of {prompts_sent:.0f} prompt tokens; history {history}")
    assert cached >= history, (cached, history, prompts_sent)
