"""The `gen-tui` command line: `run` (the headless engine), `sim` (the simulated server).

Every user mistake ends in one line on stderr starting with "gen-tui: error:" and a
non-zero exit; tracebacks are for bugs only. The flags themselves (the argparse tree) are
`gen_tui.app.cli.parser`'s; this module is what they do.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gen_tui.app.cli.alert import alerts_of
from gen_tui.app.cli.exits import EXIT_ABORTED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from gen_tui.app.cli.parser import build_parser, run_flags
from gen_tui.backends.alerts import AlertConfig, AlertEvent
from gen_tui.backends.config.file import ConfigError, FileConfig, load_config, merge_run
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError, queued_concurrency
from gen_tui.backends.figures import CountError
from gen_tui.backends.untrusted import one_line


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """What the merge takes of `gen-tui run`'s flags: the settings' and `--datasets`."""
    names = ["datasets", *(spelled.name for spelled in run_flags())]
    return {name: getattr(args, name) for name in names}


def job_nodes(file: FileConfig) -> dict[str, str]:
    """The node each Slurm recipe without an `address` runs on now, as the servers' state
    file says (written by the `gen-tui servers up` or panel that supervises it)."""
    if not any(r.launcher == "slurm" and not r.address for r in file.servers):
        return {}
    from gen_tui.backends.servers.state import StateFile, local_folder

    entries = StateFile(local_folder()).read()
    return {
        name: entry.launched.node
        for name, entry in entries.items()
        if entry.launcher == "slurm" and entry.launched is not None and entry.launched.node
    }


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """Merge flags over the config file over defaults into an :class:`EngineConfig`."""
    from gen_tui.backends.tokenizer import missing_tokenizer

    file = load_config(args.config) if args.config else FileConfig(path=Path("."))
    file.nodes = job_nodes(file)
    config = merge_run(file, _flags(args))
    # Checked here, before any server is contacted (exit 2, as a missing --prompts-dir),
    # and not in merge_run: the panel reads configs of runs whose tokenizer is elsewhere.
    problem = missing_tokenizer(config.tokenizer) if config.tokenizer else None
    if problem is not None:
        raise EngineError(problem)
    return config


async def run_engine(
    config: EngineConfig, plain: bool = False, alerts: AlertConfig | None = None
) -> int:
    """Run the engine with signal handling, the headless display and the `[alerts]`;
    return the exit code."""
    from gen_tui.app.cli.alert import RunAlerts
    from gen_tui.app.cli.headless import HeadlessDisplay
    from gen_tui.backends.engine import Engine
    from gen_tui.backends.progress.summary import summary_line

    display = HeadlessDisplay(status_every_s=10.0)
    if plain:
        display.live_mode = False
    pings = RunAlerts(alerts or AlertConfig(), display.event)
    try:
        with display:
            engine = Engine(
                config, on_snapshot=display.snapshot, on_event=display.event, on_alert=pings
            )
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, engine.request_stop)
            try:
                final = await engine.run()
            except EngineError as exc:
                pings(AlertEvent.ENDED, f"the run failed: {exc}")
                raise
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
        pings(AlertEvent.ENDED, summary_line(final))
    finally:
        await pings.close()
    if not display.live_mode:
        display.write_status(final, final=True)
    display.write_summary(final)
    return EXIT_ABORTED if engine.aborted else EXIT_OK


DEMO_OWN = ("config", "prompts_dir", "server_urls", "tokenizer", "api", "model", "api_key_env")
"""`gen-tui run --demo` brings its own prompts, server and tokenizer: these flags are refused
rather than silently ignored. Every other flag is honoured, as for any run."""


def demo_refusal(args: argparse.Namespace) -> str | None:
    """Why `args` cannot go with --demo, or None."""
    given = [name for name in DEMO_OWN if getattr(args, name, None) is not None]
    if not given:
        return None
    flags = ", ".join(
        "--" + name.replace("_", "-").replace("server-urls", "server-url") for name in given
    )
    return f"--demo brings its own prompts, server and tokenizer: drop {flags}"


def demo_config(args: argparse.Namespace) -> EngineConfig:
    """The embedded default: generated datasets + a real tokenizer, all offline, with `args`
    merged over them exactly as for `gen-tui run`. Its server is filled in by
    :func:`run_headless_demo` once the simulator has a port.

    The demo's output folder is resumed, never deleted: `r` on a demo run relaunches its
    command line, and must find the records it left.
    """
    from platformdirs import user_cache_dir

    from gen_tui.backends import demo

    root = Path(user_cache_dir("gen-tui")) / "demo"
    output = args.output_dir or root / "output"
    tokenizer = demo.build_tokenizer(root / "tokenizer")
    prompts = demo.write_demo_prompts(root / "prompts")
    file = FileConfig(
        path=root,
        run={
            "server_urls": [DEMO_SERVER_PENDING],
            "tokenizer": str(tokenizer),
            "output_dir": str(output),
            "concurrency": queued_concurrency(demo.demo_sim_config().slots),
        },
        sampling={"max_new_tokens": 16384, "temperature": 0.7},
        datasets=[
            DatasetSpec(spec.name, prompts[spec.name], max_tokens=spec.budget)
            for spec in demo.HEADLESS_DATASETS
        ],
    )
    config = merge_run(file, _flags(args))
    resumed = output.exists() and any(output.iterdir())
    print(
        f"demo: datasets in {root / 'prompts'}, output in {output}"
        + (" (resuming what is there; remove the folder to start over)" if resumed else ""),
        flush=True,
    )
    return config


DEMO_SERVER_PENDING = "http://127.0.0.1:1"
"""Stands for the demo's simulator until it listens (a valid URL, never contacted)."""


async def run_headless_demo(config: EngineConfig, plain: bool) -> int:
    """Run `config` (from :func:`demo_config`) against a simulator started here."""
    from gen_tui.backends import demo
    from gen_tui.backends.sim import SimServer

    vocab = demo.vocab_size(Path(config.tokenizer))
    async with SimServer(demo.demo_sim_config(vocab)) as server:
        return await run_engine(dataclasses.replace(config, server_urls=[server.url]), plain)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        # The simulator parses its own flags; argparse's REMAINDER would drop leading options.
        from gen_tui.backends.sim import main as sim_main

        return sim_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from gen_tui.app.cli.launch import main as tui_main

        return tui_main(args)
    if args.command in ("export", "verify"):
        from gen_tui.app.cli.export import export_main, verify_main

        return (export_main if args.command == "export" else verify_main)(args)
    if args.command == "report":
        from gen_tui.app.cli.report import report_main

        return report_main(args)
    if args.command == "servers":
        from gen_tui.app.cli.servers import servers_main

        return servers_main(args)
    if args.command == "alert":
        from gen_tui.app.cli.alert import alert_main

        return alert_main(args)
    try:
        if args.demo:
            refusal = demo_refusal(args)
            if refusal is not None:
                print(f"gen-tui: error: {refusal}", file=sys.stderr)
                return EXIT_USAGE
        try:
            config = demo_config(args) if args.demo else engine_config(args)
            alerts = alerts_of(args.config)
        except (ConfigError, EngineError, CountError) as exc:
            # Nothing ran: what the user asked for cannot be run as given (exit 2, as
            # argparse's own usage errors); failures once the run starts exit 1.
            print(f"gen-tui: error: {one_line(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
        if args.demo:
            return asyncio.run(run_headless_demo(config, plain=args.plain))
        return asyncio.run(run_engine(config, plain=args.plain, alerts=alerts))
    except (ConfigError, EngineError, CountError) as exc:
        print(f"gen-tui: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ABORTED
