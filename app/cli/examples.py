"""The example at the end of each command's `--help` (argparse's epilog).

Why a module of its own: a new user reads the example before the flags, and the commands
are built in three modules (parser.py, report.py, alert.py) that each need theirs.
"""

from __future__ import annotations

import argparse
from typing import Any

EXAMPLES = {
    "gen-tui": """examples:
  gen-tui --demo                                   the panel on a built-in simulator
  gen-tui --host gpu-box --remote-dir /data/out    watch a GPU box over SSH
  gen-tui run --demo                               the headless engine on the same demo""",
    "run": """example:
  gen-tui run --prompts-dir prompts/ --tokenizer /models/Kimi-K2.5 \\
      --server-url http://127.0.0.1:30000 --max-tokens-per-dataset 10M --output-dir output/""",
    "export": """example:
  gen-tui export --output-dir output/ --format sharegpt --datasets B1_glaive --to b1.jsonl""",
    "verify": """example:
  gen-tui verify --output-dir output/ --datasets B1_glaive,B2_opencodeinstruct""",
    "report": """example:
  gen-tui report --output-dir output/ --html report.html""",
    "servers": """examples:
  gen-tui servers --config gen-tui.toml up          start (or adopt) them and keep them up
  gen-tui servers --config gen-tui.toml status      state, pid, uptime, restarts, last log line
  gen-tui servers --config gen-tui.toml restart gpu0""",
    "alert": """examples:
  gen-tui alert --config gen-tui.toml           where its [alerts] go, on which events
  gen-tui alert --config gen-tui.toml --test    send a test alert now""",
}
"""Each command's `--help` ends with a line to copy: a new user reads an example first."""


class ExampleFormatter(argparse.HelpFormatter):
    """argparse's formatter, but an example is kept as laid out (its lines, its `\\`)
    while the description is still refilled to the terminal's width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def examples(command: str) -> dict[str, Any]:
    """The add_parser arguments that end `command`'s help with its example, kept as laid
    out (argparse would refill the lines)."""
    return {
        "epilog": EXAMPLES[command],
        "formatter_class": ExampleFormatter,
    }
