"""`--concurrency auto` says each move it makes: a real `gen-tui run` against the simulator
with a KV cache logs every change of its target once (from, to, and the figure that drove
it), growing while the server has room and backing off on retractions or a full KV cache,
and its status line carries the current target."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.sim import LengthProfile
from tests.support.runs import finish, run_args, spawn

MEAN = 400
KNEE = 40
"""Requests whose answers the simulator's KV cache holds (prompts are a few dozen tokens)."""

MOVE = re.compile(r" info: concurrency auto: (\d+) -> (\d+): (.+)$")
STATUS = re.compile(r" status: pool: .*, concurrency auto (\d+): (.+)$")


async def test_each_move_is_logged_once_with_its_reason(
    sim: Callable[..., Any],
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
) -> None:
    server = await sim(
        slots=256,
        tokens_per_s=400.0,
        kv_tokens=KNEE * (MEAN + 40),
        default_profile=LengthProfile(mean=MEAN),
    )
    args = run_args(tokenizer_dir, prompts_dir(A=3000), tmp_path / "out", server.url)
    process = await spawn(*args, "--concurrency", "auto", "--max-tokens-per-dataset", "100k")
    code, out, err = await finish(process, 120)
    assert code == 0, err[-2000:]
    lines = out.splitlines()
    moves = [(int(m[1]), int(m[2]), m[3]) for line in lines if (m := MOVE.search(line))]
    assert len(moves) >= 3, out[-3000:]
    # Once per move: each starts where the last one ended, and none stands still.
    assert all(a != b for a, b, _ in moves), moves
    assert all(moves[i][1] == moves[i + 1][0] for i in range(len(moves) - 1)), moves
    assert " info: concurrency auto: starting at 16, at most 512 in flight" in out
    assert moves[0][0] == 16  # autotune.START
    ups = [why for a, b, why in moves if b > a]
    downs = [why for a, b, why in moves if b < a]
    # The first move up doubles while the KV cache has room, or doubles as far as the
    # budgets have room for (issue 29: a 100k budget at the cap's prior is a few dozen).
    assert re.match(r"starting: doubling \(KV |the budgets have room for about", ups[0]), moves
    # Down for the servers' load, or (issue 29) for a budget with room for fewer answers
    # than the slots: both are reasons a person can check against the log.
    assert downs and all(
        re.search(
            r"\d+ retractions since the last look|KV cache \d+% full|\d+ queued"
            r"|the budgets have room for about [0-9,]+ answers?",
            why,
        )
        for why in downs
    ), moves
    assert server.stats.retracted > 0  # the back-offs answered real retractions
    statuses = [(int(m[1]), m[2]) for line in lines if (m := STATUS.search(line))]
    assert statuses, out[-3000:]
    targets = {b for _, b, _ in moves} | {16}
    assert all(target in targets for target, _ in statuses), (statuses, moves)
