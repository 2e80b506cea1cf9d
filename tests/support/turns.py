"""`--turns all` in real processes (issue 35): the conversations a test runs, its
command line, and the checks both the integration test and the crash loop make: each
conversation on disk whole, once and in order, and the simulator's ledger of the turns it
was sent (its /_sim/stats rids, which name conversation#turn)."""

from __future__ import annotations

import json
import random
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from gen_tui.backends.store.records import RAW_FILE

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
    """`gen-tui run --turns all` over `prompts` with a token budget, plain output."""
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


def check_in_order(records: list[dict[str, Any]], turns: dict[str, int]) -> dict[str, list[int]]:
    """Assert each conversation on disk has turns 1..m (m at most its prompt's turn count)
    once and in order, each naming that count; return each conversation's turns."""
    seen: dict[str, list[int]] = {}
    for record in records:
        assert record["turns"] == turns[record["sample_id"]]
        seen.setdefault(record["sample_id"], []).append(record["turn"])
    for sample, order in seen.items():
        assert order == list(range(1, len(order) + 1)), (sample, order)
    return seen


def check_whole(records: list[dict[str, Any]], turns: dict[str, int]) -> int:
    """Assert each conversation on disk has all its turns, once and in order; return the
    tokens."""
    for sample, order in check_in_order(records, turns).items():
        assert len(order) == turns[sample], (sample, order)
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


def mask_runs(tokenizer: Any, row: dict[str, Any]) -> list[str]:
    """The texts of a specforge row's runs of mask 1, in order: one per assistant turn."""
    runs: list[list[int]] = []
    previous = 0
    for token, bit in zip(row["input_ids"], row["loss_mask"], strict=True):
        if bit and not previous:
            runs.append([])
        if bit:
            runs[-1].append(token)
        previous = bit
    return [str(tokenizer.decode(run)) for run in runs]
