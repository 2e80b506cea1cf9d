"""Security probes: hostile names and paths reach no shell unquoted; the API key leaks nowhere.

- Dataset names come from file names and configs and end up as folder names and words on
  remote command lines: shell metacharacters, `..`, newlines and look-alike unicode must
  be refused by name (the rule itself is fuzzed in test_fuzz_dataset_names.py) before anything
  runs, and a refused name must run nothing.
- Paths and command words cannot be refused (users have odd folders), so they must reach
  the process verbatim: started through LocalHost (no shell) and SSHHost (`sh` on the far
  side, over a real sshd), the child's /proc/PID/cmdline and cwd must be exactly what was
  asked, and no `$(...)`, backtick or `;` in them may have run.
- The API key is read from the environment only: it must not appear in any file under the
  output folder, in stdout or stderr, or in the process list, even when a server echoes
  it back in its error messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts import KillResult, LocalHost, SSHHost, rquote

from .conftest import Examples
from .procs import RunProcess, SimProcess, child_env, openai_stub

HOSTILE_WORDS = [
    "$(touch {m}/dollar)",
    "`touch {m}/backtick`",
    "; touch {m}/semicolon",
    "&& touch {m}/and",
    "| touch {m}/pipe",
    "> {m}/redirect",
    "a\nb; touch {m}/newline",
    'it\'s "quoted" \\ back',
    "~",
    "$HOME",
    "*",
    "-rf",
    "ünï\u202ecode\u200b",
    "",
]


def test_hostile_prompt_file_names_are_refused_and_run_nothing(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    for index, name in enumerate(["$(touch PWNED-name)", "B1\n", "a;touch PWNED-semi"]):
        prompts = tmp_path / f"prompts{index}"
        prompts.mkdir()
        (prompts / f"{name}.jsonl").write_text('{"prompt": "hi"}\n')
        run = RunProcess(
            tmp_path / "logs",
            f"names{index}",
            [
                "--prompts-dir", str(prompts),
                "--tokenizer", str(tokenizer_dir),
                "--output-dir", str(tmp_path / "out"),
                "--server-url", "http://127.0.0.1:9",
                "--plain",
            ],
        )  # fmt: skip
        assert run.wait(timeout=60) == 2  # a usage error: nothing ran
        stderr = run.stderr()
        assert "Traceback" not in stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "is not allowed" in lines[0], stderr
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))
    assert not (tmp_path / "out").exists()


# No lone surrogates (category Cs): a path from the OS holds only surrogateescape's, and an
# argv with any other cannot even be encoded to start `sh` (a UnicodeEncodeError in the test).
@given(
    st.text(
        alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
        max_size=24,
    )
)
def test_rquote_gives_sh_one_literal_word(examples: Examples, path: str) -> None:
    examples()
    home = "/home/some user"
    result = subprocess.run(
        ["sh", "-c", "printf '%s\\0' " + rquote(path)],
        capture_output=True,
        env={"HOME": home, "PATH": os.environ["PATH"]},
        timeout=10,
    )
    words = result.stdout.split(b"\0")[:-1]
    expected = home if path == "~" else home + path[1:] if path.startswith("~/") else path
    assert words == [expected.encode("utf-8", "surrogateescape")]


async def test_hostile_words_and_paths_reach_the_process_verbatim(
    host: LocalHost | SSHHost, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    words = [word.format(m=markers) for word in HOSTILE_WORDS]
    argv = [sys.executable, "-c", "import time; time.sleep(60)", *words]
    cwd = tmp_path / "c d $(touch PWNED-cwd) 'q' `touch PWNED-tick`"
    cwd.mkdir()
    log = tmp_path / "logs; touch PWNED-log" / "l $(touch PWNED-x).log"
    identity = await host.start(argv, str(log), cwd=str(cwd))
    try:
        assert list(identity.cmdline) == argv
        assert psutil.Process(identity.pid).cwd() == str(cwd)
        assert log.exists()
    finally:
        outcome = await host.kill(identity, grace_s=5)
    assert outcome.result in (KillResult.STOPPED, KillResult.KILLED), outcome
    assert not list(markers.iterdir()), "a shell ran part of a word"
    assert not [p for p in tmp_path.rglob("PWNED*")], "a shell ran part of a path"
    assert not list(Path.home().glob("PWNED*"))


# ---- the API key ------------------------------------------------------------------------


def key_leaks(secret: str, folder: Path, texts: dict[str, str]) -> list[str]:
    """Where the key (or its bytes) shows up: files under `folder`, and the given texts."""
    found = [name for name, text in texts.items() if secret in text]
    needle = secret.encode()
    for path in folder.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path))
    return found


def process_list_leaks(secret: str, pid: int) -> list[str]:
    """The key in the command line of the run or any of its threads' and children's."""
    found = []
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            if secret in " ".join(process.cmdline()):
                found.append(f"/proc/{process.pid}/cmdline")
    except psutil.NoSuchProcess:
        pass
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    if secret in listing:
        found.append("ps -eo args")
    return found


def test_the_api_key_never_leaves_the_environment(
    tmp_path: Path, chaos_iterations: int, chaos_report: Any
) -> None:
    secret = "sk-chaos-" + secrets.token_hex(16)
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", 25 * chaos_iterations)
    sim = SimProcess(
        tmp_path / "sim",
        [
            *("--api-key-env", "SIM_KEY", "--model-name", "m", "--default-mean", "40"),
            *("--fail-5xx", "0.1", "--fail-429", "0.1", "--retry-after", "0.1"),
            *("--fail-torn", "0.05", "--fail-midstream", "0.05"),
        ],
    )
    os.environ["SIM_KEY"] = secret
    try:
        sim.start()
    finally:
        del os.environ["SIM_KEY"]
    out = tmp_path / "out"
    run = RunProcess(
        tmp_path / "logs",
        "key",
        [
            *("--api", "openai", "--api-key-env", "CHAOS_KEY", "--model", "m"),
            *("--server-url", sim.url, "--prompts-dir", str(prompts)),
            *("--output-dir", str(out), "--plain", "--concurrency", "8", "--max-retries", "8"),
            "--stream",
        ],
        env=child_env(CHAOS_KEY=secret),
    )
    listed: list[str] = []
    polls = 0
    try:
        while run.alive():
            listed += process_list_leaks(secret, run.pid)
            polls += 1
            time.sleep(0.05)
        rc = run.wait(timeout=120)
    finally:
        sim.stop()
    assert rc == 0, run.stderr()[-2000:]
    assert polls > 3, "the run ended before its process list could be read"
    stats_faults = (sim.folder / "sim-1.log").read_text()
    leaks = listed + key_leaks(
        secret,
        tmp_path / "out",
        {"stdout": run.stdout(), "stderr": run.stderr(), "sim log": stats_faults},
    )
    assert not leaks, f"the API key leaked into {sorted(set(leaks))}"
    records = (out / "A" / "raw_responses.jsonl").read_bytes().count(b"\n")
    assert records == 25 * chaos_iterations
    chaos_report(
        scenario="API key secrecy",
        iterations=chaos_iterations,
        records_checked=records,
        process_list_polls=polls,
        leaks=len(leaks),
    )


@pytest.fixture
async def echo_server() -> AsyncIterator[str]:
    """A server that answers every chat with a 500 whose message repeats the bearer token, as
    a careless proxy does."""

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        told = request.headers.get("Authorization", "")
        body = {"error": {"message": f"upstream refused {told}", "code": 500}}
        return web.json_response(body, status=500)

    async with openai_stub(chat) as url:
        yield url


async def test_a_key_echoed_back_by_the_server_is_redacted_everywhere(
    echo_server: str, tmp_path: Path
) -> None:
    secret = "sk-echo-" + secrets.token_hex(16)
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", 3)
    out = tmp_path / "out"
    run = RunProcess(
        tmp_path / "logs",
        "echo",
        [
            *("--api", "openai", "--api-key-env", "CHAOS_KEY", "--max-retries", "0"),
            *("--server-url", echo_server, "--prompts-dir", str(prompts)),
            *("--output-dir", str(out), "--plain"),
        ],
        env=child_env(CHAOS_KEY=secret),
    )
    rc = await asyncio.to_thread(run.wait, 60)
    assert rc == 0, run.stderr()[-2000:]
    errors = [json.loads(line) for line in (out / "A" / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 3 and all("***" in error["reason"] for error in errors), errors
    leaks = key_leaks(secret, out, {"stdout": run.stdout(), "stderr": run.stderr()})
    assert not leaks, f"the echoed key leaked into {leaks}"
    assert shlex.quote(secret) not in run.stdout()
