"""The remote watcher: a stdlib-only program that streams per-dataset token totals as JSON lines.

Why a program of its own: the GPU box may have nothing but a system Python 3.8 and no gen-tui,
and its record files hold hundreds of MB. So gen-tui sends the watcher's source over one SSH
channel and runs it there with `python3 - OUTPUT_DIR DATASET...`; only counts cross the
network. The same source runs locally (as a subprocess of `sys.executable -`), and the package
is importable, so the tests hold it to :func:`gen_tui.backends.records.scan_records`.

Why a package that ships as one text: each module holds one concern (file names, the
counting rule, safe file access, locks, spread and plain tails, telemetry, the watch loop,
command lines, starts, processes, prompt lines, the command line) and stays small, while
:func:`source` concatenates them, in `MODULES` order, into the one program that
`python3 -` reads from stdin. The intra-package imports are dropped from that text, so
every top-level name is unique across the modules (a unit test checks it, and that the
program runs under the oldest Python at hand).

It is also the one home of the portable half of the on-disk contract, which the rest of
gen-tui imports from here: a dataset folder's file names, the dataset-name rule, the
record-counting rule (:func:`record_counts`), the prompt-line rule (:func:`prompt_fields`:
which line is which sample, and what its head is), the lock holder and the lock probe
(:func:`lock_status`, from /proc/locks), and the process listing (:func:`ps`, which the local
host calls in-process).

Keep it Python 3.8 and stdlib only: no `match`, no `X | Y` outside annotations, no
`str.removeprefix`, no third-party imports. The tests parse :func:`source` with
`feature_version=(3, 8)`.

Modes (all print JSON lines on stdout):

- watch (default): `OUTPUT_DIR DATASET[:OFFSET:INO:TOKENS:SAMPLES:TRUNCATED]...`. One
  `hello` line, then one `dataset` line per dataset at start and whenever its totals
  (tokens, samples, answers cut at their cap: `truncated`), lock holder or
  progress change, and a `heartbeat` line every `--heartbeat` seconds so the client can tell
  a live but quiet watcher from a dead link. A dataset line carries `resume`, the exact
  argument that lets a later watcher continue from the same byte offset without recounting
  or double counting. `--once` prints one line per dataset and exits. With `--telemetry
  SECONDS`, a `metrics` line per `--metrics-url` (its /metrics, read on this box; for an
  SGLang router, a line per worker first and the router's with its `workers`: see
  telemetry.py) and a `gpus` line (nvidia-smi) that often, from a thread of their own.
- `--ps REGEX --output-dir DIR [--pids PID,...]`: one `ps` line describing the processes
  whose command line matches (or the given pids) with each one's owner uid and name, and
  the watcher's own uid (the login user's: a client then tells another user's run from
  its own), the lock files under the output folders with who owns and may write them,
  and the prompt files of each process's `--prompts-dir`. The run list is built from it.
  It also carries the output folder's start count (`start_seq`), read before the processes.
- `--start JSON` (`output_dir`, `argv`, `log`, `cwd`, `expect`): start a run detached, in a
  session of its own, under the output folder's start lock, and only if the folder's start
  count is still `expect`: no other start has happened since the check for a live writer
  that this start relies on. Right before the launch, every folder the command takes code
  from, and every folder above them, is checked (:func:`code_problem`): one another user can
  write in, or rename ours away in, refuses the start. One `start` line: the pid, `refused`
  with the count, or `error` with the one line.
- `--tail JSON` (`path`, `lines`, `max_bytes`, `whole`): the last lines of one regular file,
  or of a run's log (`pid`, `dataset`, `output_dir` instead of `path`: see :func:`log_of`),
  read backwards from its end in chunks (never the whole file: a 10 GB record file costs
  what its last answers weigh), at most `max_bytes` in all. One `tail` line: `lines` (text,
  utf-8 with replacement), `size` (the file's length) and `cut` (true when fewer lines
  came than asked because of the size cap). With `whole`, a partial last line (a record
  being written) is left out. With `spread` (the plot view's history), the `lines` are
  instead picked evenly from the file's first line to its last (see :func:`spread_lines`).
- `--heads JSON` (`keys`, and `path` or `output_dir`, `dataset`, `pid`): the head of each
  sample's prompt (its last user turn, cut), looked up in the dataset's prompt file on this
  box, bounded (see :func:`heads_request`). One `heads` line.

Counting: a dataset's totals are always those of a full recount. Complete lines are counted
once, from a byte offset that only moves past whole lines; a partial last line is never
committed, but a last line that already parses is counted provisionally (as the full recount
does); a file that shrank or was replaced is recounted from zero. A byte scan finds the
`"completion_tokens":` key, which is far faster than parsing every line; lines that scan
cannot read exactly fall back to `json`.

Hostile files: the folders may sit on a box shared with other users, so every file is opened
without following a symlink, without blocking (a FIFO) and only if it is a regular file;
progress.json and run.lock are read only up to a bound in size and nesting. A file that
fails is named in its dataset's `problem` (one line), and the other datasets keep their
totals. Files we write are never opened through a link, new names are O_EXCL, and the
start-log folder must be ours alone (:func:`folder_problem`).

progress.json: when present, its content rides along in the dataset line (`progress`, with
`progress_fresh` when written in the last 10 s): budget, state, rates, ETA and in-flight
are only known to the writer. The token and sample counts themselves always come from the
record file, because progress.json lags it by up to a second and a foreign script writes
none; once attached, tailing costs only the newly appended bytes.
"""

