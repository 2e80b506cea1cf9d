"""Command lines of runs: which flags carry budgets, datasets and paths, and how a stopped
run's command line is edited to resume it.

Resume is "start again with a new budget": without a configured template the stopped run's
own command line is reused with its budget flags replaced, so a user's script resumes the
way they launched it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from gen_tui.backends import watcher
from gen_tui.backends.config.lanes import SGLANG_API, parse_lane
from gen_tui.backends.settings import DEFAULT_GRACE_S, DEFAULT_SERVER
from gen_tui.backends.telemetry.server_url import plain_url

TOKEN_FLAGS = ("--max-tokens-per-dataset", "--token-budget")
SAMPLE_FLAGS = ("--max-samples",)
DATASET_FLAGS = ("--datasets",)
PATH_FLAGS = ("--prompts-dir", "--output-dir", "--tokenizer", "--config")
GRACE_FLAG = "--grace"
# Programs a command line may begin with that exec the command itself in the same pid.
_TRANSITIONAL = {"setsid", "nohup", "env"}


def set_flag(argv: Sequence[str], names: Sequence[str], value: str) -> list[str]:
    """Replace the value of every `--flag V` / `--flag=V` among `names`, or append the first."""
    out = list(argv)
    found = False
    index = 0
    while index < len(out):
        word = out[index]
        for name in names:
            if word == name and index + 1 < len(out):
                out[index + 1] = value
                found = True
                index += 1
                break
            if word.startswith(name + "="):
                out[index] = f"{name}={value}"
                found = True
                break
        index += 1
    if not found:
        out += [names[0], value]
    return out


def resume_argv(
    argv: Sequence[str],
    datasets: Sequence[str] | None,
    max_tokens: int | None,
    max_samples: int | None,
) -> list[str]:
    """A stopped run's command line with its dataset and budget flags set for the resume."""
    out = list(argv)
    if datasets is not None:
        out = set_flag(out, DATASET_FLAGS, ",".join(datasets))
    if max_tokens is not None:
        out = set_flag(out, TOKEN_FLAGS, str(max_tokens))
    if max_samples is not None:
        out = set_flag(out, SAMPLE_FLAGS, str(max_samples))
    return out


def template_argv(
    template: Sequence[str],
    datasets: Sequence[str],
    max_tokens: int | None,
    max_samples: int | None,
) -> list[str]:
    """A host's configured run command for `datasets` with the given budgets."""
    return [
        *template,
        DATASET_FLAGS[0],
        ",".join(datasets),
        *([TOKEN_FLAGS[0], str(max_tokens)] if max_tokens else []),
        *([SAMPLE_FLAGS[0], str(max_samples)] if max_samples else []),
    ]


def is_gen_tui(argv: Sequence[str]) -> bool:
    """Whether a command line is gen-tui's own engine (else a foreign script)."""
    return watcher.is_gen_tui_run(list(argv))


def exec_done(cmdline: Sequence[str]) -> bool:
    """Whether a freshly started pid runs the command yet (not the env, setsid or nohup that
    the command line begins with: those exec it in the same pid)."""
    return bool(cmdline) and posixpath.basename(cmdline[0]) not in _TRANSITIONAL


def relative_paths(argv: Sequence[str]) -> list[str]:
    """The path flags' values that are relative: such a command needs its working directory."""
    return [
        word
        for flag in PATH_FLAGS
        if (word := watcher.flag_value(list(argv), flag)) and not posixpath.isabs(word)
    ]


def own_grace(argv: Sequence[str]) -> float | None:
    """How long a run drains on SIGTERM by its own command line: a gen-tui run's `--grace`
    (else the engine's default). None for a foreign script, whose SIGTERM handling is unknown.

    A run given a config file may set its grace there; the command line is what can be read
    from afar, so such a run counts as the default (the kill then waits at least that long).
    """
    if not is_gen_tui(argv):
        return None
    value = watcher.flag_value(list(argv), GRACE_FLAG)
    try:
        grace = float(value) if value is not None else DEFAULT_GRACE_S
    except ValueError:
        return DEFAULT_GRACE_S
    return grace if 0 <= grace < float("inf") else DEFAULT_GRACE_S


SERVER_FLAG = "--server-url"
LANE_FLAG = "--lane"


def server_urls(argv: Sequence[str]) -> list[str]:
    """The servers a run's command line names (every `--server-url`, and each `--lane`
    served by SGLang's native API: an OpenAI-compatible or batch lane is a provider's API,
    with no /metrics to read; gen-tui's default for a gen-tui run that names none and no
    config file, which could name them), plain URLs only."""
    urls: list[str] = []
    lanes = 0
    for index, word in enumerate(argv):
        flag, eq, inline = word.partition("=")
        if flag not in (SERVER_FLAG, LANE_FLAG):
            continue
        value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else None)
        if value is None:
            continue
        if flag == SERVER_FLAG:
            urls.append(value)
            continue
        lanes += 1
        try:
            lane = parse_lane(value)
        except ValueError:
            continue  # the run refused it itself
        if lane.api == SGLANG_API:
            urls.append(lane.url)
    if (
        not urls
        and not lanes
        and is_gen_tui(argv)
        and watcher.flag_value(list(argv), "--config") is None
    ):
        urls.append(DEFAULT_SERVER)
    return [plain for url in urls if (plain := plain_url(url)) is not None]
