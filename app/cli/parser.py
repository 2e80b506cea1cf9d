"""The `gen-tui` argparse tree: the panel's own flags and every subcommand's.

Built from the settings (`backends/settings.py`) for `gen-tui run`'s engine flags, so a flag
and its config key never disagree. A usage error is one line on stderr ("gen-tui: error:
...") and exit 2; what the parsed flags then do is `gen_tui.app.cli.main`'s.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from gen_tui.app.cli.alert import add_alert
from gen_tui.app.cli.examples import examples
from gen_tui.app.cli.exits import EXIT_USAGE
from gen_tui.app.cli.output import add_include_folder
from gen_tui.app.cli.report import add_report
from gen_tui.app.cli.servers_args import add_servers
from gen_tui.backends.config.run import DatasetDefaults, EngineConfig, Sampling
from gen_tui.backends.figures import CountError, parse_count
from gen_tui.backends.settings import (
    DEFAULT_GRACE_S,
    DEFAULT_STALE_AFTER_S,
    DEMO_STALE_AFTER_S,
    FieldSetting,
    SettingError,
    settings_of,
)


def version() -> str:
    """The installed distribution's version (pyproject.toml's), for `gen-tui --version`."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gen-tui")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _count_arg(what: str, words: tuple[str, ...] = ()) -> Callable[[str], int | str]:
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
        # argparse puts "argument --flag: " before a type's message, which names the flag
        # itself ("--concurrency: '-3' is negative"): the name is said once.
        message = re.sub(r"\Aargument ([^\s:/]+)(?:/[^\s:]+)?: (?=\1\b)", "", message)
        self.exit(EXIT_USAGE, f"gen-tui: error: {message} (see {self.prog} --help)\n")


def _add_setting(group: argparse._ArgumentGroup, spelled: FieldSetting) -> None:
    """One `gen-tui run` flag from its setting; None stands for "not given" (the config
    file's value, then the field's default, apply)."""
    flag = spelled.setting
    assert flag.flag is not None  # only settings with a flag are added
    kwargs: dict[str, Any] = {
        "dest": spelled.name,
        "help": spelled.help,
        "default": None,
        "metavar": flag.flag.lstrip("-").replace("-", "_").upper(),
    }
    if flag.count:
        # The setting's own rule (count, words, minimum): `--max-samples 0` is a usage error
        # here, as `max_samples = 0` is in a config file.
        kwargs["type"] = flag.convert
    if flag.choices is not None:
        kwargs["choices"] = flag.choices
    kwargs.update(flag.flag_kwargs)
    if kwargs.get("action") in ("store_true", "store_false") or flag.choices is not None:
        del kwargs["metavar"]
    if "type" in kwargs:
        kwargs["type"] = _checked(kwargs["type"])
    group.add_argument(flag.flag, *flag.aliases, **kwargs)


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` with its SettingError shown by argparse as a usage error."""

    @functools.wraps(parse)
    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return wrapped


def run_flags() -> list[FieldSetting]:
    """`gen-tui run`'s flags that are settings: the run's, every dataset's and sampling's."""
    return [
        spelled
        for cls in (DatasetDefaults, EngineConfig, Sampling)
        for spelled in settings_of(cls)
        if spelled.setting.flag is not None
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gen-tui",
        description="Terminal control panel and budget-aware engine for LLM data generation.",
        **examples("gen-tui"),
    )
    parser.add_argument("--version", action="version", version=f"gen-tui {version()}")
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
        default=None,
        metavar="S",
        help="mark a running dataset stale after this many seconds without a record "
        f"(default {DEFAULT_STALE_AFTER_S:g}; {DEMO_STALE_AFTER_S:g} in --demo)",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser(
        "run",
        help="generate data headless (what runs on the GPU box)",
        description="Send each dataset's prompts to the server and stop at its token budget.",
        **examples("run"),
    )
    groups = {
        "datasets": run.add_argument_group("datasets"),
        "server": run.add_argument_group("server"),
        "sampling": run.add_argument_group("sampling"),
        "budgets": run.add_argument_group("budgets (numbers accept 10M, 2.5e6, 500k, 10_000_000)"),
    }
    src = groups["datasets"]
    src.add_argument("--config", type=Path, help="TOML run config (flags override it)")
    src.add_argument("--datasets", help="comma-separated subset of dataset names, in order")
    for spelled in run_flags():
        _add_setting(groups[spelled.setting.group], spelled)
    run.add_argument(
        "--demo",
        action="store_true",
        help="run against the built-in simulator on generated sample datasets",
    )
    run.add_argument("--plain", action="store_true", help="log lines even on a terminal")

    commands.add_parser(
        "sim", help="serve the simulated SGLang / OpenAI-compatible server (gen-tui sim --help)"
    )  # its own parser, with its own example: backends/sim/cli.py
    _add_export(commands)
    _add_verify(commands)
    add_report(commands)
    add_alert(commands)
    add_servers(commands)
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
        **examples("export"),
    )
    export.add_argument("--output-dir", type=Path, required=True, help="the run's --output-dir")
    export.add_argument(
        "--format", required=True, choices=FORMATS, help="the trainer's layout of each row"
    )
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
    add_include_folder(export)


def _add_verify(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="check every record of a run completely (before export, after a crash)",
        description="Check every record: parses, types, ids in the tokenizer's range, counts, "
        "duplicates, sample_ids in the prompt file, finish_reason. Exits 1 on any problem.",
        **examples("verify"),
    )
    verify.add_argument("--output-dir", type=Path, required=True, help="the run's --output-dir")
    verify.add_argument("--datasets", type=_names, help="comma-separated names (default: all)")
    add_include_folder(verify)
