"""The `gen-tui` command line: `run` (the headless engine), `sim` (the simulated server).

Every user mistake ends in one line on stderr starting with "gen-tui: error:" and a
non-zero exit; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from gen_tui.backends.budget import BudgetMode
from gen_tui.backends.config import ConfigError, FileConfig, load_config
from gen_tui.backends.counts import CountError, parse_count
from gen_tui.backends.prompts import DatasetNameError, discover_datasets
from gen_tui.backends.run_config import (
    DEFAULT_CONCURRENCY,
    DISK_PROBE_S,
    DatasetSpec,
    EngineConfig,
    EngineError,
    queued_concurrency,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_ABORTED = 130
DEFAULT_SERVER = "http://127.0.0.1:30000"
DEFAULT_MAX_NEW_TOKENS = 4096


class UsageError(Exception):
    """A problem with what the user typed or configured."""


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
        default=30.0,
        metavar="S",
        help="seconds a killed run gets to drain before SIGKILL (default 30)",
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
        default=60.0,
        metavar="S",
        help="mark a running dataset stale after this many seconds without a record (default 60)",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser(
        "run",
        help="generate data headless (what runs on the GPU box)",
        description="Send each dataset's prompts to the server and stop at its token budget.",
    )
    src = run.add_argument_group("datasets")
    src.add_argument("--config", type=Path, help="TOML run config (flags override it)")
    src.add_argument("--prompts-dir", type=Path, help="each NAME.jsonl in DIR is dataset NAME")
    src.add_argument("--datasets", help="comma-separated subset of dataset names, in order")
    src.add_argument("--output-dir", type=Path, help="dataset folders go here (default ./output)")
    srv = run.add_argument_group("server")
    srv.add_argument(
        "--server-url",
        action="append",
        help=f"SGLang server or router URL; repeat to use several (default {DEFAULT_SERVER})",
    )
    srv.add_argument(
        "--api",
        choices=["sglang", "openai"],
        help="sglang: native /generate (default); openai: /v1/chat/completions (OpenRouter, "
        "vLLM, SGLang /v1)",
    )
    srv.add_argument("--model", help="model name for --api openai")
    srv.add_argument(
        "--api-key-env",
        help="environment variable holding the API key (default OPENROUTER_API_KEY, then "
        "OPENAI_API_KEY); keys are never taken on the command line",
    )
    srv.add_argument(
        "--price",
        help="IN,OUT dollars per million tokens, when the server does not report usage.cost",
    )
    srv.add_argument("--tokenizer", help="tokenizer directory of the served model")
    srv.add_argument(
        "--concurrency",
        type=_count_arg("--concurrency"),
        help=f"requests in flight across all datasets (default {DEFAULT_CONCURRENCY})",
    )
    srv.add_argument(
        "--parallel-datasets",
        type=_count_arg("--parallel-datasets"),
        help="datasets sharing the slots at once (default 1: in order, the next one filling "
        "the slots the previous leaves free)",
    )
    srv.add_argument("--stream", action="store_true", default=None, help="use SSE streaming")
    srv.add_argument("--max-retries", type=int, help="attempts per sample on errors (default 6)")
    srv.add_argument("--request-timeout", type=float, help="seconds per request (default 3600)")
    smp = run.add_argument_group("sampling")
    smp.add_argument(
        "--max-new-tokens",
        type=_count_arg("--max-new-tokens"),
        help=f"(default {DEFAULT_MAX_NEW_TOKENS})",
    )
    smp.add_argument("--temperature", type=float)
    smp.add_argument("--top-p", type=float)
    bud = run.add_argument_group("budgets (numbers accept 10M, 2.5e6, 500k, 10_000_000)")
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
    bud.add_argument(
        "--max-total-tokens",
        type=_count_arg("--max-total-tokens"),
        help="a budget across the selected datasets, shared by weight (equal by default); a "
        "dataset that runs out of prompts hands its share to the others",
    )
    bud.add_argument(
        "--max-cost", type=float, help="stop dispatching once this many dollars are spent"
    )
    bud.add_argument(
        "--budget-mode",
        choices=[mode.value for mode in BudgetMode],
        help="drain: seed behaviour; predictive (default): ends at or just past the budget; "
        "strict: never past it",
    )
    bud.add_argument(
        "--grace", type=float, help="seconds to drain in-flight requests on SIGTERM (default 30)"
    )
    bud.add_argument(
        "--disk-probe",
        type=float,
        help="while the disk is full, seconds between tries to write the answers held in "
        "memory (default 5); dispatch waits meanwhile",
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


def _select(available: dict[str, Any], wanted: str | None) -> list[str]:
    if not wanted:
        return list(available)
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if unknown:
        known = ", ".join(available) or "none"
        raise UsageError(f"unknown dataset(s) {', '.join(unknown)} (known: {known})")
    return names


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """Merge flags over the config file over defaults into an :class:`EngineConfig`."""
    file = load_config(args.config) if args.config else FileConfig(path=Path("."))
    run = file.run

    def pick(flag: Any, key: str, default: Any) -> Any:
        if flag is not None:
            return flag
        return run.get(key, default)

    entries: dict[str, DatasetSpec] = {}
    prompts_dir = args.prompts_dir or (Path(run["prompts_dir"]) if "prompts_dir" in run else None)
    if prompts_dir is not None:
        if not prompts_dir.is_dir():
            raise UsageError(f"--prompts-dir {prompts_dir} is not a directory")
        try:
            found = discover_datasets(prompts_dir)
        except DatasetNameError as exc:
            raise UsageError(f"{prompts_dir}: {exc}") from None
        if not found and not file.datasets:
            raise UsageError(f"no *.jsonl prompt files in {prompts_dir}")
        for name, path in found.items():
            entries[name] = DatasetSpec(name, path)
    for entry in file.datasets:
        entries[entry.name] = DatasetSpec(
            entry.name, entry.prompts, entry.max_tokens, entry.max_samples, entry.weight
        )
    if not entries:
        raise UsageError("no datasets: give --prompts-dir DIR, or --config FILE with [[datasets]]")

    default_tokens = pick(args.max_tokens, "max_tokens_per_dataset", None)
    default_samples = pick(args.max_samples, "max_samples", None)
    datasets = []
    for name in _select(entries, args.datasets):
        spec = entries[name]
        max_tokens = (
            args.max_tokens
            if args.max_tokens is not None
            else (spec.max_tokens if spec.max_tokens is not None else default_tokens)
        )
        max_samples = (
            args.max_samples
            if args.max_samples is not None
            else (spec.max_samples if spec.max_samples is not None else default_samples)
        )
        datasets.append(DatasetSpec(name, spec.prompts, max_tokens, max_samples, spec.weight))

    api = pick(args.api, "api", "sglang")
    tokenizer = pick(args.tokenizer, "tokenizer", None)
    if not tokenizer and api == "sglang":
        raise UsageError("no tokenizer: give --tokenizer DIR (the served model's tokenizer)")
    price = pick(args.price, "price_per_million", None)
    if isinstance(price, str):
        try:
            price = tuple(float(part) for part in price.split(","))
        except ValueError:
            price = ()
        if len(price) != 2:
            raise UsageError(f"--price {args.price!r}: expected IN,OUT dollars per million")
    sampling = dict(file.sampling)
    sampling.setdefault("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if args.max_new_tokens is not None:
        sampling["max_new_tokens"] = args.max_new_tokens
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    if args.top_p is not None:
        sampling["top_p"] = args.top_p
    if sampling["max_new_tokens"] < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    concurrency = pick(args.concurrency, "concurrency", DEFAULT_CONCURRENCY)
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    disk_probe = float(pick(args.disk_probe, "disk_probe", DISK_PROBE_S))
    if not disk_probe > 0:
        raise UsageError("--disk-probe must be a positive number of seconds")
    return EngineConfig(
        datasets=datasets,
        server_urls=args.server_url or run.get("server_urls") or [DEFAULT_SERVER],
        tokenizer=str(tokenizer) if tokenizer else "",
        output_dir=Path(pick(args.output_dir, "output_dir", "output")),
        concurrency=concurrency,
        sampling=sampling,
        budget_mode=BudgetMode(pick(args.budget_mode, "budget_mode", BudgetMode.PREDICTIVE)),
        stream=bool(pick(args.stream, "stream", False)),
        max_retries=int(pick(args.max_retries, "max_retries", 6)),
        request_timeout_s=float(pick(args.request_timeout, "request_timeout", 3600.0)),
        grace_s=float(pick(args.grace, "grace", 30.0)),
        disk_probe_s=disk_probe,
        parallel_datasets=max(1, pick(args.parallel_datasets, "parallel_datasets", 1)),
        max_total_tokens=pick(args.max_total_tokens, "max_total_tokens", None),
        api=api,
        model=pick(args.model, "model", None),
        api_key_env=pick(args.api_key_env, "api_key_env", None),
        price_per_million=tuple(price) if price else None,
        max_cost=pick(args.max_cost, "max_cost", None),
    )


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
                DatasetSpec(name, path, max_tokens=demo.DEMO_BUDGETS[name])
                for name, path in prompts.items()
            ],
            server_urls=[server.url],
            tokenizer=str(tokenizer),
            output_dir=output,
            concurrency=args.concurrency or queued_concurrency(sim_config.slots),
            sampling={"max_new_tokens": 16384, "temperature": 0.7},
            budget_mode=BudgetMode(args.budget_mode or BudgetMode.PREDICTIVE),
            grace_s=args.grace if args.grace is not None else 30.0,
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
    except (UsageError, ConfigError, EngineError, CountError) as exc:
        print(f"gen-tui: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ABORTED


if __name__ == "__main__":
    raise SystemExit(main())
