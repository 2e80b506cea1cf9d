"""`--turns all` in real processes (issue 35): `gen-tui run` against a `gen-tui sim` over a
dataset of 3-to-8-turn conversations. A budget ends within its precision with every
conversation begun finished; a `kill -9` mid-run and the same command again regenerate
no turn that has a record (the simulator's ledger of the requests it received, read from
/_sim/stats, against the turns on disk at the kill) and leave no conversation with a gap.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.common import simulator
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.store.records import RAW_FILE
from tests.support.run_output import ENV, GEN_TUI, gen_tui

pytestmark = pytest.mark.timeout(300)
TURN_MEAN = 40
"""The simulator's mean answer (tokens) for dataset `chat`."""


def write_conversations(path: Path, count: int, seed: int = 7) -> dict[str, int]:
    """`count` conversations of 3 to 8 user turns (each with another model's answer, which
    the run must not send); returns each id's turn count."""
    rng = random.Random(seed)
    turns: dict[str, int] = {}
    lines = []
    for index in range(count):
        n = rng.randint(3, 8)
        messages = [{"role": "system", "content": "You answer briefly."}]
        for turn in range(1, n + 1):
            messages.append({"role": "user", "content": f"question {turn} of talk {index}"})
            messages.append({"role": "assistant", "content": f"an old answer {turn}"})
        turns[f"t{index}"] = n
        lines.append(json.dumps({"id": f"t{index}", "messages": messages}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return turns


def run_args(prompts: Path, out: Path, url: str, tokenizer: Path, budget: int) -> list[str]:
    return [
        "run", "--prompts-dir", str(prompts), "--tokenizer", str(tokenizer),
        "--output-dir", str(out), "--server-url", url, "--plain", "--turns", "all",
        "--max-new-tokens", "200", "--max-tokens-per-dataset", str(budget),
        "--concurrency", "8",
    ]  # fmt: skip


def turn_records(out: Path) -> list[dict[str, Any]]:
    """The complete lines of the dataset's record file (a torn last line left out)."""
    raw = (out / "chat" / RAW_FILE).read_bytes()
    return [json.loads(line) for line in raw.split(b"\n")[:-1] if line.strip()]


def check_whole(records: list[dict[str, Any]], turns: dict[str, int]) -> int:
    """Assert each conversation on disk has turns 1..n once, in order, n its prompt's turn
    count; return the tokens."""
    seen: dict[str, list[int]] = {}
    for record in records:
        assert record["turns"] == turns[record["sample_id"]]
        seen.setdefault(record["sample_id"], []).append(record["turn"])
    for sample, order in seen.items():
        assert order == list(range(1, turns[sample] + 1)), (sample, order)
    return sum(record["completion_tokens"] for record in records)


def ledger(url: str) -> Counter[tuple[str, int]]:
    """(conversation, turn) of every request the simulator received, counted (its rids)."""
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as answer:
        stats = json.load(answer)
    received: Counter[tuple[str, int]] = Counter()
    for rid in stats["max_new_tokens"]:
        sample, _, turn = rid.split("/")[1].partition("#")
        received[(sample, int(turn))] += 1
    return received


def test_a_budget_ends_within_precision_with_every_conversation_begun_finished(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 120)
    budget = 8_000
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size), "--slots", "16",
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        done = gen_tui(*run_args(tmp_path / "prompts", out, url, tokenizer_dir, budget))
        received = ledger(url)
    assert done.returncode == 0, done.stderr.decode()
    records = turn_records(out)
    tokens = check_whole(records, turns)  # every conversation begun is finished
    begun = {record["sample_id"] for record in records}
    assert len(begun) < len(turns)  # the budget, not the file, ended it
    conversation = TURN_MEAN * sum(turns.values()) / len(turns)
    # Predictive crosses its budget; the crossing is at most about one conversation.
    assert budget <= tokens <= budget + 2 * conversation, (tokens, budget)
    assert max(received.values()) == 1  # no turn sent twice (no faults in this run)
    assert verify_dataset(out / "chat", {}).ok


def test_kill_9_mid_run_and_the_same_command_regenerate_no_turn_and_leave_no_gap(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 60)
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "300", "--vocab-size", str(vocab_size), "--slots", "16",
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        args = run_args(tmp_path / "prompts", out, url, tokenizer_dir, 10_000)
        first = subprocess.Popen([*GEN_TUI, *args], env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        raw = out / "chat" / RAW_FILE
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if raw.exists() and raw.read_bytes().count(b"\n") >= 40:
                break
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        before = turn_records(out)
        assert 40 <= len(before) < sum(turns.values())
        on_disk = {(record["sample_id"], record["turn"]) for record in before}
        unfinished = {r["sample_id"] for r in before if r["turn"] < r["turns"]} - {
            r["sample_id"] for r in before if r["turn"] == r["turns"]
        }
        assert unfinished  # the kill came mid-conversation
        sent_before = ledger(url)

        again = gen_tui(*args)
        assert again.returncode == 0, again.stderr.decode()
        sent_after = ledger(url) - sent_before
    assert not set(sent_after) & on_disk  # no turn with a record was sent again
    after = turn_records(out)
    check_whole(after, turns)  # no gap, no duplicate, in order
    finished = {r["sample_id"] for r in after if r["turn"] == r["turns"]}
    assert unfinished <= finished  # the conversations cut by the kill were resumed
    assert {r["sample_id"] for r in after} == finished  # and none is left half done
    assert verify_dataset(out / "chat", {}).ok
