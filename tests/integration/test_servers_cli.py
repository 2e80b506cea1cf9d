"""The story of issue 32 headless, with real processes: `gen-tui servers up` starts a
`gen-tui sim` from its recipe; a `gen-tui run` naming the server by its recipe runs
against it; `kill -9` of the server's pid mid-run: it is exited, restarting, healthy again
(a new pid, the restart counted); the run ends at its budget with no record duplicated and
none lost; the alert target got "exited" and "healthy again". Ctrl-C leaves the server
running, `status` adopts the same pid, `stop` stops it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.records import progress, recount
from tests.support.runs import GEN_TUI, alive, finish, run_args
from tests.support.servers import Lines, gen_tui_in, kill_servers

BUDGET = 40_000


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """XDG_STATE_HOME of the test's gen-tui processes (the servers' state file and logs)."""
    yield tmp_path / "state"
    kill_servers(tmp_path / "state" / "gen-tui" / "servers")


def _config(path: Path, port: int, vocab: int, alerts: str, *flags: str) -> Path:
    argv = [*GEN_TUI, "sim", "--port", str(port), "--vocab-size", str(vocab), *flags]
    words = ", ".join(f'"{word}"' for word in argv)
    path.write_text(
        f'[[servers]]\nname = "sim0"\nargv = [{words}]\nport = {port}\n'
        "startup_s = 30\nunhealthy_s = 5\nbackoff_s = 0.2\nmax_restarts_per_hour = 3\n"
        f'[alerts]\nurls = ["{alerts}"]\n'
    )
    return path


def _pid(line: str) -> int:
    found = re.search(r"pid (\d+)", line)
    assert found, line
    return int(found.group(1))


async def test_the_story_headless(
    state: Path,
    tmp_path: Path,
    hook: Any,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    vocab_size: int,
) -> None:
    url, received = hook
    config = _config(
        tmp_path / "gen-tui.toml", free_port(), vocab_size, url, "--tokens-per-s", "400"
    )
    up = Lines(await gen_tui_in(state, "servers", "--config", str(config), "up"))
    first = _pid(await up.wait("server sim0 loading"))
    await up.wait("server sim0 healthy")

    args = run_args(tokenizer_dir, prompts_dir(A=400), tmp_path / "out", "sim0")
    run = await gen_tui_in(
        state,
        *args,
        "--config",
        str(config),
        "--max-tokens-per-dataset",
        str(BUDGET),
        "--max-new-tokens",
        "400",
        "--concurrency",
        "8",
    )
    await wait_until(lambda: (tmp_path / "out" / "A" / "raw_responses.jsonl").exists(), 60)
    os.kill(first, signal.SIGKILL)
    await up.wait("server sim0 exited", "killed by SIGKILL")
    await up.wait("server sim0 restarting")
    second = _pid(await up.wait("server sim0 loading", count=2))
    await up.wait("server sim0 healthy", "healthy again", timeout=60)
    assert second != first and alive(second)

    code, out, err = await finish(run, 120)
    assert code == 0, err[-2000:]
    tokens, records = recount(tmp_path / "out" / "A")  # asserts no sample_id twice
    assert tokens >= BUDGET and records > 0
    dataset = progress(tmp_path / "out" / "A")
    assert dataset["state"] == "done" and dataset["message"].startswith("budget reached")
    # nothing lost: every answer the engine counted is on disk, once
    assert (dataset["tokens"], dataset["samples"]) == (tokens, records)
    assert dataset["errors"] == 0 and dataset["malformed"] == 0

    await wait_until(lambda: len(received) >= 2, 30, "two alerts")
    bodies = [alert["message"] for alert in received]
    assert any("server sim0 exited" in body for body in bodies), bodies
    assert any("healthy again" in body for body in bodies), bodies

    up.process.send_signal(signal.SIGINT)  # Ctrl-C: the server runs on
    assert await asyncio.wait_for(up.process.wait(), 30) == 0
    await up.task
    assert up.having("left the servers running") and alive(second)

    status = await gen_tui_in(state, "servers", "--config", str(config), "status")
    code, out, err = await finish(status)
    assert code == 0, err
    assert f"sim0: healthy (pid {second}," in out and "1 restart(s) this hour" in out

    again = Lines(await gen_tui_in(state, "servers", "--config", str(config), "up"))
    await again.wait("server sim0 healthy")
    assert not again.having("starting"), again.lines  # adopted, not started anew
    again.process.send_signal(signal.SIGINT)
    await asyncio.wait_for(again.process.wait(), 30)

    restart = await gen_tui_in(state, "servers", "--config", str(config), "restart", "sim0")
    code, out, err = await finish(restart, 90)
    assert code == 0, out + err
    third = _pid(next(line for line in out.splitlines() if "server sim0 loading" in line))
    assert "server sim0 healthy" in out and third != second and not alive(second)
    assert alive(third)  # left running, adopted by the next up or the panel

    stop = await gen_tui_in(state, "servers", "--config", str(config), "stop")
    code, out, err = await finish(stop)
    assert code == 0, err
    assert out.startswith("sim0: ") and not alive(third)
    assert "drained in" in out and "after SIGTERM" in out, out  # idle: drained, then stopped


async def test_a_bad_recipe_is_one_line_and_no_loop(
    state: Path, tmp_path: Path, vocab_size: int
) -> None:
    config = _config(tmp_path / "gen-tui.toml", free_port(), vocab_size, "json://127.0.0.1:1/x")
    config.write_text(config.read_text().replace('"sim",', '"sim", "--slots", "0",'))
    up = await gen_tui_in(state, "servers", "--config", str(config), "up")
    code, out, err = await finish(up, 60)
    assert code == 1, out + err
    (failed,) = [line for line in out.splitlines() if "failed" in line]
    assert "server sim0 failed: never came up" in failed
    assert failed.endswith("--slots: must be at least 1, got '0'")
    assert "restarting" not in out and "Traceback" not in err


async def test_a_bad_config_is_one_line(state: Path, tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text('[[servers]]\nname = "a"\nargv = ["x"]\nport = 0\n')
    code, out, err = await finish(await gen_tui_in(state, "servers", "--config", str(path), "up"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"gen-tui: error: {path}: servers[0] 'a': port must be a whole number from 1 to 65535"
    ]
