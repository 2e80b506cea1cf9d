"""The simulator's prefix cache hit rate (`sglang:cache_hit_rate` on /metrics, issue 35): a
`--turns all` turn's prompt is cached on the server that answered the conversation's
earlier turn, and on no other; read back through the parser the engine uses."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.common import simulator
from gen_tui.backends.sim import SimServer
from gen_tui.backends.sim.prefix_cache import conversation_turn
from tests.support.run_output import gen_tui
from tests.support.turns import check_whole, run_args, turn_records, write_conversations


def metric_rate(url: str) -> float:
    """`sglang:cache_hit_rate` from a simulator's /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    line = next(line for line in text.splitlines() if line.startswith("sglang:cache_hit_rate{"))
    return float(line.rsplit(" ", 1)[1])


async def _generate(
    session: aiohttp.ClientSession, server: SimServer, rid: str, prompt: int, answer: int
) -> None:
    body = {
        "input_ids": [5] * prompt,
        "rid": rid,
        "sampling_params": {"max_new_tokens": answer, "ignore_eos": True},
    }
    async with session.post(f"{server.url}/generate", json=body) as response:
        assert response.status == 200, await response.text()


async def _hit_rate(session: aiohttp.ClientSession, server: SimServer) -> float:
    async with session.get(f"{server.url}/metrics") as response:
        text = await response.text()
    line = next(line for line in text.splitlines() if line.startswith("sglang:cache_hit_rate{"))
    return float(line.rsplit(" ", 1)[1])


async def test_a_turn_hits_the_history_on_the_server_that_answered_the_turn_before(
    sim: Callable[..., Any],
) -> None:
    first, other = await sim(), await sim()
    async with aiohttp.ClientSession() as session:
        assert await _hit_rate(session, first) == 0.0
        await _generate(session, first, "chat/t1#1/a0", 100, 50)
        await _generate(session, first, "chat/t1#2/a1", 170, 50)
        # 150 of turn 2's 170 prompt tokens are turn 1's prompt and answer.
        assert await _hit_rate(session, first) == pytest.approx(150 / 270)
        # Turn 3 on another server: nothing of the history there.
        await _generate(session, other, "chat/t1#3/a2", 240, 50)
        assert await _hit_rate(session, other) == 0.0
        # A turn whose previous turn this server did not answer, and plain prompts, miss.
        await _generate(session, first, "chat/t2#2/a3", 100, 10)
        await _generate(session, first, "chat/t3/a4", 30, 10)
        assert await _hit_rate(session, first) == pytest.approx(150 / 400)


def test_only_a_turns_all_rid_names_a_conversation() -> None:
    assert conversation_turn("chat/t1#2/r1f") == ("chat/t1", 2)
    assert conversation_turn("chat/t1#12") == ("chat/t1", 12)
    assert conversation_turn("chat/t1/r1f") is None
    assert conversation_turn("oa/chat/0a1b") is None
    assert conversation_turn("chat/t1#x/r1") is None


@pytest.mark.timeout(300)
def test_server_affinity_keeps_a_conversation_on_one_server_and_its_history_cached(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """`gen-tui run --turns all` on two simulators: with affinity every conversation's
    turns are answered by one server and the rate is what that caches; with
    `--no-server-affinity` some conversation moves, and the rate is lower."""
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 30)
    rates = {}
    for mode in ("on", "off"):
        out = tmp_path / f"out-{mode}"
        flags = ("--tokens-per-s", "2000", "--vocab-size", str(vocab_size), "--slots", "16")
        with simulator(*flags) as one, simulator(*flags) as two:
            args = run_args(tmp_path / "prompts", out, one, tokenizer_dir, 10**9)
            extra = ["--server-url", two, *(["--no-server-affinity"] if mode == "off" else [])]
            done = gen_tui(*args, *extra)
            assert done.returncode == 0, done.stderr.decode()
            rates[mode] = [metric_rate(url) for url in (one, two)]
        records = turn_records(out)
        check_whole(records, turns)
        servers: dict[str, set[str]] = {}
        for record in records:
            servers.setdefault(record["sample_id"], set()).add(record["server"])
        moved = sum(len(used) > 1 for used in servers.values())
        if mode == "on":
            assert moved == 0
            assert all(rate > 0.5 for rate in rates["on"]), rates
        else:
            assert moved > 0
    assert sum(rates["off"]) < sum(rates["on"]), rates
