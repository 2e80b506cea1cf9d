"""Crash loop over `--turns all` (issue 35): `gen-tui run` killed with SIGKILL again and
again mid-conversation, the same command each time, against one `gen-tui sim`.

After every kill the records hold each conversation's turns once and in order (a prefix
of them for one cut by the kill), and the simulator's ledger of what it was sent shows
no turn that was on disk before a start sent again in that start. A last, unkilled run
finishes every conversation it began; `gen-tui verify` finds no gap and no duplicate.

Reproduce a failure with the seed it prints: `CHAOS_SEED=... pytest tests/chaos -k turns`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import simulator
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.store.records import RAW_FILE
from tests.support.run_output import ENV, GEN_TUI, gen_tui
from tests.support.turns import (
    TURN_MEAN,
    check_in_order,
    check_whole,
    ledger,
    run_args,
    turn_records,
    write_conversations,
)

KILLS_PER_ITERATION = 4


def lines_in(raw: Path) -> int:
    return raw.read_bytes().count(b"\n") if raw.exists() else 0


def test_kill_9_again_and_again_never_regenerates_a_turn_nor_leaves_a_gap(
    tmp_path: Path,
    tokenizer_dir: Path,
    vocab_size: int,
    chaos_iterations: int,
    chaos_report: Callable[..., Any],
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30)))
    print(f"CHAOS_SEED={seed}")
    rng = random.Random(seed)
    kills = KILLS_PER_ITERATION * chaos_iterations
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 40 + 20 * kills, seed)
    out = tmp_path / "out"
    raw = out / "chat" / RAW_FILE
    resent = 0
    cut = 0
    with simulator(
        "--tokens-per-s", "300", "--vocab-size", str(vocab_size), "--slots", "16",
        "--profile", f"chat={TURN_MEAN}:0.6", "--seed", str(seed % 1000),
    ) as url:  # fmt: skip
        args = run_args(tmp_path / "prompts", out, url, tokenizer_dir, 10**9)
        for _ in range(kills):
            on_disk = (
                {(r["sample_id"], r["turn"]) for r in turn_records(out)} if raw.exists() else set()
            )
            sent_before = ledger(url)
            run = subprocess.Popen(
                [*GEN_TUI, *args], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            target = lines_in(raw) + rng.randint(5, 40)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and run.poll() is None and lines_in(raw) < target:
                time.sleep(0.02)
            os.kill(run.pid, signal.SIGKILL)
            run.wait(timeout=10)
            sent = ledger(url) - sent_before
            assert not set(sent) & on_disk, sorted(set(sent) & on_disk)[:5]
            resent += sum(count - 1 for count in sent.values() if count > 1)
            seen = check_in_order(turn_records(out), turns)
            cut += sum(1 for sample, order in seen.items() if len(order) < turns[sample])
        on_disk = {(r["sample_id"], r["turn"]) for r in turn_records(out)}
        sent_before = ledger(url)
        done = gen_tui(*args)  # the same command, unkilled: to the prompt file's end
        assert done.returncode == 0, done.stderr.decode()
        assert not set(ledger(url) - sent_before) & on_disk
    records = turn_records(out)
    check_whole(records, turns)
    verdict = verify_dataset(out / "chat", {})
    assert verdict.ok, verdict.first
    chaos_report(
        kills=kills,
        records=len(records),
        conversations=len({r["sample_id"] for r in records}),
        cut_by_kills=cut,
        lost=0,
        duplicated=0,
        turns_resent_within_a_start=resent,
    )
