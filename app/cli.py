"""The `gen-tui` command line: `run` (the headless engine), `sim` (the simulated server).

Every user mistake ends in one line on stderr starting with "gen-tui: error:" and a
non-zero exit; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gen_tui.app.alert_cli import add_alert, alerts_of
from gen_tui.app.exits import EXIT_ABORTED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from gen_tui.app.report_cli import add_report
from gen_tui.backends.alerts import AlertConfig, AlertEvent
from gen_tui.backends.config import (
    SAMPLING_FLAGS,
    ConfigError,
    FileConfig,
    load_config,
    merge_run,
)
from gen_tui.backends.counts import CountError, parse_count
from gen_tui.backends.run_config import (
    EngineConfig,
    EngineError,
    queued_concurrency,
)
from gen_tui.backends.settings import (
    DEFAULT_GRACE_S,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_STALE_AFTER_S,
    MAX_NEW_TOKENS_CAP,
    FieldSetting,
    SettingError,
    settings_of,
)


def _count_arg(what: str, words: tuple[str, ...] = ()):
    def parse(text: str) -> int | str:
        if text in words:
            return text
        try:
            return parse_count(text, what=what)
        except CountError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"gen-tui: error: {message} (see {self.prog} --help)\n")


def _add_setting(group: argparse._ArgumentGroup, spelled: FieldSetting) -> None:
    """One `gen-tui run` flag from its setting; None stands for "not given" (the config
    file's value, then the field's default, apply)."""
    flag = spelled.setting
    kwargs: dict[str, Any] = {
        "dest": spelled.name,
        "help": spelled.help,
        "default": None,
        "metavar": flag.flag.lstrip("-").replace("-", "_").upper(),
    }
    if flag.count:
        kwargs["type"] = _count_arg(flag.flag, flag.words)
    if flag.choices is not None:
        kwargs["choices"] = flag.choices
    kwargs.update(flag.flag_kwargs)
    if kwargs.get("action") == "store_true" or flag.choices is not None:
        del kwargs["metavar"]
    if "type" in kwargs:
        kwargs["type"] = _checked(kwargs["type"])
    group.add_argument(flag.flag, **kwargs)


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` with its SettingError shown by argparse as a usage error."""

    @functools.wraps(parse)
    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return wrapped


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gen-tui",
        description="Terminal control panel and budget-aware engine for LLM data generation.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        dest="tui_config",
        help="run or watch what this TOML describes",
    )
    parser.add_argument(
        "--demo", action="store_true", dest="tui_demo", help="the control panel on a built-in demo"
    )
    parser.add_argument(
        "--readonly",
        action="store_true",
        dest="tui_readonly",
        help="watch only: the keys that change a run (k, r, s, p) are off",
    )
    hosts = parser.add_argument_group("watching and controlling runs elsewhere")
    hosts.add_argument(
        "--host",
        dest="tui_host",
        metavar="TARGET",
        help="an SSH target (~/.ssh/config alias or user@host[:port]) or 'local'",
    )
    hosts.add_argument(
        "--remote-dir",
        dest="tui_remote_dir",
        metavar="DIR",
        help="the output directory on that host, where the dataset folders are",
    )
    hosts.add_argument(
        "--pattern",
        dest="tui_pattern",
        metavar="REGEX",
        help="command lines that count as generation runs (default: run_inference, gen-tui run)",
    )
    hosts.add_argument(
        "--grace",
        dest="tui_grace",
        type=float,
        default=DEFAULT_GRACE_S,
        metavar="S",
        help=f"seconds a killed run gets to drain before SIGKILL (default {DEFAULT_GRACE_S:g})",
    )
    hosts.add_argument("--ssh-config", dest="tui_ssh_config", metavar="FILE", help="like ssh -F")
    hosts.add_argument(
        "--known-hosts", dest="tui_known_hosts", metavar="FILE", help="trusted host keys file"
    )
    hosts.add_argument("--identity", dest="tui_identity", metavar="FILE", help="like ssh -i")
    parser.add_argument(
        "--stale-after",
        dest="tui_stale_after",
        type=float,
        default=DEFAULT_STALE_AFTER_S,
        metavar="S",
        help="mark a running dataset stale after this many seconds without a record "
        f"(default {DEFAULT_STALE_AFTER_S:g})",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser(
        "run",
        help="generate data headless (what runs on the GPU box)",
        description="Send each dataset's prompts to the server and stop at its token budget.",
    )
    groups = {
        "datasets": run.add_argument_group("datasets"),
        "server": run.add_argument_group("server"),
        "sampling": run.add_argument_group("sampling"),
        "budgets": run.add_argument_group("budgets (numbers accept 10M, 2.5e6, 500k, 10_000_000)"),
    }
    src = groups["datasets"]
    src.add_argument("--config", type=Path, help="TOML run config (flags override it)")
    src.add_argument("--prompts-dir", type=Path, help="each NAME.jsonl in DIR is dataset NAME")
    src.add_argument("--datasets", help="comma-separated subset of dataset names, in order")
    for spelled in settings_of(EngineConfig):
        _add_setting(groups[spelled.setting.group], spelled)
    smp = groups["sampling"]
    smp.add_argument(
        "--max-new-tokens",
        type=_count_arg("--max-new-tokens"),
        help="longest answer, in tokens; never above the server's context minus the prompt "
        f"(default: that, capped at {MAX_NEW_TOKENS_CAP}; {DEFAULT_MAX_NEW_TOKENS} when the "
        "server does not say its context length)",
    )
    smp.add_argument("--temperature", type=float)
    smp.add_argument("--top-p", type=float)
    bud = groups["budgets"]
    bud.add_argument(
        "--max-tokens-per-dataset",
        "--token-budget",
        dest="max_tokens",
        type=_count_arg("--max-tokens-per-dataset"),
        help="stop each dataset at this many completion tokens",
    )
    bud.add_argument(
        "--max-samples", type=_count_arg("--max-samples"), help="stop each dataset at N records"
    )
    run.add_argument(
        "--demo",
        action="store_true",
        help="run against the built-in simulator on generated sample datasets",
    )
    run.add_argument("--plain", action="store_true", help="log lines even on a terminal")

    commands.add_parser(
        "sim", help="serve the simulated SGLang / OpenAI-compatible server (gen-tui sim --help)"
    )
    _add_export(commands)
    _add_verify(commands)
    add_report(commands)
    add_alert(commands)
    return parser


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _add_export(commands: Any) -> None:
    from gen_tui.backends.export.formats import FORMATS

    export = commands.add_parser(
        "export",
        help="write a run's records as one training-data JSONL",
        description="Stream the records of the chosen datasets into one JSONL file in a "
        "trainer's format, rebuilding prompt ids with the run's own tokenizer and template.",
    )
    export.add_argument("--output-dir", type=Path, required=True, help="the run's --output-dir")
    export.add_argument("--format", required=True, choices=FORMATS)
    export.add_argument("--datasets", type=_names, help="comma-separated names (default: all)")
    export.add_argument(
        "--to",
        metavar="FILE",
        help="where the rows go, '-' for stdout (default OUTPUT_DIR/export.FORMAT.jsonl)",
    )
    export.add_argument(
        "--max-length",
        type=_count_arg("--max-length"),
        help="skip records whose prompt and answer together pass N tokens",
    )
    export.add_argument(
        "--drop-truncated",
        action="store_true",
        help="skip answers cut off at max_new_tokens (finish_reason length)",
    )


def _add_verify(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="check every record of a run completely (before export, after a crash)",
        description="Check every record: parses, types, ids in the tokenizer's range, counts, "
        "duplicates, sample_ids in the prompt file, finish_reason. Exits 1 on any problem.",
    )
    verify.add_argument("--output-dir", type=Path, required=True, help="the run's --output-dir")
    verify.add_argument("--datasets", type=_names, help="comma-separated names (default: all)")


RUN_FLAGS = ("prompts_dir", "datasets", "max_tokens", "max_samples", *SAMPLING_FLAGS)
"""The `gen-tui run` values besides the engine settings that the merge takes."""


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    names = [*RUN_FLAGS, *(spelled.name for spelled in settings_of(EngineConfig))]
    return {name: getattr(args, name) for name in names}


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """Merge flags over the config file over defaults into an :class:`EngineConfig`."""
    file = load_config(args.config) if args.config else FileConfig(path=Path("."))
    return merge_run(file, _flags(args))


async def run_engine(
    config: EngineConfig, plain: bool = False, alerts: AlertConfig | None = None
) -> int:
    """Run the engine with signal handling, the headless display and the `[alerts]`;
    return the exit code."""
    from gen_tui.app.alert_cli import RunAlerts
    from gen_tui.app.headless import HeadlessDisplay, summary_line
    from gen_tui.backends.engine import Engine

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
        display.write_status(final)
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
    from gen_tui.backends.config import DatasetEntry

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
            DatasetEntry(spec.name, prompts[spec.name], max_tokens=spec.budget)
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
        from gen_tui.app.launch import main as tui_main

        return tui_main(args)
    if args.command in ("export", "verify"):
        from gen_tui.app.export_cli import export_main, verify_main

        return (export_main if args.command == "export" else verify_main)(args)
    if args.command == "report":
        from gen_tui.app.report_cli import report_main

        return report_main(args)
    if args.command == "alert":
        from gen_tui.app.alert_cli import alert_main

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
            print(f"gen-tui: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.demo:
            return asyncio.run(run_headless_demo(config, plain=args.plain))
        return asyncio.run(run_engine(config, plain=args.plain, alerts=alerts))
    except (ConfigError, EngineError, CountError) as exc:
        print(f"gen-tui: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ABORTED


if __name__ == "__main__":
    raise SystemExit(main())
