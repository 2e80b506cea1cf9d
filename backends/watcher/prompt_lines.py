"""Prompt lines: the rule that reads one (its sample key and its turns), and the `--heads` mode.

Why here, in the stdlib-only watcher: the sample viewer shows each answer's prompt head, and
the prompt file of a run on a GPU box is on that box. The watcher looks the heads up there
(bounded) and sends only them; so the rule that says which line is which sample, and what
its last user turn is, lives here once, and gen-tui's own prompt reader
(`backends/store/prompts.py`) and the local lookup (`backends/store/prompt_heads.py`) take
it from here.

`--heads JSON` (`keys`, then `path`, or `output_dir` and `dataset` with an optional `pid`):
one `heads` line with, for each key found, `before` (the turns before its last user turn),
`text` (that turn stripped, cut at `chars`) and `chars` (its whole length). The prompt file
is `path`, else the one the dataset's run_manifest.json names (the last run's), else the
`--prompts-dir` of the run `pid` (`DATASET.jsonl` there). The scan reads a regular file, or
a link's regular target as the engine's prompt reader does (`open_named`), never a FIFO; it
stops once every key is found, reads at most PROMPT_SCAN_BYTES, passes lines over
MAX_PROMPT_LINE without holding them, and says `bounded` when it stopped early.
"""

from __future__ import annotations

import json
import os
import typing

from .command_lines import _resolve, run_args
from .files import BadFile, open_named, read_json_object
from .names import MANIFEST_FILE

PROMPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "tool": "tool",
    "function_response": "tool",
}
"""Every role name the three layouts use, as the chat template knows it."""
MAX_PROMPT_LINE = 8 << 20
"""The longest prompt line read: far beyond any context window a server takes, and small
enough that one runaway line (a whole file without newlines) costs little memory to skip."""
PROMPT_HEAD_CHARS = 300
"""The most characters of a prompt shown above its answer: enough to know the question."""
PROMPT_SCAN_BYTES = 256 << 20
"""The most bytes of a prompt file read to find the shown samples (a second or two)."""
MAX_HEAD_KEYS = 100
"""The most samples one `--heads` request looks up (the viewer shows a few dozen)."""
MANIFEST_MAX_BYTES = 1 << 20


def prompt_fields(obj: object, line: int) -> tuple[str | int, list[dict[str, str]]]:
    """(sample_id, messages) of one parsed prompt line (`line`: its 1-based number), or
    ValueError naming the field that is wrong (the caller adds file and line).

    The sample id is the line's `id`, else its `sample_id`, else its line number. Trailing
    assistant turns are dropped: the engine regenerates the answer to the last user turn,
    which is what distillation data for a drafter needs.
    """
    if not isinstance(obj, dict):
        raise ValueError("line is not a JSON object")
    sample_id = obj.get("id", obj.get("sample_id", line))
    if sample_id is None:
        sample_id = line
    if isinstance(sample_id, bool) or not isinstance(sample_id, (str, int)):
        raise ValueError("field 'id' must be a string or integer, got %r" % (sample_id,))
    if "messages" in obj:
        messages = _turns(obj["messages"], "messages", "role", "content")
    elif "conversations" in obj:
        messages = _turns(obj["conversations"], "conversations", "from", "value")
    elif "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("field 'prompt' must be a non-empty string")
        messages = [{"role": "user", "content": prompt}]
        system = obj.get("system")
        if isinstance(system, str) and system:
            messages.insert(0, {"role": "system", "content": system})
    else:
        raise ValueError("no 'messages', 'conversations' or 'prompt' field")
    return sample_id, messages


