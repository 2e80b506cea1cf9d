"""Multi-turn: `--turns all` against `--turns last`, tok/s on the same simulator at the same
concurrency (issue 35; target >= 0.9x).

What could cost `--turns all` throughput: each turn's request is built and tokenized as the
previous answer comes back (in the engine's one worker thread), and a conversation's slot
waits for that between its turns, where `--turns last` has its prompts tokenized ahead.
Both runs read the same conversations (3 to 8 user turns); tok/s is the completion tokens
on disk over the span from the first record to the last (start-up left out).

Then the prefix cache hit rate with and without server affinity: `--turns all` on two
simulators (half the slots each), once as it runs (each turn to the server that answered
the conversation's turn before) and once with `--no-server-affinity`; each simulator's
`sglang:cache_hit_rate` (a turn's history counts as cached only on the server that
answered the turn before: backends/sim/prefix_cache.py), the two averaged. Not measured:
a real SGLang on the CPU.
"""

from __future__ import annotations

import json
import random
import subprocess
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from bench.common import ENV, GEN_TUI, SCRATCH, Table, publish, simulator, tokenizer, verdict
from gen_tui.backends.store.records import RAW_FILE
from gen_tui.backends.tokenizer import load_tokenizer

CONCURRENCY = 32
TURN_MEAN = 120


