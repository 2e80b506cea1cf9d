"""What a process's command line says: whether it is a run, and its datasets and folders.

Why a module of its own: the run list must find the seed script and gen-tui's engine however
they were launched, and leave out pagers, editors, multiplexers and the wrappers around a
run (stopping a screen session would end every window it holds).
"""

from __future__ import annotations

import os
import re
import typing

from .names import DATASET_NAME

# The default process pattern: the seed script and gen-tui's engine, however launched
# (`python run_inference.py`, `python -m run_inference`, `gen-tui run`, `python -m
# gen_tui.app.cli run`), but not `tail -f run_inference.log`.
DEFAULT_PATTERN = r"(^|[\s/])run_inference(\.py)?(\s|$)|gen[-_]tui(\.app\.cli)?\s+run(\s|$)"
# Processes that mention a run on their command line without being one: pagers, editors,
# tools, and wrappers that start the run as a child (compared in lower case: GNU screen's
# daemon calls itself SCREEN). Terminal multiplexers are never runs: stopping one ends
# every window it holds.
_MULTIPLEXERS = {"screen", "tmux", "byobu", "dtach", "abduco", "zellij", "tmate"}
_WRAPPERS = {
    "runuser",
    "sudo",
    "su",
    "doas",
    "setsid",
    "nohup",
    "env",
    "nice",
    "ionice",
    "taskset",
    "numactl",
    "chrt",
    "stdbuf",
    "time",
    "xargs",
    "flock",
}
_NOT_RUNS = (
    _MULTIPLEXERS
    | _WRAPPERS
    | {
        "grep",
        "egrep",
        "fgrep",
        "pgrep",
        "pkill",
        "tail",
        "head",
        "less",
        "more",
        "cat",
        "vi",
        "vim",
        "nvim",
        "nano",
        "emacs",
        "ps",
        "watch",
        "tmux",
        "screen",
        "ssh",
        "sudo",
        "su",
        "timeout",
        "strace",
        "gdb",
    }
)
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish"}


# -- processes (the run list) ------------------------------------------------------------


def flag_value(argv: list[str], *names: str) -> str | None:
    """The value of the last `--flag VALUE` or `--flag=VALUE` among `names` in argv."""
    found = None
    for index, word in enumerate(argv):
        for name in names:
            if word == name and index + 1 < len(argv):
                found = argv[index + 1]
            elif word.startswith(name + "="):
                found = word[len(name) + 1 :]
    return found


def run_args(argv: list[str]) -> dict[str, typing.Any]:
    """What a run's command line says about its datasets and folders (paths as written)."""
    datasets = flag_value(argv, "--datasets", "--dataset")
    names = None
    if datasets is not None:
        names = [name.strip() for name in datasets.split(",") if DATASET_NAME.match(name.strip())]
    return {
        "datasets": names,
        "prompts_dir": flag_value(argv, "--prompts-dir"),
        "output_dir": flag_value(argv, "--output-dir"),
        "config": flag_value(argv, "--config"),
    }


_GEN_TUI_RUN = re.compile(r"gen[-_]tui(\.app\.cli)?\s+run(\s|$)")


def is_gen_tui_run(argv: list[str]) -> bool:
    return _GEN_TUI_RUN.search(" ".join(argv)) is not None


def output_dir_of(argv: list[str], cwd: str | None) -> str | None:
    """A run's output folder, absolute: its `--output-dir`, or gen-tui's default `./output`."""
    args = run_args(argv)
    folder = args["output_dir"]
    if folder is None and args["config"] is None and is_gen_tui_run(argv):
        folder = "output"
    return _resolve(folder, cwd)


def is_candidate(argv: list[str], pattern: re.Pattern[str]) -> bool:
    """Whether a command line is a run: it matches, and it is not a multiplexer, wrapper,
    pager or editor, nor a shell given the command as a string (`-c`, `-lc`, `-ec`...)."""
    if not argv:
        return False
    exe = os.path.basename(argv[0]).lstrip("-").lower()  # "-bash": a login shell
    if exe in _NOT_RUNS or exe.split(":")[0] in _MULTIPLEXERS:  # "tmux: server"
        return False
    if exe in _SHELLS and _shell_command_string(argv[1:]):
        return False
    return pattern.search(" ".join(argv)) is not None


def _shell_command_string(args: list[str]) -> bool:
    """Whether a shell's options (before its first operand) include `c`: `-c`, `-lc`, `-ec`."""
    for word in args:
        if word == "--" or not word.startswith("-") or word.startswith("--"):
            return False
        if "c" in word[1:]:
            return True
    return False


def prompt_names(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        n[: -len(".jsonl")] for n in names if n.endswith(".jsonl") and DATASET_NAME.match(n[:-6])
    )


def _resolve(path: str | None, cwd: str | None) -> str | None:
    if path is None:
        return None
    path = os.path.expanduser(path)
    if not os.path.isabs(path) and cwd:
        path = os.path.join(cwd, path)
    return os.path.normpath(path)
