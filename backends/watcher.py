"""The remote watcher: a stdlib-only script that streams per-dataset token totals as JSON lines.

Why a script of its own: the GPU box may have nothing but a system Python 3.8 and no gen-tui,
and its record files hold hundreds of MB. So gen-tui sends this module's source over one SSH
channel and runs it there with `python3 - OUTPUT_DIR DATASET...`; only counts cross the
network. The same source runs locally (as a subprocess of `sys.executable -`), and the module
is importable, so the tests hold it to :func:`gen_tui.backends.records.scan_records`.

It is also the one home of the portable half of the on-disk contract, which the rest of
gen-tui imports from here: a dataset folder's file names, the dataset-name rule, the
record-counting rule (:func:`record_counts`), the lock holder and the lock probe
(:func:`lock_status`, from /proc/locks), and the process listing (:func:`ps`, which the local
host calls in-process).

Keep it Python 3.8 and stdlib only: no `match`, no `X | Y` outside annotations, no
`str.removeprefix`, no third-party imports. The tests parse it with `feature_version=(3, 8)`.

Modes (all print JSON lines on stdout):

- watch (default): `OUTPUT_DIR DATASET[:OFFSET:INO:TOKENS:SAMPLES]...`. One `hello` line,
  then one `dataset` line per dataset at start and whenever its totals, lock holder or
  progress change, and a `heartbeat` line every `--heartbeat` seconds so the client can tell
  a live but quiet watcher from a dead link. A dataset line carries `resume`, the exact
  argument that lets a later watcher continue from the same byte offset without recounting
  or double counting. `--once` prints one line per dataset and exits. With `--telemetry
  SECONDS`, a `metrics` line per `--metrics-url` (its /metrics, read on this box) and a
  `gpus` line (nvidia-smi) that often, from a thread of their own.
- `--ps REGEX --output-dir DIR [--pids PID,...]`: one `ps` line describing the processes
  whose command line matches (or the given pids) with each one's owner uid and name, and
  the watcher's own uid (the login user's: a client then tells another user's run from
  its own), the lock files under the output folders with who owns and may write them,
  and the prompt files of each process's `--prompts-dir`. The run list is built from it.
  It also carries the output folder's start count (`start_seq`), read before the processes.
- `--start JSON` (`output_dir`, `argv`, `log`, `cwd`, `expect`): start a run detached, in a
  session of its own, under the output folder's start lock, and only if the folder's start
  count is still `expect`: no other start has happened since the check for a live writer
  that this start relies on. One `start` line: the pid, or `refused` with the count.
- `--tail JSON` (`path`, `lines`, `max_bytes`, `whole`): the last lines of one regular file,
  or of a run's log (`pid`, `dataset`, `output_dir` instead of `path`: see :func:`log_of`),
  read backwards from its end in chunks (never the whole file: a 10 GB record file costs
  what its last answers weigh), at most `max_bytes` in all. One `tail` line: `lines` (text,
  utf-8 with replacement), `size` (the file's length) and `cut` (true when fewer lines
  came than asked because of the size cap). With `whole`, a partial last line (a record
  being written) is left out.

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

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PROTOCOL = 1
# A dataset folder's files: gen-tui's and every client's one definition of them.
RAW_FILE = "raw_responses.jsonl"
ERRORS_FILE = "errors.jsonl"
PROGRESS_FILE = "progress.json"
LOCK_FILE = "run.lock"
MANIFEST_FILE = "run_manifest.json"  # what the run was run with: prompts, template, sampling
HISTORY_FILE = "history.jsonl"  # a point every few seconds of every run, compacted (history.py)
LOG_DIR = ".gen-tui-logs"  # starts with '.', so it can never be taken for a dataset folder
START_SEQ = "start.seq"
START_LOCK = "start.lock"
CHUNK = 4 << 20
POLL_S = 0.5
HEARTBEAT_S = 2.0
# A progress.json this old no longer describes a live writer.
PROGRESS_FRESH_S = 10.0
# The most a small file of a dataset folder may hold: anyone who can write in a shared box's
# folder can make one huge, and the watcher's report line must stay well under a client's
# line limit (asyncio's readline stops at 64 KiB). A real progress.json is a few KiB.
PROGRESS_MAX_BYTES = 32 << 10
HOLDER_MAX_BYTES = 16 << 10
SEQ_MAX_BYTES = 64
# The deepest nesting a progress.json or run.lock may have: a client parses what we forward
# with a recursive parser (a real file nests 4 deep).
MAX_DEPTH = 32

# Telemetry (watch mode, `--telemetry SECONDS`): the servers' /metrics read on the box
# itself (no port needs exposing) and the GPUs from nvidia-smi, forwarded as `metrics` and
# `gpus` lines. A /metrics answer is read up to METRICS_MAX_BYTES; what is forwarded drops
# the histograms and help texts (the bulk of SGLang's ~100 KB) and must fit in
# METRICS_SENT_BYTES, under the client's line limit.
TELEMETRY_S = 2.0
METRICS_MAX_BYTES = 4 << 20
METRICS_SENT_BYTES = 48 << 10
METRICS_TIMEOUT_S = 3.0
MAX_METRICS_URLS = 16
NVIDIA_SMI_QUERY = "index,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"
NVIDIA_SMI_TIMEOUT_S = 5.0
MAX_GPUS = 64
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count", "_created")

# The counting rule's bounds. No answer is ten million tokens long, so a bigger count is a
# damaged or hostile line (malformed, never a total: 10**30 once marked a dataset done),
# and a sample id is a signed 64-bit integer or a string, which every reader can hold.
MAX_COMPLETION_TOKENS = 10**7
SAMPLE_ID_MIN = -(2**63)
SAMPLE_ID_MAX = 2**63 - 1

_KEY = b'"completion_tokens":'
_SAMPLE_KEY = b'"sample_id":'
_DIGITS = b"0123456789"
_ENDS = (b",", b"}", b" ", b"\t", b"\r", b"\n")
# \Z, not $: "$" also matches before a final newline, and "B1\n" is no safe name.
DATASET_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")

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


def _integer_at(data: bytes, pos: int, limit: int) -> int | None:
    """The JSON integer in [0, limit] starting at `pos` (after blanks), or None if not one."""
    while data[pos : pos + 1] in (b" ", b"\t"):
        pos += 1
    end = pos
    while data[end : end + 1] and data[end : end + 1] in _DIGITS:
        end += 1
    if end == pos or data[end : end + 1] not in _ENDS:
        return None
    if end - pos > 1 and data[pos] == 48:  # a leading zero is not JSON
        return None
    if end - pos > 19:  # longer than any limit: no int() of a 10,000-digit number
        return None
    value = int(data[pos:end])
    return value if value <= limit else None


def _once(data: bytes, key: bytes) -> int:
    """Offset just past the only occurrence of `key` in `data`, or -1 (absent or repeated)."""
    at = data.find(key)
    if at < 0 or data.find(key, at + len(key)) >= 0:
        return -1
    return at + len(key)


def record_tokens(line: bytes) -> int | None:
    """Completion tokens of one record line in either layout, or None if it is not a record.

    The rule is that of :func:`record_counts`. The fast path applies only when each key
    occurs exactly once in an object line: then that occurrence is the one `record_counts`
    reads (a key inside a JSON string always has its quotes escaped, so the
    byte pattern cannot match there). Anything else goes through `json`.
    """
    stripped = line.strip()
    if not stripped:
        return None
    # The first key must end in `":` too: a write cut short before it, with the next record
    # glued on (`{"sam{"sample_id":..}`), holds each key once but is no JSON.
    first_key_end = stripped.find(b'"', 2)
    if (
        stripped[:2] == b'{"'
        and stripped[-1:] == b"}"
        and stripped[first_key_end + 1 : first_key_end + 2] == b":"
    ):
        tokens_at = _once(stripped, _KEY)
        id_at = _once(stripped, _SAMPLE_KEY) if tokens_at >= 0 else -1
        if id_at >= 0:
            tokens = _integer_at(stripped, tokens_at, MAX_COMPLETION_TOKENS)
            pos = id_at
            while stripped[pos : pos + 1] in (b" ", b"\t"):
                pos += 1
            if tokens is not None and (
                stripped[pos : pos + 1] == b'"'
                or _integer_at(stripped, pos, SAMPLE_ID_MAX) is not None
            ):
                return tokens
    return _json_tokens(stripped)


def record_counts(record) -> tuple:
    """(sample_id, completion_tokens) of a parsed record in either layout: the counting rule.

    A record is a JSON object with a `sample_id` (or `id`) that is a string or a signed
    64-bit integer, and an integer `completion_tokens` in [0, MAX_COMPLETION_TOKENS] at the
    top level, else in `usage`, else in `meta_info`. Raises ValueError naming the missing or
    wrong field. The engine's resume scan (`records.py`) and the watcher both count by it.
    """
    if not isinstance(record, dict):
        raise ValueError("record is not a JSON object")
    sample_id = record.get("sample_id", record.get("id"))
    if sample_id is None:
        raise ValueError("field 'sample_id' is missing")
    if isinstance(sample_id, bool) or not isinstance(sample_id, (str, int)):
        raise ValueError("field 'sample_id' must be a string or integer, got %r" % (sample_id,))
    if isinstance(sample_id, int) and not SAMPLE_ID_MIN <= sample_id <= SAMPLE_ID_MAX:
        raise ValueError("field 'sample_id' is out of the 64-bit range")
    tokens = record.get("completion_tokens")
    if tokens is None:
        usage = record.get("usage")
        if isinstance(usage, dict):
            tokens = usage.get("completion_tokens")
        if tokens is None:
            meta = record.get("meta_info")
            if isinstance(meta, dict):
                tokens = meta.get("completion_tokens")
    if tokens is None:
        raise ValueError("field 'completion_tokens' (or 'usage.completion_tokens') is missing")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(
            "field 'completion_tokens' must be a non-negative integer, got %r" % (tokens,)
        )
    if tokens > MAX_COMPLETION_TOKENS:
        raise ValueError(
            "field 'completion_tokens' is over %d, no answer is that long" % MAX_COMPLETION_TOKENS
        )
    return sample_id, tokens


def _json_tokens(line: bytes) -> int | None:
    try:
        return record_counts(json.loads(line))[1]
    except (ValueError, RecursionError):  # not JSON, nested too deeply, or not a record
        return None


# -- reading a dataset folder's files -------------------------------------------------------
#
# The folders may sit on a box shared with other users, so any file in them may be a symlink
# to someone's secret, a FIFO that blocks an open() for ever, megabytes of JSON or JSON nested
# 100,000 deep. Every read goes through `open_regular`: no symlink followed, never blocking,
# regular files only; small files are read whole only up to a bound. A bad file is a
# `BadFile`, reported for its dataset alone.

_S_IFMT = 0o170000
_S_IFREG = 0o100000
_KINDS = {0o140000: "a socket", 0o120000: "a symlink", 0o060000: "a block device"}
_KINDS.update({0o040000: "a folder", 0o020000: "a character device", 0o010000: "a FIFO"})
# O_NOFOLLOW and O_NONBLOCK exist on every POSIX system the watcher runs on.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class BadFile(OSError):
    """A file or folder that is not what a dataset folder's must be; the message is one line.

    An OSError, so a caller that already reports "cannot write in FOLDER: ..." for a failed
    open reports this one too, in its own words (its `strerror` is None, `str()` the line).
    """


def _kind(mode: int) -> str:
    return _KINDS.get(mode & _S_IFMT, "not a regular file")


def is_regular(mode: int) -> bool:
    return mode & _S_IFMT == _S_IFREG


def open_regular(path: str, flags: int = _READ_FLAGS) -> int:
    """An fd of `path`, which must be a regular file: never a symlink's target, never a FIFO
    or device (checked before opening, so a tape is not rewound, and on the open fd).

    Raises FileNotFoundError when absent, BadFile when it is something else, OSError.
    """
    st = os.lstat(path)
    if not is_regular(st.st_mode):
        raise BadFile("%s is %s, not a regular file" % (os.path.basename(path), _kind(st.st_mode)))
    # A symlink swapped in after the lstat fails here with ELOOP: an OSError like any other.
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not is_regular(st.st_mode):  # swapped between the lstat and the open
        os.close(fd)
        raise BadFile("%s is %s, not a regular file" % (os.path.basename(path), _kind(st.st_mode)))
    return fd


def read_small(path: str, limit: int) -> bytes:
    """The whole of a small regular file, at most `limit` bytes (BadFile if bigger)."""
    fd = open_regular(path)
    try:
        parts = []
        size = 0
        while size <= limit:
            part = os.read(fd, limit + 1 - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
    finally:
        os.close(fd)
    if size > limit:
        raise BadFile(
            "%s is over %s bytes, more than such a file ever holds"
            % (os.path.basename(path), "{:,}".format(limit))
        )
    return b"".join(parts)


TAIL_CHUNK = 64 << 10
TAIL_MAX_BYTES = 4 << 20
"""The most a tail request reads and returns, whatever it asks for."""
TAIL_MAX_LINES = 1000


_LOG_STAMP = r"-\d{8}-\d{6}\.log\Z"


def log_of(pid, dataset: str, output_dir: str) -> str | None:
    """Where a run's output goes: the file its stdout is (any run of this user started with
    its output in a file, gen-tui's detached starts included), else the newest of the
    output folder's start logs for `dataset` (a run that has ended); None when neither."""
    if pid:
        with contextlib.suppress(OSError):
            target = os.readlink("/proc/%d/fd/1" % int(pid))
            if target.startswith("/") and is_regular(os.stat(target).st_mode):
                return target
    folder = os.path.join(output_dir, LOG_DIR)
    pattern = re.compile(re.escape(dataset) + _LOG_STAMP)
    try:
        names = [name for name in os.listdir(folder) if pattern.match(name)]
    except OSError:
        return None
    return os.path.join(folder, max(names)) if names else None  # the stamp sorts by time


