"""The remote watcher: a stdlib-only program that streams per-dataset token totals as JSON lines.

Why a program of its own: the GPU box may have nothing but a system Python 3.8 and no gen-tui,
and its record files hold hundreds of MB. So gen-tui sends the watcher's source over one SSH
channel and runs it there with `python3 - OUTPUT_DIR DATASET...`; only counts cross the
network. The same source runs locally, and the package is importable, so the tests hold it to
the engine's record scan. It ships as one text: :func:`source` joins the modules in `MODULES`
order, their own imports dropped, so every top-level name is unique across the modules. It is
also the one home of the portable half of the on-disk contract (file names, the dataset-name,
record-counting and prompt-line rules, locks, the process listing): the rest of gen-tui
takes those from here.

Keep it Python 3.8 and stdlib only: no `match`, no `X | Y` outside annotations, no
`str.removeprefix`, no third-party imports. The tests parse :func:`source` with
`feature_version=(3, 8)`.

Its modes, the lines it prints, the counting rule and how it treats hostile files are in the
docs: docs/watcher-protocol.md.
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
    RECORD_MAX_BYTES,
    SEQ_MAX_BYTES,
    START_LOCK,
    START_SEQ,
)
from .notices import LINK_NAMES, link_writer, notice_request
from .processes import (
    CMDLINE_SHOWN,
    OTHERS_WRITES,
    bounded_cmdline,
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
    gpu_rows,
    router_listing,
    router_workers,
    worker_url,
)

__all__ = [
    "CHUNK",
    "CMDLINE_SHOWN",
    "CUT",
    "DATASET_NAME",
    "DEFAULT_PATTERN",
    "ERRORS_FILE",
    "HEARTBEAT_S",
    "HISTORY_FILE",
    "HOLDER_MAX_BYTES",
    "LINK_NAMES",
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
    "OTHERS_WRITES",
    "POLL_S",
    "PROGRESS_FILE",
    "PROGRESS_FRESH_S",
    "PROGRESS_MAX_BYTES",
    "PROMPT_HEAD_CHARS",
    "PROMPT_ROLES",
    "PROMPT_SCAN_BYTES",
    "PROTOCOL",
    "RAW_FILE",
    "RECORD_MAX_BYTES",
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
    "bounded_cmdline",
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
    "gpu_rows",
    "guarded_launch",
    "guarded_start",
    "heads_request",
    "is_candidate",
    "is_gen_tui_run",
    "is_regular",
    "last_user_turn",
    "launch_detached",
    "link_writer",
    "lock_status",
    "log_of",
    "main",
    "notice_request",
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
    "notices",
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
