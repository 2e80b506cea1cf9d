"""What a process's command line says: whether it is a run, and its datasets and folders.

Why a module of its own: the run list must find the seed script and gen-tui's engine however
they were launched, and leave out pagers, editors, multiplexers and the wrappers around a
run (stopping a screen session would end every window it holds).
"""

from __future__ import annotations

import json
import os
import re
import typing

from .files import _S_IFMT, _S_IFREG
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


CONFIG_BYTES = 1 << 20
"""The most of a run's config file read for its output folder: what `gen-tui run` itself
reads of one (backends/config/trust.py); a bigger file is no config a run started with."""
SHOWN_PATH = 300
"""The most of a config's path said in why its run's folder is unknown (anyone's argv)."""


def config_output_dir(argv: list[str], cwd: str | None) -> tuple[str | None, str | None]:
    """(output folder, None) of a `gen-tui run --config FILE` naming no `--output-dir`: the
    config's `[run] output_dir`, relative to the config's folder and resolved as the run
    resolves it, or `./output` of its cwd when the config has none. (None, why) when that
    cannot be told (the config is unreadable, over CONFIG_BYTES, not TOML, or relative to a
    cwd we cannot read). (None, None): not such a run.

    Why: such a run that had written nothing yet was taken for one of the watched folder
    (`l` listed another project's just-started run there, `k` offered on it; issue 31,
    point 1). A run whose folder is unknown is counted in no watched folder.
    """
    args = run_args(argv)
    if args["output_dir"] is not None or args["config"] is None or not is_gen_tui_run(argv):
        return None, None
    shown = args["config"][:SHOWN_PATH]
    path = _resolve(args["config"], cwd)
    if path is None or not os.path.isabs(path):
        return None, "config %s is relative to a working folder that cannot be read" % shown
    try:
        folder, problem = _config_folder(path)
    except OSError as exc:
        return None, "config %s cannot be read (%s)" % (shown, exc.strerror or exc)
    if problem is not None:
        return None, "config %s %s" % (shown, problem)
    if folder is None:  # the run's default, `output` of its working folder
        return (_resolve("output", cwd), None) if cwd else (None, "its working folder is unknown")
    folder = os.path.expanduser(folder)
    return os.path.realpath(os.path.join(os.path.dirname(path), folder)), None


_READ: dict[tuple[str, int, int, int, int], tuple[str | None, str | None]] = {}
"""What each config file said (by path, device, inode, size and mtime): a run list is asked
for every few seconds, and a config is read again only once it changed."""
_READ_KEPT = 64


def _config_folder(path: str) -> tuple[str | None, str | None]:
    """(`[run] output_dir` as written or None, None) of the config file `path`, or (None,
    why not) when it is no regular file of at most CONFIG_BYTES or not TOML. A FIFO or a
    device is refused without blocking. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if st.st_mode & _S_IFMT != _S_IFREG or st.st_size > CONFIG_BYTES:
            return None, "is not a regular file of at most 1 MB"
        key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _READ:
            return _READ[key]
        chunks = []
        size = 0
        while size <= CONFIG_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    found: tuple[str | None, str | None] = (None, "is not a regular file of at most 1 MB")
    if size <= CONFIG_BYTES:
        try:
            found = (run_output_dir(b"".join(chunks).decode("utf-8")), None)
        except ValueError:
            found = (None, "cannot be read as TOML")
    if len(_READ) >= _READ_KEPT:
        _READ.clear()
    _READ[key] = found
    return found


def run_output_dir(text: str) -> str | None:
    """`[run] output_dir` of a TOML text (None: it has none); ValueError when the text is
    not TOML. With `tomllib` (Python 3.11+, as every `gen-tui run` has), exactly; on an
    older Python (a watched box's system python3) by :func:`scan_output_dir`."""
    try:
        import tomllib
    except ImportError:
        return scan_output_dir(text)
    try:
        run = tomllib.loads(text).get("run", {})
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None
    folder = run.get("output_dir") if isinstance(run, dict) else None
    if folder is not None and not isinstance(folder, str):
        raise ValueError("run.output_dir is not a string")
    return folder


_TABLE = re.compile(r"\[\s*([A-Za-z0-9_.\s\"'-]*?)\s*\](\s*#.*)?$")
_OUTPUT_DIR = re.compile(r"""(output_dir|"output_dir"|'output_dir')\s*=\s*(.*)$""")
_VALUE = re.compile(r"""("(?:[^"\\]|\\.)*"|'[^']*')\s*(#.*)?$""")


def scan_output_dir(text: str) -> str | None:
    """`[run] output_dir` of a TOML text without a TOML library (Python < 3.11), for the one
    shape configs have (a `[run]` table, a one-line string): ValueError for any other that
    could hold it (a multi-line string, a dotted `run.output_dir`, an inline `run = {}`),
    so a run is never placed by a guess."""
    table = ""
    found = None
    for line in text.splitlines():
        line = line.strip()
        if '"""' in line or "'''" in line:
            raise ValueError("a multi-line string")
        if not line or line.startswith("#"):
            continue
        if line.startswith("[["):
            table = "[["
            continue
        header = _TABLE.match(line)
        if line.startswith("["):
            if header is None:
                raise ValueError("a table header not understood")
            table = re.sub(r"[\s\"']", "", header.group(1))
            continue
        if table == "" and re.match(r"""["']?run["']?\s*[.=]""", line):
            raise ValueError("run given as a dotted key or an inline table")
        if table != "run":
            continue
        key = _OUTPUT_DIR.match(line)
        if key is None:
            continue
        value = _VALUE.match(key.group(2))
        if value is None:
            raise ValueError("output_dir is not a one-line string")
        quoted = value.group(1)
        found = json.loads(quoted) if quoted.startswith('"') else quoted[1:-1]
    return found


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
