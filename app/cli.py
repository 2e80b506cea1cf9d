"""The `gen-tui` command line: `run` (the headless engine), `sim` (the simulated server).

Every user mistake ends in one line on stderr starting with "gen-tui: error:" and a
non-zero exit; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gen_tui.backends.config import (
    SAMPLING_FLAGS,
    ConfigError,
    FileConfig,
    load_config,
    merge_run,
)
from gen_tui.backends.counts import CountError, parse_count
from gen_tui.backends.run_config import (
    DatasetSpec,
    EngineConfig,
    EngineError,
    queued_concurrency,
)
from gen_tui.backends.settings import (
    DEFAULT_GRACE_S,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_STALE_AFTER_S,
    FieldSetting,
    SettingError,
    settings_of,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_ABORTED = 130


def _count_arg(what: str):
    def parse(text: str) -> int:
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
        kwargs["type"] = _count_arg(flag.flag)
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
        help=f"(default {DEFAULT_MAX_NEW_TOKENS})",
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
    return parser


RUN_FLAGS = ("prompts_dir", "datasets", "max_tokens", "max_samples", *SAMPLING_FLAGS)
"""The `gen-tui run` values besides the engine settings that the merge takes."""


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """Merge flags over the config file over defaults into an :class:`EngineConfig`."""
    file = load_config(args.config) if args.config else FileConfig(path=Path("."))
    names = [*RUN_FLAGS, *(spelled.name for spelled in settings_of(EngineConfig))]
    return merge_run(file, {name: getattr(args, name) for name in names})


async def run_engine(config: EngineConfig, plain: bool = False) -> int:
    """Run the engine with signal handling and the headless display; return the exit code."""
    from gen_tui.app.headless import HeadlessDisplay
    from gen_tui.backends.engine import Engine

    display = HeadlessDisplay(status_every_s=10.0)
    if plain:
        display.live_mode = False
    with display:
        engine = Engine(config, on_snapshot=display.snapshot, on_event=display.event)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, engine.request_stop)
        try:
            final = await engine.run()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
    if not display.live_mode:
        display.write_status(final)
    display.write_summary(final)
    return EXIT_ABORTED if engine.aborted else EXIT_OK


async def run_headless_demo(args: argparse.Namespace) -> int:
    """The embedded default: simulator + generated datasets + a real tokenizer, all offline."""
    from platformdirs import user_cache_dir

    from gen_tui.backends import demo
    from gen_tui.backends.sim import SimServer

    root = Path(user_cache_dir("gen-tui")) / "demo"
    output = args.output_dir or root / "output"
    if output.exists() and args.output_dir is None:
        shutil.rmtree(output)
    loop = asyncio.get_running_loop()
    tokenizer = await loop.run_in_executor(None, demo.build_tokenizer, root / "tokenizer")
    prompts = demo.write_demo_prompts(root / "prompts")
    print(f"demo: datasets in {root / 'prompts'}, output in {output}", flush=True)
    sim_config = demo.demo_sim_config()
    async with SimServer(sim_config) as server:
        config = EngineConfig(
            datasets=[
                DatasetSpec(spec.name, prompts[spec.name], max_tokens=spec.budget)
                for spec in demo.HEADLESS_DATASETS
            ],
            server_urls=[server.url],
            tokenizer=str(tokenizer),
            output_dir=output,
            concurrency=args.concurrency or queued_concurrency(sim_config.slots),
            sampling={"max_new_tokens": 16384, "temperature": 0.7},
            **{
                name: value
                for name in ("budget_mode", "grace_s")
                if (value := getattr(args, name)) is not None
            },
        )
        return await run_engine(config, plain=args.plain)


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
    try:
        if args.demo:
            return asyncio.run(run_headless_demo(args))
        return asyncio.run(run_engine(engine_config(args), plain=args.plain))
    except (ConfigError, EngineError, CountError) as exc:
        print(f"gen-tui: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ABORTED


if __name__ == "__main__":
    raise SystemExit(main())
