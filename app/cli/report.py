"""`gen-tui report`: the command-line end of `backends/report`.

The table goes to stdout (it is the answer); unreadable lines and where the page went go
to stderr, one line each. The page is written beside its target and renamed into place,
so a browser never opens half of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gen_tui.app.cli.examples import examples
from gen_tui.app.cli.exits import EXIT_ERROR, EXIT_OK
from gen_tui.app.cli.output import add_include_folder, named_folders, write_whole
from gen_tui.app.cli.output import error as _error
from gen_tui.app.cli.output import say as _say
from gen_tui.backends.untrusted import one_line


def add_report(commands: argparse._SubParsersAction[Any]) -> None:
    report = commands.add_parser(
        "report",
        help="a run's per-dataset summary, and with --html one page of plots",
        description="Summarize each dataset of a run from its files (records, errors, "
        "history.jsonl, progress.json): tokens, samples, wall time, tok/s, mean length, share "
        "truncated, latency p50/p99, errors, cost, overshoot. Works on a live run too.",
        **examples("report"),
    )
    report.add_argument("--output-dir", type=Path, required=True, help="the run's --output-dir")
    report.add_argument(
        "--datasets",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated names (default: all)",
    )
    report.add_argument(
        "--html", type=Path, metavar="FILE", help="also write one self-contained HTML page"
    )
    add_include_folder(report)


def report_main(args: argparse.Namespace) -> int:
    from gen_tui.backends.report import summarize
    from gen_tui.backends.report.html import render
    from gen_tui.backends.report.table import conversations, text_table

    if args.html is not None and args.html.is_dir():
        # Said before the page is made: writing it would fail on a temporary file's name
        # inside the folder (`cannot write /tmp/.tmp.rk2muo7c.tmp`), not the name given.
        return _error(
            f"--html {args.html} is a folder: give a file, like {args.html / 'report.html'}"
        )
    folders = named_folders(args)
    if folders is None:
        return EXIT_ERROR
    reports = [summarize(folder) for folder in folders]
    for line in text_table(reports):
        print(one_line(line))
    for report in reports:
        if (said := conversations(report)) is not None:
            print(one_line(said))
    for report in reports:
        for reason, count in report.reasons.most_common(3):
            print(one_line(f"{report.name}: {count:,} failed: {reason}"))
    sys.stdout.flush()
    for report in reports:
        for problem in report.problems:
            _say(f"gen-tui: skipped {problem}")
        if report.bad_lines > len(report.problems):
            more = report.bad_lines - len(report.problems)
            _say(f"gen-tui: {report.name}: and {more:,} more unreadable lines")
    if args.html is not None:
        page = render(reports, str(args.output_dir.resolve())).encode("utf-8")
        try:
            write_whole(args.html, lambda write: write(page))
        except OSError as exc:
            return _error(f"cannot write {exc.filename or args.html}: {exc.strerror or exc}")
        _say(f"wrote {args.html}")
    return EXIT_OK if reports else EXIT_ERROR
