"""The watcher's command line: which mode runs, and the one clean exit when stdout goes.

Why a module of its own: it comes last in the program :func:`gen_tui.backends.watcher.source`
builds, so its `__main__` guard runs the watcher once every other part is defined.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from .dataset import HEARTBEAT_S, POLL_S, parse_dataset_arg, watch
from .emit import _emit
from .notices import notice_request
from .processes import ps
from .prompt_lines import heads_request
from .starts import start
from .tails import tail_request


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gen-tui-watcher")
    parser.add_argument("--ps", metavar="REGEX", help="list runs instead of watching")
    parser.add_argument("--pids", help="with --ps: these pids (comma-separated) only")
    parser.add_argument("--output-dir", help="with --ps: where dataset folders live")
    parser.add_argument("--start", metavar="JSON", help="start a run (see the module's doc)")
    parser.add_argument("--tail", metavar="JSON", help="a file's last lines (module's doc)")
    parser.add_argument("--heads", metavar="JSON", help="prompt heads of samples (the same)")
    parser.add_argument("--notice", metavar="JSON", help="write a drain notice (the same)")
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--interval", type=float, default=POLL_S)
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT_S)
    parser.add_argument("--telemetry", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--metrics-url", action="append", default=[], metavar="URL")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(argv)
    try:
        # One-shot requests: a JSON object in, one JSON report out.
        one_shot = (
            ("start", start),
            ("tail", tail_request),
            ("heads", heads_request),
            ("notice", notice_request),
        )
        for flag, answer in one_shot:
            given = getattr(args, flag)
            if given is not None:
                spec = json.loads(given)
                if not isinstance(spec, dict):
                    raise ValueError("--%s takes a JSON object" % flag)
                _emit(answer(spec))
                return 0
        if args.ps is not None:
            pids = [int(p) for p in args.pids.split(",") if p] if args.pids else None
            _emit(ps(args.ps, args.output_dir, pids))
            return 0
        if not args.rest:
            parser.error("give OUTPUT_DIR and at least one DATASET")
        output_dir = os.path.expanduser(args.rest[0])
        tails = [parse_dataset_arg(output_dir, arg) for arg in args.rest[1:]]
        watch(
            output_dir,
            tails,
            args.once,
            args.interval,
            args.heartbeat,
            args.telemetry,
            args.metrics_url,
        )
    except ValueError as exc:
        _emit({"type": "error", "message": str(exc)})
        return 2
    except (BrokenPipeError, KeyboardInterrupt):
        # The client went away (a dropped SSH channel closes our stdout): exit quietly.
        # Python flushes stdout at exit: point it where that cannot fail again (as the
        # Python docs advise for SIGPIPE).
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