def conversations(path: Path, count: int) -> int:
    """Write `count` conversations of 3 to 8 user turns; return the number of turns."""
    rng = random.Random(0)
    lines, turns = [], 0
    for index in range(count):
        n = rng.randint(3, 8)
        turns += n
        messages = [{"role": "system", "content": "You answer briefly."}]
        for turn in range(1, n + 1):
            messages.append({"role": "user", "content": f"question {turn} of talk {index}"})
            messages.append({"role": "assistant", "content": f"an old answer {turn}"})
        lines.append(json.dumps({"id": f"t{index}", "messages": messages}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return turns


STEADY = 0.9
"""The share of a run's answers (first by time) its steady tok/s is measured over."""


def rate(out: Path) -> tuple[int, int, float, float, float]:
    """(records, completion tokens, tokens/s from the first record to the last, tokens/s
    over the first STEADY of the records, seconds the rest took): the end apart."""
    records = [json.loads(line) for line in (out / "chat" / RAW_FILE).read_bytes().splitlines()]
    records.sort(key=lambda record: record["created"])
    tokens = sum(record["completion_tokens"] for record in records)
    created = [record["created"] for record in records]
    cut = max(2, int(len(records) * STEADY))
    steady = sum(record["completion_tokens"] for record in records[:cut])
    return (
        len(records),
        tokens,
        tokens / max(created[-1] - created[0], 1e-3),
        steady / max(created[cut - 1] - created[0], 1e-3),
        created[-1] - created[cut - 1],
    )


def hit_rate(url: str) -> float:
    """The simulator's `sglang:cache_hit_rate` from its /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    line = next(line for line in text.splitlines() if line.startswith("sglang:cache_hit_rate{"))
    return float(line.rsplit(" ", 1)[1])


def affinity(prompts: Path, tok: Path, vocab: int, root: Path) -> dict[str, float]:
    """The mean hit rate of two fresh simulators over one `--turns all` run, with server
    affinity ("on") and without ("off")."""
    rates = {}
    for mode in ("on", "off"):
        with ExitStack() as stack:
            urls = [
                stack.enter_context(simulator(
                    "--tokens-per-s", "400", "--vocab-size", str(vocab),
                    "--slots", str(CONCURRENCY // 2), "--profile", f"chat={TURN_MEAN}:0.6",
                ))
                for _ in range(2)
            ]  # fmt: skip
            argv = [
                *GEN_TUI, "run", "--prompts-dir", str(prompts.parent), "--tokenizer", str(tok),
                "--output-dir", str(root / f"out-affinity-{mode}"), "--plain", "--turns", "all",
                "--concurrency", str(CONCURRENCY), "--max-new-tokens", "400",
                *[flag for url in urls for flag in ("--server-url", url)],
                *(["--no-server-affinity"] if mode == "off" else []),
            ]  # fmt: skip
            done = subprocess.run(argv, env=ENV, capture_output=True, check=False, timeout=3600)
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode()[-2000:])
            rates[mode] = sum(hit_rate(url) for url in urls) / len(urls)
    return rates


def run(smoke: bool, write: bool) -> bool:
    count = 40 if smoke else 400
    root = SCRATCH / "multiturn"
    prompts = root / "prompts" / "chat.jsonl"
    turns = conversations(prompts, count)
    flat = root / "flat" / "chat.jsonl"
    conversations(flat, turns)  # as many lines as `all` has turns: the same requests' worth
    tok = tokenizer()
    vocab = len(load_tokenizer(str(tok)))
    results = {}
    with simulator(
        "--tokens-per-s", "400", "--vocab-size", str(vocab), "--slots", str(CONCURRENCY),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        for mode in ("last", "all"):
            out = root / f"out-{mode}"
            source = prompts if mode == "all" else flat
            argv = [
                *GEN_TUI, "run", "--prompts-dir", str(source.parent), "--tokenizer", str(tok),
                "--output-dir", str(out), "--server-url", url, "--plain", "--turns", mode,
                "--concurrency", str(CONCURRENCY), "--max-new-tokens", "400",
            ]  # fmt: skip
            done = subprocess.run(argv, env=ENV, capture_output=True, check=False, timeout=3600)
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode()[-2000:])
            results[mode] = rate(out)
    ratio = results["all"][2] / results["last"][2]
    rates = affinity(prompts, tok, vocab, root)
    table = Table(
        "multiturn",
        "Multi-turn: --turns all against --turns last (target: >= 0.9x the tok/s)",
        f"python -m bench multiturn{' --smoke' if smoke else ''}",
        ["--turns", "records", "completion tokens", "tok/s", "ratio", "target",
         f"tok/s, first {STEADY:.0%}", "ratio", f"last {1 - STEADY:.0%} took"],
    )  # fmt: skip
    steady = results["all"][3] / results["last"][3]
    for mode in ("last", "all"):
        records, tokens, speed, first, tail = results[mode]
        cell = f"{ratio:.2f}x" if mode == "all" else ""
        met = verdict(ratio >= 0.9) if mode == "all" else ""
        table.add(
            mode, f"{records:,}", f"{tokens:,}", f"{speed:,.0f}", cell, met, f"{first:,.0f}",
            f"{steady:.2f}x" if mode == "all" else "", f"{tail:.1f} s",
        )  # fmt: skip
    table.notes.append(
        f"{count} conversations ({turns} user turns, 3 to 8 each), one `gen-tui sim` with "
        f"{CONCURRENCY} slots at 400 tok/s each (mean answer {TURN_MEAN}), --concurrency "
        f"{CONCURRENCY}: `all` answers every turn; `last` answers the last turn of as many "
        f"conversations ({turns}) as `all` has turns, the same number of requests."
    )
    table.notes.append(
        f"Prefix cache hit rate, `--turns all` on two simulators of {CONCURRENCY // 2} "
        f"slots: {rates['on']:.0%} with server affinity, {rates['off']:.0%} with "
        "`--no-server-affinity` (the simulators' `sglang:cache_hit_rate`, averaged: a turn's "
        "history is cached only on the server that answered the turn before)."
    )
    table.notes.append(
        f"Where `all` loses, measured apart: its end. Over the first {STEADY:.0%} of the "
        f"answers it runs at {steady:.2f}x `last`'s tok/s; its last {1 - STEADY:.0%} take "
        f"{results['all'][4]:.1f} s against `last`'s {results['last'][4]:.1f} s. The last "
        "conversations run their turns one after another while the slots their neighbours "
        "left idle have nothing to take (8 turns of a 3-to-8 mix take 8 answers' time in "
        "one slot); `last` ends within about one answer. The simulator's speed does not "
        "depend on the prompt's length (its prefix cache counts hits; it saves no time), "
        "so the ratio is the client's cost of building each turn plus that end."
    )
    publish(table, write)
    return ratio >= 0.9