def tail_request(spec: dict) -> dict:
    """The `--tail` request: a file's last lines, or a `tail` line naming why not."""
    path = spec.get("path")
    if path is None:
        path = log_of(spec.get("pid"), str(spec.get("dataset", "")), str(spec.get("output_dir")))
        if path is None:
            return {"type": "tail", "error": "no log found for this run"}
    try:
        report = tail(
            str(path),
            int(spec.get("lines", 20)),
            int(spec.get("max_bytes", TAIL_MAX_BYTES)),
            bool(spec.get("whole")),
        )
    except OSError as exc:
        why = _problem(os.path.basename(str(path)), exc) or "%s does not exist" % path
        return {"type": "tail", "error": why, "path": str(path)}
    report["path"] = str(path)
    return report


def tail(path: str, lines: int, max_bytes: int, whole: bool = False) -> dict:
    """The last `lines` lines of the regular file `path` (see `--tail` in the docstring).

    A line that does not fit in `max_bytes` is not returned in part (the bytes read are its
    tail, not its head): `cut` says lines are missing, and no older line is read past it.
    """
    lines = max(0, min(int(lines), TAIL_MAX_LINES))
    max_bytes = max(0, min(int(max_bytes), TAIL_MAX_BYTES))
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        end = size
        if whole:  # a record being written is no line yet: end at the last line break
            end = 0
            pos = size
            while pos > 0:
                start = max(0, pos - TAIL_CHUNK)
                found = os.pread(fd, pos - start, start).rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                pos = start
        pos, buf = end, b""
        # Back from the end until `lines` whole lines are in `buf`, or the start, or the cap.
        while pos > 0 and end - pos < max_bytes and buf.count(b"\n", 0, len(buf) - 1) < lines:
            start = max(0, pos - TAIL_CHUNK, end - max_bytes)
            buf = os.pread(fd, pos - start, start) + buf
            pos = start
    finally:
        os.close(fd)
    parts = buf.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    if pos > 0 and parts:  # the first part is the tail of a longer line
        parts.pop(0)
    parts = parts[max(0, len(parts) - lines) :] if lines else []
    cut = pos > 0 and end - pos >= max_bytes and len(parts) < lines
    text = [part.decode("utf-8", "replace") for part in parts]
    return {"type": "tail", "lines": text, "size": size, "cut": cut}