def _turns(value: object, field: str, role_key: str, text_key: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise ValueError("field '%s' must be a non-empty list" % field)
    out = []
    for index, turn in enumerate(value):
        if not isinstance(turn, dict):
            raise ValueError("field '%s[%d]' must be an object" % (field, index))
        role = turn.get(role_key)
        text = turn.get(text_key)
        if not isinstance(role, str) or role.lower() not in PROMPT_ROLES:
            raise ValueError(
                "field '%s[%d].%s' has unknown role %r" % (field, index, role_key, role)
            )
        if not isinstance(text, str):
            raise ValueError("field '%s[%d].%s' must be a string" % (field, index, text_key))
        out.append({"role": PROMPT_ROLES[role.lower()], "content": text})
    while out and out[-1]["role"] == "assistant":
        out.pop()
    if not out:
        raise ValueError("field '%s' holds no user turn to answer" % field)
    return out


def last_user_turn(
    messages: list[dict[str, str]], chars: int = PROMPT_HEAD_CHARS
) -> dict[str, typing.Any]:
    """What a prompt's head shows: its last user turn (what the answer answers) stripped
    and cut at `chars`, its whole length, and how many turns come before it."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    index = users[-1] if users else len(messages) - 1
    text = messages[index].get("content", "").strip() if messages else ""
    return {"before": max(0, index), "text": text[: max(0, chars)], "chars": len(text)}


def bounded_lines(handle: typing.IO[bytes], limit: int) -> typing.Iterator[bytes | int]:
    """Each line of the binary file `handle`, or its length in bytes (an int) where it is
    over `limit`: such a line is read past in chunks, never held whole."""
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        size = len(raw)
        while True:
            chunk = handle.readline(1 << 20)
            size += len(chunk)
            if not chunk or chunk.endswith(b"\n"):
                break
        yield size


def find_heads(
    path: str,
    keys: typing.Iterable[object],
    max_bytes: int,
    chars: int = PROMPT_HEAD_CHARS,
    loads: typing.Callable[[bytes], typing.Any] | None = None,
) -> dict[str, typing.Any]:
    """The heads of the samples `keys` in the prompt file `path` (see the module's doc):
    `loads` parses a line (gen-tui passes a faster one than `json.loads` locally).

    Raises FileNotFoundError, BadFile (not a regular file) and OSError.
    """
    wanted = set(str(key) for key in keys)
    loads = loads or json.loads
    heads: dict[str, dict[str, typing.Any]] = {}
    bounded = False
    with os.fdopen(open_named(path), "rb") as handle:
        for line_no, raw in enumerate(bounded_lines(handle, MAX_PROMPT_LINE), start=1):
            if len(heads) == len(wanted):  # all found (or none asked): read no further
                break
            if handle.tell() > max_bytes:
                bounded = True
                break
            if isinstance(raw, int) or not raw.strip():
                continue
            try:
                sample_id, messages = prompt_fields(loads(raw), line_no)
            except (ValueError, RecursionError):  # not a prompt: the run said so at its start
                continue
            key = str(sample_id)
            if key in wanted and key not in heads:
                heads[key] = last_user_turn(messages, chars)
                if len(heads) == len(wanted):
                    break
    return {"type": "heads", "heads": heads, "bounded": bounded, "path": path}


def heads_request(spec: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """The `--heads` request: the heads found, or a `heads` line naming why none can be."""
    keys = [str(key)[:200] for key in list(spec.get("keys") or [])[:MAX_HEAD_KEYS]]
    max_bytes = max(0, min(int(spec.get("max_bytes", PROMPT_SCAN_BYTES)), PROMPT_SCAN_BYTES))
    chars = max(0, min(int(spec.get("chars", PROMPT_HEAD_CHARS)), 4 * PROMPT_HEAD_CHARS))
    path = spec.get("path")
    if path is None:
        path, why = prompt_file_of(str(spec.get("output_dir")), str(spec.get("dataset")), spec)
        if path is None:
            return {"type": "heads", "error": why}
    try:
        return find_heads(str(path), keys, max_bytes, chars)
    except BadFile as exc:
        return {"type": "heads", "error": str(exc), "path": str(path)}
    except OSError as exc:
        why = "cannot read %s: %s" % (path, exc.strerror or exc)
        return {"type": "heads", "error": why, "path": str(path)}


def prompt_file_of(
    output_dir: str, dataset: str, spec: dict[str, typing.Any]
) -> tuple[str | None, str | None]:
    """(the prompt file of `dataset`, None) or (None, why none is known): the one its
    manifest names for its last run, else `DATASET.jsonl` in the `--prompts-dir` of the run
    `spec["pid"]`."""
    manifest = os.path.join(output_dir, dataset, MANIFEST_FILE)
    try:
        runs = read_json_object(manifest, MANIFEST_MAX_BYTES).get("runs")
        prompts = runs[-1].get("prompts") if isinstance(runs, list) and runs else None
        if isinstance(prompts, str) and prompts:
            return prompts, None
    except (OSError, AttributeError):
        pass
    pid = spec.get("pid")
    if pid:
        try:
            pid = int(pid)
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = [w.decode("utf-8", "surrogateescape") for w in handle.read().split(b"\0")]
            folder = _resolve(run_args(argv)["prompts_dir"], os.readlink("/proc/%d/cwd" % pid))
        except (OSError, TypeError, ValueError):
            folder = None
        if folder:
            return os.path.join(folder, dataset + ".jsonl"), None
    return None, "no prompt file known for %s (no %s names one, nor its run)" % (
        dataset,
        MANIFEST_FILE,
    )
