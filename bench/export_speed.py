"""Export speed: `gen-tui export --format specforge` vs a plain json.loads + json.dumps loop.

The baseline is the least any exporter does: read each record, write it back out. Export
does more (rebuilds every prompt's ids with the chat template, checks the prompt hash and
each record, joins prompt and answer ids and the template's end-of-turn markup, writes the
loss mask) and must still be at least
as fast. Records are B2-like (lognormal lengths, mean about 3,700 ids).
"""

from __future__ import annotations

import json
import random
import resource
import time
from pathlib import Path

from bench.common import CACHE, Table, prompts, publish, tokenizer, verdict
from gen_tui.backends.export.exporter import ExportOptions, export_run
from gen_tui.backends.store.manifest import RunSetup, file_sha256, record_setup, template_sha256
from gen_tui.backends.store.prompts import Prompt, iter_prompts
from gen_tui.backends.store.records import RAW_FILE, Completion
from gen_tui.backends.tokenizer import encode_many, load_tokenizer


def make_run(count: int) -> Path:
    """A cached output dir with one dataset of `count` records, its prompts and manifest."""
    out = CACHE / f"export-{count}"
    folder = out / "B2"
    if (folder / RAW_FILE).exists():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tok_dir = tokenizer()
    tok = load_tokenizer(str(tok_dir))
    prompt_file = prompts("B2", count)
    items = [p for p in iter_prompts(prompt_file) if isinstance(p, Prompt)]
    rng = random.Random(0)
    vocab = len(tok)
    partial = folder / (RAW_FILE + ".partial")
    with open(partial, "wb") as handle:
        for start in range(0, len(items), 256):
            batch = items[start : start + 256]
            for prompt, ids in zip(
                batch, encode_many(tok, [p.messages for p in batch]), strict=True
            ):
                length = min(16384, max(1, int(rng.lognormvariate(7.9, 0.8))))
                output = [rng.randrange(3, vocab) for _ in range(length)]
                line = Completion(prompt.sample_id, length, len(ids), "stop", output, "x" * length)
                handle.write(line.to_line())
    setup = RunSetup(
        prompts=str(prompt_file.resolve()),
        prompts_sha256=file_sha256(prompt_file),
        tokenizer=str(tok_dir.resolve()),
        chat_template_sha256=template_sha256(tok),
        sampling={"max_new_tokens": 16384},
        api="sglang",
        model=None,
    )
    record_setup(folder, "B2", setup, 0)
    partial.replace(folder / RAW_FILE)
    return out


def baseline(raw: Path, target: Path) -> int:
    count = 0
    with open(raw, "rb") as source, open(target, "w") as sink:
        for line in source:
            sink.write(json.dumps(json.loads(line)) + "\n")
            count += 1
    return count


def run(smoke: bool, write: bool) -> bool:
    count = 200 if smoke else 20000
    out = make_run(count)
    # The tokenizer loaded once before the clock starts, as `make_run` does when it builds
    # the run: the first load in a process imports transformers (about 0.7 s here, 10x the
    # smoke's export), so a cached run would otherwise time that import and a fresh one not.
    load_tokenizer(str(tokenizer()))
    raw = out / "B2" / RAW_FILE
    size = raw.stat().st_size / 1e6
    target = CACHE / "export-speed.jsonl"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with open(target, "wb", buffering=1 << 20) as sink:
        total = export_run(out, None, ExportOptions("specforge"), sink.write, lambda line: None)
    ours = time.perf_counter() - started
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert total.exported == total.records == count, total.line("all")
    started = time.perf_counter()
    assert baseline(raw, target) == count
    theirs = time.perf_counter() - started
    target.unlink()
    ratio = theirs / ours
    table = Table(
        "export_speed",
        "Export speed (target: >= 1x a json.loads + json.dumps loop)",
        f"python -m bench export_speed{' --smoke' if smoke else ''}",
        ["records", "gen-tui export MB/s", "json loop MB/s", "ratio", "peak RSS growth", "target"],
    )
    table.add(
        f"{size:.0f} MB, {count} records",
        f"{size / ours:.0f}",
        f"{size / theirs:.0f}",
        f"{ratio:.1f}x",
        f"{max(0.0, peak):.0f} MB",
        verdict(ratio >= 1),
    )
    table.notes.append(
        "Export includes loading the tokenizer (transformers imported before the clock, "
        "cached run or not), hashing the prompt file, indexing the records, rebuilding every "
        "prompt's ids with the chat template (batched) and closing each answer with the "
        "template's end-of-turn markup; the loop only reads and rewrites each record. MB are "
        "of the record file."
    )
    publish(table, write)
    return ratio >= 1