def _deeper_than(value, depth: int) -> bool:
    """Whether parsed JSON nests more than `depth` levels (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level >= depth:
                return True
            items = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in items)
    return False


def read_json_object(path: str, limit: int) -> dict:
    """The JSON object in a small file of a dataset folder.

    Raises FileNotFoundError when absent, OSError, and BadFile (one line) for anything else:
    not a regular file, too big, not JSON, nested too deeply, not an object.
    """
    return _json_object(read_small(path, limit), os.path.basename(path))


def _json_object(data: bytes, name: str) -> dict:
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise BadFile("%s is JSON nested too deeply" % name) from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise BadFile("%s is not valid JSON (%s)" % (name, str(exc)[:80])) from None
    if not isinstance(value, dict):
        raise BadFile("%s holds no JSON object" % name)
    if _deeper_than(value, MAX_DEPTH):
        raise BadFile("%s is JSON nested too deeply" % name)
    return value


def _no_constant(name: str):
    raise ValueError("%s is not JSON" % name)


# -- writing in a dataset folder ------------------------------------------------------------
#
# A file we create or append to must never be one somebody else put there: a symlink named
# run.lock or raw_responses.jsonl.torn.<ms> would make us write (or copy a torn line) into a
# file of theirs choosing, as us. So: O_NOFOLLOW always, O_EXCL for every new name, side
# files 0600, and folders that no one else can write in (`folder_problem`).

_WRITE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def open_own(path: str, flags: int, mode: int = 0o600) -> int:
    """os.open(path, flags, mode) that never follows a symlink and gives a regular file only
    (BadFile otherwise, one line). With O_CREAT|O_EXCL it makes a new file or fails."""
    try:
        fd = os.open(path, flags | _WRITE_FLAGS, mode)
    except OSError:
        if os.path.islink(path):
            raise BadFile("%s is a symlink, not a regular file" % path) from None
        raise
    st = os.fstat(fd)
    if not is_regular(st.st_mode):
        os.close(fd)
        raise BadFile("%s is %s, not a regular file" % (path, _kind(st.st_mode)))
    return fd


def open_log(path: str) -> int:
    """An fd appending to a log we own (created 0600): for a relaunch's output."""
    return open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def create_unique(stem: str) -> tuple:
    """(fd, path) of a new 0600 file named `stem.PID.N`: O_EXCL, so a name planted in advance
    is skipped rather than followed. For temporary files beside their target."""
    for attempt in range(1000):
        path = "%s.%d.%d" % (stem, os.getpid(), attempt)
        try:
            return open_own(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), path
        except (FileExistsError, BadFile):
            continue
    raise BadFile("cannot make a temporary file beside %s: every name is taken" % stem)


