"""`--turns all` in real processes (issue 35): `gen-tui run` against a `gen-tui sim` over a
dataset of 3-to-8-turn conversations. A budget ends within its precision with every
conversation begun finished; a `kill -9` mid-run and the same command again regenerate
no turn that has a record (the simulator's ledger of the requests it received, read from
/_sim/stats, against the turns on disk at the kill) and leave no conversation with a gap.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.common import simulator
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.store.records import RAW_FILE
from gen_tui.backends.tokenizer import load_tokenizer
from tests.support.run_output import ENV, GEN_TUI, gen_tui
from tests.support.turns import (
    TURN_MEAN,
    check_whole,
    ledger,
    mask_runs,
    run_args,
    turn_records,
    write_conversations,
)

pytestmark = pytest.mark.timeout(300)


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


@pytest.mark.parametrize("budget", [3_000, 5_000])
def test_strict_ends_at_its_budget_with_every_conversation_begun_finished(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int, budget: int
) -> None:
    """Strict with every answer at its cap (the simulator's answers run to 200): it never
    passes its budget and sends no turn it has no room for. It used to plan a conversation
    at the mean turn count, and count the ones begun in the same pass as one turn: at 5,000
    it sent turns that passed the budget, dropped them ("the server exceeded
    max_new_tokens") and ended with 5 of 8 conversations unfinished (3,000: all 8)."""
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 120)
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size), "--slots", "16",
        "--profile", "chat=1000:0.6",
    ) as url:  # fmt: skip
        args = run_args(tmp_path / "prompts", out, url, tokenizer_dir, budget)
        done = gen_tui(*args, "--budget-mode", "strict")
        received = ledger(url)
    assert done.returncode == 0, done.stderr.decode()
    records = turn_records(out)
    tokens = check_whole(records, turns)  # every conversation begun is finished
    assert {record["completion_tokens"] for record in records} == {200}
    assert tokens <= budget, (tokens, budget)
    # Sent, each once, exactly the turns on disk: none thrown away at the budget.
    assert received == {(r["sample_id"], r["turn"]): 1 for r in records}
    assert b"dropped" not in done.stdout + done.stderr
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


def test_the_openai_path_regenerates_every_turn_with_its_reasoning_kept(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 12)
    out = tmp_path / "out"
    env = {**ENV, "GEN_TUI_TEST_KEY": "sk-turns"}
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size), "--reasoning",
        "reasoning_content", "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        args = run_args(tmp_path / "prompts", out, url, tokenizer_dir, 10**9)
        argv = [*GEN_TUI, *args, "--api", "openai", "--model", "sim-model"]
        done = subprocess.run(
            [*argv, "--api-key-env", "GEN_TUI_TEST_KEY"], capture_output=True, env=env, timeout=110
        )
    assert done.returncode == 0, done.stderr.decode()
    records = turn_records(out)
    check_whole(records, turns)
    assert len(records) == sum(turns.values())
    assert all(record["reasoning"] and record["output_ids"] for record in records)
    assert verify_dataset(out / "chat", {}).ok
    shared = gen_tui("export", "--output-dir", str(out), "--format", "sharegpt", "--to", "-")
    assert shared.returncode == 0, shared.stderr.decode()
    rows = [json.loads(line) for line in shared.stdout.splitlines()]
    assert len(rows) == len(turns), shared.stderr.decode()
    for row in rows:
        assistant = [m for m in row["conversations"] if m["role"] == "assistant"]
        assert len(assistant) == turns[row["metadata"]["sample_id"]]
        assert all(m["reasoning_content"] for m in assistant)
        assert not any(m["content"].startswith("an old answer") for m in assistant)
    # A thinking model's conversation as one row of ids: its template drops an earlier
    # turn's reasoning from the history, so turn k+1's prompt does not start with turn k's
    # answer ids; the row is the whole conversation as the template renders it, and each
    # assistant turn's span of it is in the loss mask (this template keeps no reasoning),
    # up to the last turn's end-of-turn markup (in the mask after each answer).
    ids = gen_tui("export", "--output-dir", str(out), "--format", "specforge", "--to", "-")
    assert ids.returncode == 0, ids.stderr.decode()
    flat = {row["id"]: row for row in map(json.loads, ids.stdout.splitlines())}
    assert len(flat) == len(turns), ids.stderr.decode()
    tokenizer = load_tokenizer(str(tokenizer_dir))
    for row in rows:
        one = flat[row["id"]]
        plain = [{"role": m["role"], "content": m["content"]} for m in row["conversations"]]
        rendered = list(tokenizer.apply_chat_template(plain, tokenize=True, return_dict=False))
        # The whole render, ended with the last turn's end-of-turn markup (as a row built
        # from prompt and answer ids is).
        assert one["input_ids"] == rendered
        assert len(one["loss_mask"]) == len(one["input_ids"])
        answers = [m["content"] for m in row["conversations"] if m["role"] == "assistant"]
        assert mask_runs(tokenizer, one) == [answer + "<|end|>\n" for answer in answers]


def test_max_samples_counts_whole_conversations(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """`--max-samples 5 --turns all`: five conversations, each with all its turns (a limit
    on records would have stopped after five turns, inside the first conversations)."""
    turns = write_conversations(tmp_path / "prompts" / "chat.jsonl", 30)
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        args = run_args(tmp_path / "prompts", out, url, tokenizer_dir, 10**9)
        done = gen_tui(*args, "--max-samples", "5", "--concurrency", "2")
    assert done.returncode == 0, done.stderr.decode()
    records = turn_records(out)
    check_whole(records, turns)  # every conversation begun is finished, in order
    assert len({record["sample_id"] for record in records}) == 5
    assert len(records) > 5