from __future__ import annotations

import ast
import functools
import os
import re

from .cli import main
from .command_lines import (
    DEFAULT_PATTERN,
    flag_value,
    is_candidate,
    is_gen_tui_run,
    output_dir_of,
    prompt_names,
    run_args,
)
from .counting import (
    CUT,
    MAX_COMPLETION_TOKENS,
    SAMPLE_ID_MAX,
    SAMPLE_ID_MIN,
    quoted,
    record_counts,
    record_cut,
    record_figures,
    record_tokens,
)
from .dataset import (
    CHUNK,
    HEARTBEAT_S,
    POLL_S,
    PROGRESS_FRESH_S,
    PROTOCOL,
    DatasetTail,
    parse_dataset_arg,
    watch,
)
from .emit import boot_id
from .files import (
    BadFile,
    create_unique,
    is_regular,
    open_log,
    open_named,
    open_own,
    open_regular,
    read_json_object,
    read_small,
)
from .folders import ancestor_problem, code_folders, code_problem, folder_problem, swap_problem
from .locks import lock_status, read_holder, read_lock_table, scan_locks
from .names import (
    DATASET_NAME,
    ERRORS_FILE,
    HISTORY_FILE,
    HOLDER_MAX_BYTES,
    LOCK_FILE,
    LOG_DIR,
    MANIFEST_FILE,
    MAX_DEPTH,
    PROGRESS_FILE,
    PROGRESS_MAX_BYTES,
    RAW_FILE,
    SEQ_MAX_BYTES,
    START_LOCK,
    START_SEQ,
)
from .processes import (
    file_owner,
    folder_missing,
    proc_info,
    proc_uid,
    ps,
    record_writes,
    user_name,
    writers_only,
)
from .prompt_lines import (
    MAX_HEAD_KEYS,
    MAX_PROMPT_LINE,
    PROMPT_HEAD_CHARS,
    PROMPT_ROLES,
    PROMPT_SCAN_BYTES,
    bounded_lines,
    find_heads,
    heads_request,
    last_user_turn,
    prompt_fields,
    prompt_file_of,
)
from .spread import SPREAD_SCAN_BYTES, spread_lines
from .starts import (
    StaleStart,
    StartFailed,
    guarded_launch,
    guarded_start,
    launch_detached,
    start,
    start_seq,
)
from .tails import TAIL_CHUNK, TAIL_MAX_BYTES, TAIL_MAX_LINES, log_of, tail, tail_request
from .telemetry import (
    MAX_GPUS,
    MAX_METRICS_URLS,
    MAX_ROUTER_WORKERS,
    METRICS_MAX_BYTES,
    METRICS_SENT_BYTES,
    METRICS_TIMEOUT_S,
    NVIDIA_SMI_QUERY,
    NVIDIA_SMI_TIMEOUT_S,
    TELEMETRY_S,
    Telemetry,
    fetch_metrics,
    gpu_report,
    router_listing,
    router_workers,
    worker_url,
)