def folder_problem(path: str) -> str | None:
    """Why `path` is no safe folder for our files, in one line (None: it is one).

    Safe means a folder of ours that nobody else can write in: not owned by another user,
    not writable by group or others (a sticky /tmp-like folder included, since anyone may
    create names in it), and not a symlink somebody else made. Anyone who could write in it
    could plant links that make us write, read or disclose their choice of our files.
    """
    uid = os.geteuid()
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as exc:
        return "cannot use %s (%s)" % (path, exc.strerror)
    if link.st_mode & _S_IFMT == 0o120000 and link.st_uid not in (uid, 0):
        return "refusing %s: it is a symlink made by uid %d, not by you (uid %d)" % (
            path,
            link.st_uid,
            uid,
        )
    if st.st_mode & _S_IFMT != 0o040000:
        return "refusing %s: it is %s, not a folder" % (path, _kind(st.st_mode))
    if st.st_uid != uid:
        return (
            "refusing %s: it is owned by uid %d, not by you (uid %d), so its files could be "
            "links to yours; use a folder of your own" % (path, st.st_uid, uid)
        )
    if st.st_mode & 0o022:
        return (
            "refusing %s: it is writable by %s (mode %04o), so anyone could plant links to "
            "your files in it; `chmod go-w` it or use another folder"
            % (path, "others" if st.st_mode & 0o002 else "its group", st.st_mode & 0o7777)
        )
    return None


def read_lock_table() -> dict | None:
    """(major, minor, inode) -> pid of every flock holder, from /proc/locks (Linux).

    Reading /proc/locks never touches the lock itself, so a watcher polling it cannot make a
    starting writer's non-blocking `flock` fail. None where /proc/locks is unavailable.
    """
    try:
        with open("/proc/locks") as handle:
            text = handle.read()
    except OSError:
        return None
    table = {}
    for row in text.splitlines():
        parts = row.split()
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK":
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            table[(int(major, 16), int(minor, 16), int(inode))] = pid
        except ValueError:
            continue
    return table


def read_holder(path: str) -> dict:
    """What the current or last writer wrote into its lock file (empty if unreadable)."""
    return _holder(path)[0]


def _holder(path: str) -> tuple:
    """(holder dict, problem or None) of a lock file: an absent or empty file is no problem."""
    try:
        data = read_small(path, HOLDER_MAX_BYTES)
        if not data.strip():
            return {}, None  # a writer between its truncate and its write
        return _json_object(data, LOCK_FILE), None
    except FileNotFoundError:
        return {}, None
    except BadFile as exc:
        return {}, str(exc)
    except OSError as exc:
        return {}, "%s is unreadable (%s)" % (os.path.basename(path), exc.strerror)


def lock_status(path: str, table: dict | None) -> tuple:
    """(locked, pid of the live holder or None, holder dict) of a dataset's `run.lock`."""
    return _lock_status(path, table)[:3]


def _lock_status(path: str, table: dict | None) -> tuple:
    """`lock_status` and the lock file's problem (None when it is sound or absent).

    Only a regular file is a lock: a writer opens it with O_NOFOLLOW, so a symlink or a FIFO
    planted under the name is never one (and is neither followed nor opened here).
    """
    try:
        st = os.lstat(path)
    except OSError:
        return False, None, {}, None
    if not is_regular(st.st_mode):
        return False, None, {}, "%s is %s, not a regular file" % (LOCK_FILE, _kind(st.st_mode))
    holder, problem = _holder(path)
    if table is not None:
        pid = table.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        if pid is None:
            return False, None, holder, problem
        if pid <= 0:
            # Held by a process outside our pid namespace: trust the file's word for the pid.
            pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
        return True, pid, holder, problem
    try:
        fd = open_regular(path)
    except (OSError, BadFile):
        return False, None, holder, problem
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
        return True, pid, holder, problem
    finally:
        os.close(fd)
    return False, None, holder, problem


