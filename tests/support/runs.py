"""Real runs for the tests: `gen-tui run` processes, and a stand-in for a user's own script.

The integration, TUI and chaos tests all start the same things: the real CLI as a child
process (never an in-process shortcut, so signals, exit codes and output are what a user
sees), and `run_inference.py`, a user's lock-less script in the seed's old record layout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil

from gen_tui.backends.hosts import LocalHost, SSHHost
from gen_tui.backends.store.records import RAW_FILE

AnyHost = LocalHost | SSHHost

GEN_TUI = [sys.executable, "-m", "gen_tui.app.cli"]
"""The command line of gen-tui itself, as a user starts it."""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}

STANDIN = r'''
"""A user's own run_inference.py: old record layout, no lock file, one write() per line;
with --cut-every N, every Nth answer has finish_reason "length" (the others "stop")."""
import json, os, signal, sys, time

args = sys.argv[1:]


def flag(name, default=None):
    return args[args.index(name) + 1] if name in args else default


folder = os.path.join(flag("--output-dir"), flag("--datasets"))
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "argv.json"), "w") as handle:
    json.dump(sys.argv, handle)
stop = []
if flag("--on-term", "exit") == "exit":
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
else:
    signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
fd = os.open(os.path.join(folder, "raw_responses.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
i = 0
cut_every = int(flag("--cut-every", "0"))
print("started", flush=True)
while not stop:
    record = {"sample_id": "%d-%d" % (os.getpid(), i), "usage": {"completion_tokens": 10}}
    if cut_every:
        record["finish_reason"] = "length" if i % cut_every == 0 else "stop"
    os.write(fd, (json.dumps(record) + "\n").encode())
    i += 1
    time.sleep(0.02)
print("stopped cleanly", flush=True)
'''


async def spawn(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """`gen-tui ARGS` in a session of its own, its output piped (`env` added to ENV)."""
    return await asyncio.create_subprocess_exec(
        *GEN_TUI,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**ENV, **(env or {})},
        start_new_session=True,
    )


def run_args(tokenizer: Path, prompts: Path, out: Path, url: str, *extra: str) -> list[str]:
    """`gen-tui run`'s arguments for one simulator, plain output, room for long answers."""
    return [
        "run",
        "--prompts-dir",
        str(prompts),
        "--tokenizer",
        str(tokenizer),
        "--output-dir",
        str(out),
        "--server-url",
        url,
        "--plain",
        "--max-new-tokens",
        "4096",
        *extra,
    ]


async def finish(process: asyncio.subprocess.Process, timeout: float = 90) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) once `process` ends; a hang past `timeout` fails."""
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def standin_argv(script: Path, out: str, dataset: str, *extra: str) -> list[str]:
    """The stand-in's command line: the seed's flags, so it matches the run pattern."""
    return [sys.executable, str(script), "--datasets", dataset, "--output-dir", out, *extra]


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, ended but not reaped, counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def append_records(folder: Path, count: int, tag: str) -> None:
    """Append `count` records the way a slow writer does: every fourth line torn for a
    moment (written in two pieces), so a watcher sees partial lines."""
    path = folder / RAW_FILE
    folder.mkdir(exist_ok=True)
    for i in range(count):
        record = {"sample_id": f"{tag}{i}", "completion_tokens": 3 + i % 11, "output_ids": []}
        line = json.dumps(record).encode() + b"\n"
        with open(path, "ab") as handle:
            if i % 4 == 0:  # a torn tail for a moment
                handle.write(line[:10])
                handle.flush()
                await asyncio.sleep(0.01)
                handle.write(line[10:])
            else:
                handle.write(line)
        await asyncio.sleep(0.01)
