"""What the file-making subcommands (`export`, `report`) share: lines for a person on
stderr (stdout may be the data), one-line errors, and a file that appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.app.cli.exits import EXIT_ERROR
from gen_tui.backends.untrusted import one_line


def say(line: str) -> None:
    """A line for the person, on stderr: stdout may be the rows (`--to -`). One line,
    bounded, no controls: it often quotes a file name or a value from someone's file."""
    print(one_line(line), file=sys.stderr, flush=True)


def error(message: str) -> int:
    """One `gen-tui: error:` line; the exit code of a command that failed."""
    print(f"gen-tui: error: {one_line(message)}", file=sys.stderr)
    return EXIT_ERROR


def write_whole(target: Path, run: Callable[[Callable[[bytes], Any]], Any]) -> None:
    """Call `run(write)` into a temporary file beside `target`, then rename it into place:
    a refused or interrupted command never leaves a file a trainer could take whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            run(handle.write)
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
