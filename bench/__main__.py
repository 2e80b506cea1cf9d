"""`python -m bench [--smoke] [--write] [NAME ...]`: run the benchmarks, print their tables.

`--write` updates BENCHMARKS.md. `--smoke` runs seconds-long sizes (what CI runs) and never
writes. The exit code is 0 even when a target is missed: targets are reported, not asserted.
"""

from __future__ import annotations

import argparse
import importlib
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

NAMES = [
    "resume_scan",
    "budget_precision",
    "budget_sweep",
    "client_overhead",
    "saturation",
    "remote_attach",
    "tui_cost",
    "memory",
    "export_speed",
    "concurrency_auto",
    "scale",
    "batch_lane",
    "multiturn",
    "fleet_plan",
    "fleet_batch",
]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", choices=[*NAMES, []], metavar="NAME")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds each")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    missed = []
    for name in args.names or NAMES:
        module = importlib.import_module(f"bench.{name}")
        if not module.run(smoke=args.smoke, write=args.write and not args.smoke):
            missed.append(name)
    if missed:
        print(f"targets missed: {', '.join(missed)} (see the tables above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
