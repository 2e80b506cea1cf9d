"""Resume scan: MB/s counting tokens and sample ids of a record file, vs json.loads per line."""

from __future__ import annotations

import json
import random
import resource
import time
from pathlib import Path

from bench.common import CACHE, Table, publish, verdict
from gen_tui.backends.store.records import Completion, scan_records


def make_file(megabytes: int, seed: int = 0) -> Path:
    """A cached raw_responses.jsonl of about `megabytes` MB in the engine's own layout.

    B2-like lengths (lognormal, mean about 3,700 tokens), every record with its output ids
    and text; another `seed` gives another file of the same shape.
    """
    path = CACHE / (f"raw-{megabytes}MB.jsonl" if seed == 0 else f"raw-{megabytes}MB-{seed}.jsonl")
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = 0
    index = 0
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        while written < megabytes * 1_000_000:
            length = min(16384, max(1, int(rng.lognormvariate(7.9, 0.8))))
            ids = [rng.randrange(3, 32000) for _ in range(length)]
            line = Completion(f"B2-{index}", length, 200, "stop", ids, text="x" * length).to_line()
            handle.write(line)
            written += len(line)
            index += 1
    partial.replace(path)  # an interrupted run leaves no short file under the cached name
    return path


def baseline(path: Path) -> tuple[int, int]:
    tokens = 0
    ids = set()
    with open(path, "rb") as handle:
        for line in handle:
            record = json.loads(line)
            tokens += record["completion_tokens"]
            ids.add(str(record["sample_id"]))
    return tokens, len(ids)


def run(smoke: bool, write: bool) -> bool:
    megabytes = 20 if smoke else 500
    path = make_file(megabytes)
    size = path.stat().st_size / 1e6
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    scan = scan_records(path)
    ours = time.perf_counter() - started
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    started = time.perf_counter()
    tokens, samples = baseline(path)
    theirs = time.perf_counter() - started
    assert (scan.tokens, len(scan.done)) == (tokens, samples), "scan disagrees with json"
    ratio = theirs / ours
    table = Table(
        "resume_scan",
        "Resume scan (target: >= 5x json.loads per line)",
        f"python -m bench resume_scan{' --smoke' if smoke else ''}",
        ["file", "gen-tui MB/s", "json.loads MB/s", "ratio", "peak RSS growth", "target"],
    )
    table.add(
        f"{size:.0f} MB, {scan.records} records",
        f"{size / ours:.0f}",
        f"{size / theirs:.0f}",
        f"{ratio:.1f}x",
        f"{max(0.0, peak):.0f} MB",
        verdict(ratio >= 5),
    )
    publish(table, write)
    return ratio >= 5