__all__ = [
    "CHUNK",
    "CUT",
    "DATASET_NAME",
    "DEFAULT_PATTERN",
    "ERRORS_FILE",
    "HEARTBEAT_S",
    "HISTORY_FILE",
    "HOLDER_MAX_BYTES",
    "LOCK_FILE",
    "LOG_DIR",
    "MANIFEST_FILE",
    "MAX_COMPLETION_TOKENS",
    "MAX_DEPTH",
    "MAX_GPUS",
    "MAX_HEAD_KEYS",
    "MAX_METRICS_URLS",
    "MAX_PROMPT_LINE",
    "MAX_ROUTER_WORKERS",
    "METRICS_MAX_BYTES",
    "METRICS_SENT_BYTES",
    "METRICS_TIMEOUT_S",
    "NVIDIA_SMI_QUERY",
    "NVIDIA_SMI_TIMEOUT_S",
    "POLL_S",
    "PROGRESS_FILE",
    "PROGRESS_FRESH_S",
    "PROGRESS_MAX_BYTES",
    "PROMPT_HEAD_CHARS",
    "PROMPT_ROLES",
    "PROMPT_SCAN_BYTES",
    "PROTOCOL",
    "RAW_FILE",
    "SAMPLE_ID_MAX",
    "SAMPLE_ID_MIN",
    "SEQ_MAX_BYTES",
    "SPREAD_SCAN_BYTES",
    "START_LOCK",
    "START_SEQ",
    "TAIL_CHUNK",
    "TAIL_MAX_BYTES",
    "TAIL_MAX_LINES",
    "TELEMETRY_S",
    "BadFile",
    "DatasetTail",
    "StaleStart",
    "StartFailed",
    "Telemetry",
    "ancestor_problem",
    "boot_id",
    "bounded_lines",
    "code_folders",
    "code_problem",
    "create_unique",
    "fetch_metrics",
    "file_owner",
    "find_heads",
    "flag_value",
    "folder_missing",
    "folder_problem",
    "gpu_report",
    "guarded_launch",
    "guarded_start",
    "heads_request",
    "is_candidate",
    "is_gen_tui_run",
    "is_regular",
    "last_user_turn",
    "launch_detached",
    "lock_status",
    "log_of",
    "main",
    "open_log",
    "open_named",
    "open_own",
    "open_regular",
    "output_dir_of",
    "parse_dataset_arg",
    "proc_info",
    "proc_uid",
    "prompt_fields",
    "prompt_file_of",
    "prompt_names",
    "ps",
    "quoted",
    "read_holder",
    "read_json_object",
    "read_lock_table",
    "read_small",
    "record_counts",
    "record_cut",
    "record_figures",
    "record_tokens",
    "record_writes",
    "router_listing",
    "router_workers",
    "run_args",
    "scan_locks",
    "source",
    "spread_lines",
    "start",
    "start_seq",
    "swap_problem",
    "tail",
    "tail_request",
    "user_name",
    "watch",
    "worker_url",
    "writers_only",
]

MODULES = (
    "names",
    "counting",
    "files",
    "folders",
    "locks",
    "spread",
    "tails",
    "emit",
    "telemetry",
    "dataset",
    "command_lines",
    "starts",
    "processes",
    "prompt_lines",
    "cli",
)
"""The program's parts in dependency order: each uses only names defined above it, and `cli`
comes last, so its `__main__` guard runs once the whole program is defined."""

_FOLDER = os.path.dirname(os.path.abspath(__file__))

PYTHON_FLAGS = ("-I",)
"""How python runs the watcher (`python3 -I -`): isolated, so neither the working folder
(first on sys.path for a program read from stdin) nor PYTHONPATH can supply a module. From a
shared folder, a `json.py` another user put there ran as us on every watch."""


def source() -> str:
    """The watcher as one program, to send to `python3 -` on another host (or locally)."""
    return _build()


@functools.lru_cache(maxsize=None)
def _build() -> str:
    """This package's docstring, one `from __future__` line, the modules' stdlib imports once
    each, then every module of MODULES without its imports. Built once: the files do not
    change while gen-tui runs, and every watcher start sends the same text."""
    imports: list[str] = []
    parts: list[str] = []
    for name in MODULES:
        imports_of, body = _split(os.path.join(_FOLDER, name + ".py"))
        imports.extend(line for line in imports_of if line not in imports)
        parts.append("# -- watcher/%s.py %s\n\n%s" % (name, "-" * (70 - len(name)), body))
    with open(os.path.join(_FOLDER, "__init__.py"), encoding="utf-8") as handle:
        init = handle.read()
    docstring = ast.get_source_segment(init, ast.parse(init).body[0])
    head = "%s\n\nfrom __future__ import annotations\n\n%s\n" % (
        docstring,
        "\n".join(sorted(imports)),
    )
    # Where imports were dropped, blank lines would pile up: at most two in a row.
    return re.sub(r"\n{4,}", "\n\n\n", "\n\n".join([head, *parts]))


def _split(path: str) -> tuple[list[str], str]:
    """(stdlib import statements, the rest) of one module's text: the `from __future__`
    line and the imports of the package's own modules are dropped (in one program, their
    names are already defined above)."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    lines = text.splitlines()
    imports = []
    dropped: set[int] = set()
    for node in ast.parse(text, path).body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        span = range(node.lineno - 1, node.end_lineno or node.lineno)
        dropped.update(span)
        if not _own_import(node):
            imports.append("\n".join(lines[index] for index in span))
    kept = [line for index, line in enumerate(lines) if index not in dropped]
    return imports, "\n".join(kept).strip("\n") + "\n"


def _own_import(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether an import statement is `from __future__`, or of this package (relative or by
    its absolute name): the ones the one-program text leaves out."""
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level > 0 or module == "__future__" or module.startswith("gen_tui")
    return any(alias.name.startswith("gen_tui") for alias in node.names)
