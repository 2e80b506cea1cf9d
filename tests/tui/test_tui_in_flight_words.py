"""Issue 31, point 7's residual: at 160×48 the header said `slots 153/160` beside the
server's `run 57 q 0`, two counts of different things that read as a contradiction. The
header now says what it counts: `in flight` (sent, answer not read yet) and, when the
servers' /metrics are known, what they say of it, with the difference named.

A real run in this process against the simulator, the client allowed 16 requests and the
server 4 slots: most of what is in flight waits in the server's queue.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.widgets.header import HeaderView, RunHeader, header_parts
from gen_tui.widgets.server_strip import ServerStrip
from tests.support.polling import wait_until
from tests.support.tui import SimSource

FIGURES = re.compile(
    r"in flight (\d+)/16 \d+%  \(server: (\d+) run, (\d+) queued(?:, (\d+) in transit)?\)"
)


def test_the_words_name_what_each_count_counts() -> None:
    """Without the servers' figures, only the client's; with them, the gap said either way."""
    base = HeaderView(state="running", inflight=153, concurrency=160, utilisation=0.95)
    assert "in flight 153/160 95%" in header_parts(base)
    assert not any("slots" in part or "server" in part for part in header_parts(base))
    known = HeaderView(
        state="running", inflight=153, concurrency=160, server_running=57, server_queued=0
    )
    assert "(server: 57 run, 0 queued, 96 in transit)" in header_parts(known)
    exact = HeaderView(
        state="running", inflight=64, concurrency=64, server_running=60, server_queued=4
    )
    assert "(server: 60 run, 4 queued)" in header_parts(exact)
    shared = HeaderView(
        state="running", inflight=10, concurrency=64, server_running=60, server_queued=4
    )
    assert "(server: 60 run, 4 queued, incl. other clients')" in header_parts(shared)


async def test_the_header_says_in_flight_and_the_servers_queue_apart(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    folder = prompts_dir(A=400)
    config = EngineConfig(
        datasets=[DatasetSpec("A", folder / "A.jsonl", max_tokens=10**9)],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        concurrency=16,
        sampling={"max_new_tokens": 400},
    )
    sim = SimConfig(
        slots=4, tokens_per_s=40, vocab_size=vocab_size, default_profile=LengthProfile(mean=300)
    )
    app = GenTuiApp(SimSource(config, sim))
    async with app.run_test(size=(160, 48)) as pilot:
        header = app.query_one("#header", RunHeader)

        def figures() -> re.Match[str] | None:
            view = header.view
            if not view.server_running or view.inflight < 16:
                return None
            return FIGURES.search(header.render().plain)

        found = await wait_until(
            figures, 60, "the servers' figures in the header", pause=pilot.pause,
            detail=lambda: header.render().plain,
        )  # fmt: skip
        text = header.render().plain
        strip = app.query_one("#servers", ServerStrip).render().plain  # the same refresh's
        assert "slots" not in text, text
        inflight, running, queued, transit = (int(x or 0) for x in found.groups())
        assert inflight == 16
        assert running == 4, text  # the server's 4 slots, all decoding
        assert running + queued + transit == inflight, text  # the words add up
        assert queued > 0, text
        assert f"run {running} q {queued}" in strip, (text, strip)  # the strip agrees
