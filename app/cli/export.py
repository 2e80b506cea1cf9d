"""`gen-tui export` and `gen-tui verify`: the command-line ends of `backends/export`.

Accounting and summary lines go to stderr, so that `--to -` leaves stdout to the rows. An
export goes to a temporary file beside its target and is renamed into place only once
complete: a refused or interrupted export never leaves a file a trainer could take whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gen_tui.app.cli.exits import EXIT_ABORTED, EXIT_ERROR, EXIT_OK
from gen_tui.app.cli.output import error as _error
from gen_tui.app.cli.output import named_folders, write_whole
from gen_tui.app.cli.output import say as _say


def export_main(args: argparse.Namespace) -> int:
    from gen_tui.backends.export.exporter import ExportError, ExportOptions, export_run

    options = ExportOptions(
        args.format, args.max_length, args.drop_truncated, tuple(args.include_folder)
    )
    try:
        if args.to == "-":
            out = sys.stdout.buffer
            export_run(args.output_dir, args.datasets, options, out.write, _say)
            out.flush()
            return EXIT_OK
        target = Path(args.to) if args.to else args.output_dir / f"export.{args.format}.jsonl"
        write_whole(
            target, lambda write: export_run(args.output_dir, args.datasets, options, write, _say)
        )
    except ExportError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write {exc.filename or args.to}: {exc.strerror or exc}")
    except KeyboardInterrupt:  # the temporary file is gone already; nothing half-written
        return EXIT_ABORTED
    _say(f"wrote {target}")
    return EXIT_OK


def verify_main(args: argparse.Namespace) -> int:
    from gen_tui.backends.export.verify import verify_dataset

    folders = named_folders(args)
    if folders is None:
        return EXIT_ERROR
    tokenizers: dict[str, Any] = {}
    failed = 0
    for folder in folders:
        verdict = verify_dataset(folder, tokenizers)
        _say(verdict.line())
        for problem in verdict.first:
            _say(f"  {problem}")
        if verdict.problems > len(verdict.first):
            _say(f"  ... and {verdict.problems - len(verdict.first)} more")
        failed += not verdict.ok
    if failed:
        _say(f"{failed} of {len(folders)} datasets have problems")
        return EXIT_ERROR
    return EXIT_OK