class DatasetTail:
    """Incremental, exact token totals of one dataset folder.

    `offset` only ever moves past complete lines, so no byte is counted twice; the client
    restarts a watcher from `resume` after a reconnect.
    """

    def __init__(
        self,
        output_dir: str,
        name: str,
        offset: int = 0,
        ino: int = 0,
        tokens: int = 0,
        samples: int = 0,
    ) -> None:
        self.name = name
        self.folder = os.path.join(output_dir, name)
        self.path = os.path.join(self.folder, RAW_FILE)
        self.offset = offset
        self.ino = ino
        self.tokens = tokens
        self.samples = samples
        self.bad_lines = 0
        self.first_bad = None
        self.tail_tokens = 0
        self.tail_samples = 0
        self.tail_bytes = 0
        self.size = 0
        self.mtime = None
        self.exists = False
        self.resets = 0
        self.locked = False
        self.lock_pid = None
        self.progress = None
        self.progress_mtime = None
        self.problems = {}
        """{file name: one line}: the folder's files that cannot be read as they stand."""
        self._last_key = None

    @property
    def total_tokens(self) -> int:
        return self.tokens + self.tail_tokens

    @property
    def total_samples(self) -> int:
        return self.samples + self.tail_samples

    def _reset(self) -> None:
        self.offset = 0
        self.tokens = 0
        self.samples = 0
        self.bad_lines = 0
        self.first_bad = None
        self.resets += 1

    @property
    def problem(self) -> str | None:
        """What is wrong with this dataset's files, in one line (None: nothing)."""
        if not self.problems:
            return None
        return "; ".join(self.problems[name] for name in sorted(self.problems))

    def _note(self, name: str, problem: str | None) -> None:
        if problem is None:
            self.problems.pop(name, None)
        else:
            self.problems[name] = problem

    def _count(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            tokens = record_tokens(line)
            if tokens is None:
                self.bad_lines += 1
                if self.first_bad is None:
                    self.first_bad = line[:80].decode("utf-8", "replace")
                continue
            self.tokens += tokens
            self.samples += 1

    def poll(self) -> None:
        """Count whatever was appended since the last poll."""
        try:
            fd = open_regular(self.path)
        except (OSError, BadFile) as exc:
            if self.exists or self.offset:
                self._reset()
            self.exists = False
            self.size = 0
            self.mtime = None
            self.tail_tokens = self.tail_samples = self.tail_bytes = 0
            self._note(RAW_FILE, _problem(RAW_FILE, exc))
            return
        with os.fdopen(fd, "rb") as handle:
            self._note(RAW_FILE, None)
            self._read_appended(handle, os.fstat(fd))

    def _read_appended(self, handle, st) -> None:
        self.exists = True
        if (self.ino and st.st_ino != self.ino) or st.st_size < self.offset:
            self._reset()
        self.ino = st.st_ino
        self.mtime = st.st_mtime
        if st.st_size == self.size and st.st_size == self.offset + self.tail_bytes:
            return
        rest = b""
        handle.seek(self.offset)
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            self._count(data[:cut])
            self.offset += cut + 1
            rest = data[cut + 1 :]
        self.size = self.offset + len(rest)
        self.tail_bytes = len(rest)
        tokens = _json_tokens(rest.strip()) if rest.strip() else None
        self.tail_tokens = tokens or 0
        self.tail_samples = 1 if tokens is not None else 0

    def poll_meta(self, table: dict | None) -> None:
        """Refresh the lock holder and, when it changed on disk, progress.json."""
        lock = os.path.join(self.folder, LOCK_FILE)
        self.locked, self.lock_pid, _, problem = _lock_status(lock, table)
        self._note(LOCK_FILE, problem)
        path = os.path.join(self.folder, PROGRESS_FILE)
        try:
            st = os.lstat(path)
        except OSError:
            self.progress = None
            self.progress_mtime = None
            self._note(PROGRESS_FILE, None)
            return
        if st.st_mtime == self.progress_mtime and is_regular(st.st_mode):
            return
        try:
            value = read_json_object(path, PROGRESS_MAX_BYTES)
        except FileNotFoundError:
            return  # replaced atomically, so a failed read only means "read it next time"
        except (OSError, BadFile) as exc:
            # Shown, not kept: a progress.json that cannot be read describes nothing.
            self.progress = None
            self.progress_mtime = st.st_mtime
            self._note(PROGRESS_FILE, _problem(PROGRESS_FILE, exc))
            return
        self.progress = value
        self.progress_mtime = st.st_mtime
        self._note(PROGRESS_FILE, None)

    def resume_arg(self) -> str:
        return "%s:%d:%d:%d:%d" % (self.name, self.offset, self.ino, self.tokens, self.samples)

    def report(self, now: float) -> dict | None:
        """The dataset line if anything a client shows changed since the last report."""
        key = (
            self.exists,
            self.total_tokens,
            self.total_samples,
            self.offset,
            self.bad_lines,
            self.locked,
            self.lock_pid,
            self.progress_mtime,
            self.resets,
            self.problem,
        )
        if key == self._last_key:
            return None
        self._last_key = key
        fresh = self.progress_mtime is not None and now - self.progress_mtime < PROGRESS_FRESH_S
        return {
            "type": "dataset",
            "dataset": self.name,
            "exists": self.exists,
            "tokens": self.total_tokens,
            "samples": self.total_samples,
            "offset": self.offset,
            "ino": self.ino,
            "size": self.size,
            "tail_tokens": self.tail_tokens,
            "tail_samples": self.tail_samples,
            "bad_lines": self.bad_lines,
            "first_bad": self.first_bad,
            "resets": self.resets,
            "locked": self.locked,
            "lock_pid": self.lock_pid,
            "mtime": self.mtime,
            "progress": self.progress,
            "progress_fresh": fresh,
            "problem": self.problem,
            "resume": self.resume_arg(),
            "time": now,
        }


def _problem(name: str, exc: Exception) -> str | None:
    """The one line a failed open or read of a dataset's file `name` is reported as."""
    if isinstance(exc, FileNotFoundError):
        return None
    if isinstance(exc, BadFile):
        return str(exc)
    return "%s is unreadable (%s)" % (name, getattr(exc, "strerror", None) or exc)


def parse_dataset_arg(output_dir: str, arg: str) -> DatasetTail:
    """`NAME` or `NAME:OFFSET:INO:TOKENS:SAMPLES` (the `resume` of an earlier report)."""
    parts = arg.split(":")
    name = parts[0]
    if not DATASET_NAME.match(name):
        raise ValueError("dataset name %r is not allowed" % name)
    if len(parts) == 1:
        return DatasetTail(output_dir, name)
    if len(parts) != 5:
        raise ValueError("bad dataset argument %r (NAME or NAME:OFFSET:INO:TOKENS:SAMPLES)" % arg)
    numbers = [int(part) for part in parts[1:]]
    if min(numbers) < 0:
        raise ValueError("bad dataset argument %r" % arg)
    return DatasetTail(output_dir, name, *numbers)


_EMIT_LOCK = threading.Lock()


def _emit(payload: dict) -> None:
    line = json.dumps(payload, separators=(",", ":")) + "\n"
    with _EMIT_LOCK:  # the telemetry thread writes too: never half a line of each
        sys.stdout.write(line)
        sys.stdout.flush()


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def watch(
    output_dir: str,
    tails: list,
    once: bool = False,
    interval: float = POLL_S,
    heartbeat: float = HEARTBEAT_S,
    telemetry: float = 0.0,
    metrics_urls: list | None = None,
) -> None:
    """Poll every `interval` s; print changes and a heartbeat; run until stdout goes away.
    With `telemetry` > 0, also read `metrics_urls` and the GPUs that often (see Telemetry)."""
    _emit(
        {
            "type": "hello",
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "boot_id": boot_id(),
            "python": "%d.%d.%d" % sys.version_info[:3],
            "output_dir": output_dir,
            "time": time.time(),
        }
    )
    if telemetry > 0 and not once:
        Telemetry(list(metrics_urls or []), telemetry).start()
    seq = 0
    last_beat = time.monotonic()
    while True:
        table = read_lock_table()
        for tail in tails:
            tail.problems.pop("?", None)
            try:
                tail.poll()
                tail.poll_meta(table)
            except (OSError, ValueError, RecursionError, MemoryError) as exc:
                # One dataset's files must never blind the watcher to the others.
                tail.problems["?"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
            line = tail.report(time.time())
            if line is not None:
                _emit(line)
        if once:
            return
        if time.monotonic() - last_beat >= heartbeat:
            seq += 1
            _emit({"type": "heartbeat", "seq": seq, "time": time.time()})
            last_beat = time.monotonic()
        time.sleep(interval)


# -- telemetry (servers and GPUs) ------------------------------------------------------


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""The servers are on this box or its network: a user's HTTP proxy must not see them."""


def _metric_line(line: str) -> bool:
    """Whether a /metrics line is forwarded: samples and their TYPE lines, but no help texts
    and no histogram or summary parts (buckets are most of the text and no panel shows them)."""
    if not line or line.startswith("# HELP"):
        return False
    if line.startswith("#"):
        return line.startswith("# TYPE")
    name = line.split("{", 1)[0].split(" ", 1)[0]
    return not name.endswith(_HISTOGRAM_PARTS)


def fetch_metrics(url: str, timeout: float = METRICS_TIMEOUT_S) -> dict:
    """One `metrics` line for `url`: its /metrics text (`text`), or `absent` (404: SGLang
    without --enable-metrics), or `error`: one line saying why not."""
    message = {"type": "metrics", "url": url}
    if not url.startswith(("http://", "https://")):
        message["error"] = "not an http(s) URL"
        return message
    deadline = time.monotonic() + timeout
    try:
        with _NO_PROXY.open(url.rstrip("/") + "/metrics", timeout=timeout) as response:
            parts = []
            size = 0
            while size <= METRICS_MAX_BYTES and time.monotonic() < deadline:
                piece = response.read(64 << 10)
                if not piece:
                    break
                parts.append(piece)
                size += len(piece)
            else:
                message["error"] = "more than %d MB or %g s" % (METRICS_MAX_BYTES >> 20, timeout)
                return message
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            message["absent"] = True
        else:
            message["error"] = "HTTP %d" % exc.code
        return message
    except (OSError, ValueError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", None) or exc
        message["error"] = str(reason)[:200] or type(exc).__name__
        return message
    text = b"".join(parts).decode("utf-8", "replace")
    kept = "\n".join(line for line in text.splitlines() if _metric_line(line)) + "\n"
    if len(kept) > METRICS_SENT_BYTES:
        message["error"] = "more than %d KB of metrics besides histograms" % (
            METRICS_SENT_BYTES >> 10
        )
        return message
    message["text"] = kept
    return message


def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]": the GPU does not say
    return value if value == value and abs(value) != float("inf") else None


def gpu_report(timeout: float = NVIDIA_SMI_TIMEOUT_S) -> dict:
    """One `gpus` line: each GPU's index, name, utilisation %, memory used and total (MiB),
    power (W) and temperature (C) from nvidia-smi; `absent` without it; `error` if it fails."""
    message = {"type": "gpus"}
    exe = shutil.which("nvidia-smi")
    if exe is None:
        message["absent"] = True
        return message
    argv = [exe, "--query-gpu=" + NVIDIA_SMI_QUERY, "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        message["error"] = ("nvidia-smi: %s" % exc)[:200]
        return message
    out = done.stdout[:PROGRESS_MAX_BYTES].decode("utf-8", "replace")
    if done.returncode != 0:
        said = (done.stderr or done.stdout)[:200].decode("utf-8", "replace").strip()
        message["error"] = "nvidia-smi exited %d: %s" % (done.returncode, said)
        return message
    gpus = []
    for line in out.splitlines()[:MAX_GPUS]:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 7:
            continue
        index = _number(fields[0])
        if index is None:
            continue
        gpus.append(
            {
                "index": int(index),
                "name": fields[1][:80],
                "util": _number(fields[2]),
                "mem_used": _number(fields[3]),
                "mem_total": _number(fields[4]),
                "power": _number(fields[5]),
                "temp": _number(fields[6]),
            }
        )
    message["gpus"] = gpus
    return message


class Telemetry(threading.Thread):
    """Reads the servers' /metrics and the GPUs every `every` s, beside the watch loop (a
    slow server must not hold up the totals or the heartbeat). A GPU report that says the
    same "absent" or error as the last one is not sent again."""

    def __init__(self, urls: list, every: float = TELEMETRY_S) -> None:
        super().__init__(name="gen-tui-telemetry", daemon=True)
        self.urls = urls[:MAX_METRICS_URLS]
        self.every = every

    def run(self) -> None:
        last_gpus = None
        try:
            while True:
                for url in self.urls:
                    _emit(fetch_metrics(url))
                gpus = gpu_report()
                if "gpus" in gpus or gpus != last_gpus:
                    _emit(gpus)
                last_gpus = gpus
                time.sleep(self.every)
        except (OSError, ValueError):
            return  # stdout went away: the watch loop ends the process


# -- processes (the run list) ------------------------------------------------------------


def flag_value(argv: list, *names: str) -> str | None:
    """The value of the last `--flag VALUE` or `--flag=VALUE` among `names` in argv."""
    found = None
    for index, word in enumerate(argv):
        for name in names:
            if word == name and index + 1 < len(argv):
                found = argv[index + 1]
            elif word.startswith(name + "="):
                found = word[len(name) + 1 :]
    return found


def run_args(argv: list) -> dict:
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


def is_gen_tui_run(argv: list) -> bool:
    return _GEN_TUI_RUN.search(" ".join(argv)) is not None


def output_dir_of(argv: list, cwd: str | None) -> str | None:
    """A run's output folder, absolute: its `--output-dir`, or gen-tui's default `./output`."""
    args = run_args(argv)
    folder = args["output_dir"]
    if folder is None and args["config"] is None and is_gen_tui_run(argv):
        folder = "output"
    return _resolve(folder, cwd)


def is_candidate(argv: list, pattern) -> bool:
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


def _shell_command_string(args: list) -> bool:
    """Whether a shell's options (before its first operand) include `c`: `-c`, `-lc`, `-ec`."""
    for word in args:
        if word == "--" or not word.startswith("-") or word.startswith("--"):
            return False
        if "c" in word[1:]:
            return True
    return False


def record_writes(pid: int):
    """The record files (`raw_responses.jsonl`) `pid` holds open for writing, from
    /proc/PID/fd; None where that cannot be read (another user's process, unless root).

    This is what tells the writer from the wrappers around it (a `bash -lc`, a screen
    window) whose command lines name the same run.
    """
    folder = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(folder)
    except OSError:
        return None
    found = []
    for fd in fds:
        try:
            target = os.readlink(os.path.join(folder, fd))
        except OSError:
            continue
        if os.path.basename(target) != RAW_FILE:
            continue
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as handle:
                flags = next((r.split()[1] for r in handle if r.startswith("flags:")), "0")
        except (OSError, IndexError):
            continue
        if int(flags, 8) & 3 and target not in found:  # O_WRONLY or O_RDWR
            found.append(target)
    return found


def _parents(pid: int, ppid, limit: int = 64) -> list:
    """The ancestors of a process, nearest first (`ppid` given, the rest read from /proc)."""
    out = []
    while ppid and ppid > 1 and len(out) < limit:
        out.append(ppid)
        try:
            with open("/proc/%d/stat" % ppid, "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def writers_only(procs: list) -> list:
    """The runs among matching processes: a wrapper around a run is not one.

    A process that holds a record file open for writing is a run. One that does not is
    left out when a matching process below it in the process tree is listed (it only
    wraps that one: `bash -lc "python run_inference.py"`, `sudo -u`, a screen window) or
    when one above it writes (it is that writer's helper). So `k` stops the process that
    writes, never a shell or a multiplexer around it.
    """
    by_pid = {info["pid"]: info for info in procs}
    above = {info["pid"]: [p for p in _parents(info["pid"], info["ppid"]) if p in by_pid]
             for info in procs}  # fmt: skip
    wraps = {parent for parents in above.values() for parent in parents}
    kept = []
    for info in procs:
        if info.get("writes"):
            kept.append(info)
            continue
        if info["pid"] in wraps:
            continue
        if any(by_pid[parent].get("writes") for parent in above[info["pid"]]):
            continue
        kept.append(info)
    return kept


def _ancestors() -> set:
    """Our own pid and its parents: the shell that runs us mentions the pattern too."""
    out = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open("/proc/%d/stat" % pid, "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def proc_info(pid: int, btime: float, hz: int) -> dict | None:
    """Identity and state of one process from /proc (None when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read()
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[1].split()
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        cwd = None
    ticks = int(fields[19])
    argv = [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")]
    if argv and argv[-1] == "":
        argv.pop()
    return {
        "pid": pid,
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "state": fields[0].decode(),
        "start_ticks": ticks,
        "start_time": btime + ticks / float(hz),
        "cmdline": argv,
        "cwd": cwd,
    }


def proc_uid(pid: int):
    """The real uid that owns a process (None when it is gone): runs of other users are
    listed, and this lets a client tell them apart."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            for row in handle:
                if row.startswith("Uid:"):
                    return int(row.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_NAMES = {}


def user_name(uid):
    """The login name of `uid` (None when the box has none): shown beside another user's run."""
    if uid is None:
        return None
    if uid not in _NAMES:
        try:
            import pwd

            _NAMES[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _NAMES[uid] = None
    return _NAMES[uid]


def file_owner(path: str) -> dict:
    """Who owns `path` and its folder, and who may write them: a command line taken from a
    lock file is run only when its owner, and no one else, can have written it.

    The file is looked at without following a link (a link is never trusted), the folder
    through one (its target is what holds the file).
    """
    out = {}
    try:
        st = os.lstat(path)
        out.update(uid=st.st_uid, user=user_name(st.st_uid), mode=st.st_mode)
        folder = os.stat(os.path.dirname(path))
        out.update(dir_uid=folder.st_uid, dir_user=user_name(folder.st_uid))
        out.update(dir_mode=folder.st_mode)
    except OSError:
        pass
    return out


def _clock() -> tuple:
    btime = 0.0
    try:
        with open("/proc/stat") as handle:
            for row in handle:
                if row.startswith("btime "):
                    btime = float(row.split()[1])
                    break
    except OSError:
        pass
    return btime, os.sysconf("SC_CLK_TCK")


def scan_locks(output_dir: str, table: dict | None) -> dict:
    """{dataset: {locked, pid, holder}} for each dataset folder of `output_dir`.

    A dataset folder holds a lock file or a record file: a foreign script writes no lock,
    and its datasets must still be found (unlocked, no holder).
    """
    out = {}
    try:
        names = sorted(os.listdir(output_dir))
    except OSError:
        return out
    for name in names:
        if not DATASET_NAME.match(name):
            continue
        path = os.path.join(output_dir, name, LOCK_FILE)
        if os.path.exists(path):
            locked, pid, holder = lock_status(path, table)
        elif os.path.exists(os.path.join(output_dir, name, RAW_FILE)):
            locked, pid, holder = False, None, {}
        else:
            continue
        out[name] = {"locked": locked, "pid": pid, "holder": holder}
    return out


def prompt_names(folder: str) -> list:
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


def start_seq(output_dir: str) -> int:
    """How many starts the output folder has seen (0 for none; -1 when unreadable)."""
    path = os.path.join(os.path.expanduser(output_dir), LOG_DIR, START_SEQ)
    try:
        return int(read_small(path, SEQ_MAX_BYTES).strip() or b"0")
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, BadFile):  # a FIFO there must not hang the run list
        return -1


class StaleStart(Exception):
    """Another start came after the check this one relied on: it must not run."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


class StartFailed(Exception):
    """The command could not be launched; the message says why."""


def guarded_start(output_dir: str, expect, launch):
    """`launch()` under the output folder's start lock, if its start count is still `expect`.

    Why: a start request can reach the host late, after its sender gave up on a frozen link
    and a retry checked for a live writer, found none and started one. Each start bumps the
    count, so the late one finds it moved and is refused. The count is bumped only once
    `launch` returns (the process has exec'd, so a check that reads the new count also sees
    the process), and a check reads the count before it lists the processes. `expect` None
    starts whatever the count (a start that relies on no check) and still bumps it.
    """
    folder = os.path.join(os.path.expanduser(output_dir), LOG_DIR)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StartFailed("cannot use the start lock in %s: %s" % (folder, exc.strerror)) from None
    # Its start count, lock and the relaunch logs are ours alone: no one else's links in it.
    problem = folder_problem(folder)
    if problem is not None:
        raise StartFailed(problem)
    try:
        fd = open_own(os.path.join(folder, START_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    except BadFile as exc:
        raise StartFailed("cannot use the start lock: %s" % exc) from None
    except OSError as exc:
        raise StartFailed("cannot use the start lock in %s: %s" % (folder, exc.strerror)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        seq = start_seq(output_dir)
        if seq < 0:  # fail closed: with no count, a late start could not be told apart
            raise StartFailed(
                "cannot read the start count %s: remove it (the next start makes it anew)"
                % os.path.join(folder, START_SEQ)
            )
        if expect is not None and seq != expect:
            raise StaleStart(seq)
        result = launch()
        try:
            temp_fd, temp = create_unique(os.path.join(folder, "." + START_SEQ))
            with os.fdopen(temp_fd, "w") as handle:
                handle.write("%d\n" % (max(seq, 0) + 1))
            os.replace(temp, os.path.join(folder, START_SEQ))
        except (OSError, BadFile) as exc:
            raise StartFailed(
                "started pid %s, but could not count the start in %s (%s): it is running"
                % (getattr(result, "pid", result), folder, getattr(exc, "strerror", None) or exc)
            ) from None
        return result
    finally:
        os.close(fd)


def launch_detached(argv: list, log: str, cwd: str | None):
    """Start `argv` in a session of its own, output to `log`: the Popen, once it has exec'd."""
    log = os.path.expanduser(log)
    if cwd:
        cwd = os.path.expanduser(cwd)
        if not os.path.isdir(cwd):
            raise StartFailed("cannot cd into %s" % cwd)
    folder = os.path.dirname(log)
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
        # never through a symlink, 0600: a log in a shared folder must not clobber or
        # disclose another file (closed below, once the child has its copy)
        handle = os.fdopen(open_log(log), "ab")
    except OSError as exc:
        raise StartFailed("cannot create the log %s: %s" % (log, exc.strerror or exc)) from None
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=cwd or None,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in a word
        why = getattr(exc, "strerror", None) or str(exc)
        raise StartFailed("cannot start %s: %s" % (argv[0] if argv else "", why)) from None
    finally:
        handle.close()


def guarded_launch(output_dir: str, expect, argv: list, log: str, cwd: str | None):
    """`launch_detached` under the output folder's start guard: the Popen."""
    return guarded_start(output_dir, expect, lambda: launch_detached(argv, log, cwd))


def start(spec: dict) -> dict:
    """The `--start` mode: the `start` report for one guarded, detached launch."""
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("--start needs argv: a list of strings")
    output_dir, log, cwd, expect = (spec.get(k) for k in ("output_dir", "log", "cwd", "expect"))
    if not isinstance(output_dir, str) or not isinstance(log, str):
        raise ValueError("--start needs output_dir and log: strings")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError("--start: cwd must be a string")
    if expect is not None and (isinstance(expect, bool) or not isinstance(expect, int)):
        raise ValueError("--start: expect must be an integer")
    try:
        child = guarded_launch(output_dir, expect, argv, log, cwd)
    except StaleStart as stale:
        return {"type": "start", "refused": stale.seq}
    except StartFailed as exc:
        return {"type": "start", "error": str(exc)}
    return {"type": "start", "pid": child.pid}


def folder_missing(path: str) -> str | None:
    """Why the watched output folder cannot hold datasets, or None: said on the panel, since
    an empty screen for a mistyped path looks like a host with nothing running."""
    if not os.path.exists(path):
        return "does not exist"
    if not os.path.isdir(path):
        return "is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be read (permission denied)"
    return None


def ps(pattern: str, output_dir: str | None, pids: list | None = None) -> dict:
    """The `ps` report: matching (or given) processes, their prompt folders and the locks."""
    seq = start_seq(output_dir) if output_dir else None  # before the processes: see start
    regex = re.compile(pattern)
    btime, hz = _clock()
    mine = _ancestors()
    procs = []
    if pids is not None:
        candidates = pids
    else:
        candidates = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    for pid in candidates:
        if pid in mine:
            continue
        info = proc_info(pid, btime, hz)
        if info is None:
            continue
        if pids is None and (
            info["state"] in ("Z", "X") or not is_candidate(info["cmdline"], regex)
        ):
            continue
        args = run_args(info["cmdline"])
        info["args"] = args
        info["writes"] = record_writes(pid)
        info["uid"] = proc_uid(pid)
        info["user"] = user_name(info["uid"])
        prompts = _resolve(args["prompts_dir"], info["cwd"])
        info["prompt_names"] = prompt_names(prompts) if prompts else []
        info["output_dir_abs"] = output_dir_of(info["cmdline"], info["cwd"])
        procs.append(info)
    if pids is None:
        procs = writers_only(procs)
    table = read_lock_table()
    dirs = set()
    if output_dir:
        dirs.add(os.path.normpath(os.path.expanduser(output_dir)))
    for info in procs:
        if info["output_dir_abs"]:
            dirs.add(info["output_dir_abs"])
    locks = {folder: scan_locks(folder, table) for folder in sorted(dirs)}
    for folder, entries in locks.items():
        for name, entry in entries.items():
            entry["file"] = file_owner(os.path.join(folder, name, LOCK_FILE))
    uid = os.getuid()
    asked = os.path.normpath(os.path.expanduser(output_dir)) if output_dir else None
    return {
        "type": "ps",
        "output_dir_problem": folder_missing(asked) if asked else None,
        "host": socket.gethostname(),
        "uid": uid,
        "user": user_name(uid),
        "boot_id": boot_id(),
        "time": time.time(),
        "output_dir": os.path.normpath(os.path.expanduser(output_dir)) if output_dir else None,
        "start_seq": seq,
        "procs": procs,
        "locks": locks,
    }


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gen-tui-watcher")
    parser.add_argument("--ps", metavar="REGEX", help="list runs instead of watching")
    parser.add_argument("--pids", help="with --ps: these pids (comma-separated) only")
    parser.add_argument("--output-dir", help="with --ps: where dataset folders live")
    parser.add_argument("--start", metavar="JSON", help="start a run (see the module's doc)")
    parser.add_argument("--tail", metavar="JSON", help="a file's last lines (module's doc)")
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--interval", type=float, default=POLL_S)
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT_S)
    parser.add_argument("--telemetry", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--metrics-url", action="append", default=[], metavar="URL")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(argv)
    try:
        if args.start is not None:
            spec = json.loads(args.start)
            if not isinstance(spec, dict):
                raise ValueError("--start takes a JSON object")
            _emit(start(spec))
            return 0
        if args.tail is not None:
            spec = json.loads(args.tail)
            if not isinstance(spec, dict):
                raise ValueError("--tail takes a JSON object")
            _emit(tail_request(spec))
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


def source() -> str:
    """This module's source, to send to `python3 -` on another host."""
    with open(__file__, encoding="utf-8") as handle:
        return handle.read()


if __name__ == "__main__":
    sys.exit(main())
