"""What the file-making subcommands (`export`, `report`, `verify`) share: lines for a person
on stderr (stdout may be the data), one-line errors, a file that appears whole or not at
all, the flag that takes in a folder another user could have written, and the dataset
folders a command's flags name.
"""

from __future__ import annotations

import argparse
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


def add_include_folder(parser: argparse.ArgumentParser) -> None:
    """`--include-folder NAME` (repeatable): export, verify and report leave out dataset
    folders another user could have written (`backends/export/folders.py`); this takes one
    in by name, when its records are meant to join."""
    parser.add_argument(
        "--include-folder",
        action="append",
        default=[],
        metavar="NAME",
        help="take in dataset folder NAME even though another user owns it or can write in "
        "it (left out by default; repeatable)",
    )


def named_folders(args: argparse.Namespace) -> list[Path] | None:
    """The dataset folders `--output-dir`, `--datasets` and `--include-folder` name (`report`,
    `verify`); None once an error line has said why there are none."""
    from gen_tui.backends.export.exporter import ExportError, dataset_folders

    try:
        folders = dataset_folders(args.output_dir, args.datasets, say, args.include_folder)
    except ExportError as exc:
        error(str(exc))
        return None
    if not folders:
        error(f"{args.output_dir} holds no dataset folder")
        return None
    return folders
