"""A server that dies with requests in flight and comes back is sent to again within seconds.

Issue 32's story, the engine's side: the supervisor restarts a killed server in about 2 s,
and the run "picks the restarted one up again". Each request the outage cut counted as a
failure in a row, so a server killed with 8 of the pool's requests in flight was at its 8th
failure at once and its backoff at the 30 s cap (15 to 45 s with the jitter): tried as a
new user with two `gen-tui sim` recipes, the run left the restarted server unused for 40 s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.clients.scripted import ScriptedClient, answer
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from tests.support.engine import with_hooks

A, B = "http://a", "http://b"
DIES_S, BACK_S = 0.3, 0.6
"""Server A stops answering 0.3 s into the run (its requests in flight then are cut) and
answers again at 0.6 s, as a restarted server does."""


async def test_an_outage_counts_once_however_many_requests_it_cut(tmp_path: Path) -> None:
    # The clock starts at the first request, not at the test's start: a loaded machine took
    # long enough to make the engine that only 2 requests were out at A when it died.
    first: list[float] = []
    cut_at_a: list[float] = []
    """When each request A's outage cut was sent."""
    answered_at_a: list[float] = []

    async def script(url: str, request: Request) -> Generation:
        if not first:
            first.append(time.monotonic())
        sent = time.monotonic() - first[0]
        await asyncio.sleep(0.05)
        now = time.monotonic() - first[0]
        if url == A and (sent < DIES_S <= now or DIES_S <= sent < BACK_S):
            cut_at_a.append(sent)
            raise RequestFailed("connection refused", retry=True, counts=False)
        if url == A:
            answered_at_a.append(now)
        return answer(10)

    options: dict[str, object] = {
        "datasets": [DatasetSpec("D", write_prompts(tmp_path / "D.jsonl", 4000), 20_000)],
        "server_urls": [A, B],
        "tokenizer": "",
        "output_dir": tmp_path / "out",
        "concurrency": 16,
        "sampling": {"max_new_tokens": 16},
        "snapshot_interval_s": 0.05,
        "seed": 1,
    }
    engine = Engine(EngineConfig(**with_hooks(options)), client=ScriptedClient(script))  # type: ignore[arg-type]
    final = await asyncio.wait_for(engine.run(), 60)
    ended = time.monotonic() - first[0]

    at_death = [sent for sent in cut_at_a if sent < DIES_S]  # in flight there as it died
    assert len(at_death) >= 4, f"the outage cut {len(at_death)} requests in flight at A"
    back = [t for t in answered_at_a if t >= BACK_S]
    assert ended > BACK_S + 4, f"the run ended at {ended:.1f} s: too short to tell"
    assert back, f"A never answered again in the {ended - BACK_S:.1f} s after it came back"
    assert back[0] - BACK_S < 3.5, f"A sent to again {back[0] - BACK_S:.1f} s after it was back"
    (ds,) = final.datasets
    assert ds.samples == 2000 and ds.tokens == 20_000
