"""A simulated `nvidia-smi` for the demo: GPUs whose load follows the simulated servers'.

The demo has no GPU, yet its panel should show what a GPU box shows. Put on the watcher's
PATH (`write_standin`), this answers the watcher's `--query-gpu=... --format=csv,...` with
`GPUS` tensor-parallel GPUs that run in step: utilisation is the servers' busy share (their
running requests over their batch size), memory the weights plus their KV use, and power
and temperature follow utilisation. Only the demo uses it; a real box runs the real one.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import urllib.request
from pathlib import Path

from gen_tui.backends.telemetry.metrics import MetricsError, parse_metrics

GPUS = 8
MEMORY_MIB = 81559
WEIGHTS = 0.55
"""The share of each GPU's memory the model's weights take; the KV cache gets the rest."""
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> bytes | None:
    try:
        with _NO_PROXY.open(url, timeout=1.0) as response:
            data: bytes = response.read(1 << 20)
            return data
    except (OSError, ValueError):
        return None


def load(urls: list[str]) -> tuple[float, float]:
    """(busy share 0..1, KV use 0..1) of the servers at `urls` (0, 0 when none answers)."""
    running = slots = 0.0
    kv: list[float] = []
    for url in urls:
        text, info = _get(f"{url}/metrics"), _get(f"{url}/get_server_info")
        if text is None or info is None:
            continue
        try:
            metrics = parse_metrics(text.decode("utf-8", "replace"))
            batch = json.loads(info).get("max_running_requests") or 0
        except (MetricsError, ValueError, AttributeError):
            continue
        running += metrics.running or 0
        slots += batch
        kv.append(metrics.kv_usage or 0.0)
    busy = min(1.0, running / slots) if slots else 0.0
    return busy, (sum(kv) / len(kv) if kv else 0.0)


def rows(busy: float, kv: float, count: int = GPUS) -> list[str]:
    """nvidia-smi's CSV rows (no header, no units) for GPUs at this load."""
    lines = []
    for index in range(count):
        util = round(min(100.0, busy * 100 * (0.96 + 0.01 * (index % 4))))
        used = round(MEMORY_MIB * (WEIGHTS + (1 - WEIGHTS - 0.05) * kv))
        power = 70 + 6.3 * util
        temp = 34 + 0.45 * util
        lines.append(
            f"{index}, NVIDIA H100 (simulated), {util}, {used}, {MEMORY_MIB}, "
            f"{power:.2f}, {temp:.0f}"
        )
    return lines


def write_standin(folder: Path, urls_file: Path) -> Path:
    """An executable `nvidia-smi` in `folder` answering from the servers listed (one URL a
    line) in `urls_file`; returns `folder`, to put first on a watcher's PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    # -P: the working folder (the watcher's, maybe a shared one) is not on sys.path
    command = [sys.executable, "-P", "-m", "gen_tui.backends.sim.nvidia_smi", "--urls-file"]
    script.write_text(f'#!/bin/sh\nexec {shlex.join(command)} {shlex.quote(str(urls_file))} "$@"\n')
    script.chmod(0o755)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nvidia-smi (simulated)")
    parser.add_argument("--urls-file", type=Path, required=True)
    parser.add_argument("--gpus", type=int, default=GPUS)
    parser.add_argument("--query-gpu", default="")
    parser.add_argument("--format", default="")
    args = parser.parse_args(argv)
    try:
        urls = [line.strip() for line in args.urls_file.read_text().splitlines() if line.strip()]
    except OSError:
        urls = []
    print("\n".join(rows(*load(urls), count=args.gpus)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
