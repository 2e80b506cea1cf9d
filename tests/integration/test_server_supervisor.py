"""The supervisor with real processes (issue 32): `gen-tui sim` from a recipe comes up
healthy; `kill -9` of its pid is exited (SIGKILL), restarting, healthy again with a new
pid, the restart counted; a recipe that never comes up is failed in one line with the
server's own last log line and never restarted; after K restarts an hour it stays down;
a server gen-tui did not start is not ours; a second supervisor adopts the same pid."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.config.server_recipe import RestartPolicy
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.sim.server import SimServer
from tests.support.ports import free_port
from tests.support.servers import (
    Recorder,
    kill_servers,
    launcher_in,
    sim_recipe,
    supervisor_of,
)

S = ServerState


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


@pytest.mark.quick
async def test_kill_9_is_exited_then_restarting_then_healthy_with_a_new_pid(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    recorder = Recorder()
    supervisor = supervisor_of(sim_recipe("sim0", free_port()), folder, http, recorder)
    supervisor.start()
    first = await recorder.reach(S.HEALTHY)
    assert first.ref is not None and supervisor.restarts == 0
    os.kill(int(first.ref), signal.SIGKILL)
    exited = await recorder.reach(S.EXITED)
    assert "killed by SIGKILL" in exited.detail and exited.ref == first.ref
    await recorder.reach(S.RESTARTING)
    again = await recorder.reach(S.HEALTHY, 2)
    assert again.ref is not None and again.ref != first.ref
    assert "healthy again" in again.detail and again.restarts == 1
    assert recorder.states()[: recorder.states().index(S.EXITED)] == [
        S.STARTING,
        S.LOADING,
        S.HEALTHY,
    ]
    assert StateFile(folder).entry("sim0", "process").total_restarts == 1
    await supervisor.stop()
    assert supervisor.state is S.STOPPED


async def test_after_k_restarts_an_hour_it_stays_down(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    recorder = Recorder()
    recipe = sim_recipe("flaky", free_port(), restart=RestartPolicy(1, 0.1, 0.1))
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    for round_ in (1, 2):
        healthy = await recorder.reach(S.HEALTHY, round_)
        assert healthy.ref is not None
        os.kill(int(healthy.ref), signal.SIGKILL)
    assert await supervisor.wait() is S.DOWN
    assert "1 restarts in the last hour (at most 1)" in recorder.last(S.DOWN).detail
    assert recorder.states().count(S.RESTARTING) == 1


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--slots", "0"), "--slots: must be at least 1, got '0'"),
        (("--vocab-size", "x"), "--vocab-size: expected a whole number, got 'x'"),
    ],
)
async def test_a_recipe_that_never_comes_up_is_failed_once(
    folder: Path, http: aiohttp.ClientSession, flags: tuple[str, ...], said: str
) -> None:
    recorder = Recorder()
    supervisor = supervisor_of(sim_recipe("bad", free_port(), *flags), folder, http, recorder)
    supervisor.start()
    assert await supervisor.wait() is S.FAILED
    failed = recorder.last(S.FAILED)
    assert failed.line().startswith("server bad failed: never came up")
    assert "\n" not in failed.line() and failed.line().endswith(said)
    assert S.RESTARTING not in recorder.states()
    assert StateFile(folder).entry("bad", "process").total_restarts == 0


async def test_a_missing_program_is_failed_in_one_line(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    recorder = Recorder()
    recipe = replace(sim_recipe("ghost", free_port()), argv=("/nonexistent/launch_server",))
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    assert await supervisor.wait() is S.FAILED
    line = recorder.last(S.FAILED).line()
    assert line.startswith("server ghost failed:") and "/nonexistent/launch_server" in line
    assert "\n" not in line and S.RESTARTING not in recorder.states()


async def test_a_port_in_use_is_failed_with_the_servers_own_line(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        recorder = Recorder()
        supervisor = supervisor_of(sim_recipe("busy", port), folder, http, recorder)
        supervisor.start()
        assert await supervisor.wait() is S.FAILED
    line = recorder.last(S.FAILED).line()
    assert line.startswith("server busy failed: never came up") and "\n" not in line
    assert "address already in use" in line.lower()
    assert S.RESTARTING not in recorder.states()


async def test_a_server_gen_tui_did_not_start_is_not_ours(
    folder: Path, http: aiohttp.ClientSession, sim: Callable[..., object]
) -> None:
    server = await sim()
    assert isinstance(server, SimServer)
    port = int(server.url.rsplit(":", 1)[1])
    recorder = Recorder()
    supervisor = supervisor_of(sim_recipe("theirs", port), folder, http, recorder)
    supervisor.start()
    assert await supervisor.wait() is S.NOT_OURS
    assert recorder.states() == [S.NOT_OURS]
    assert "did not start it" in recorder.last(S.NOT_OURS).detail
    assert StateFile(folder).read() == {}  # nothing started, nothing to adopt


async def test_quit_and_adopt_keeps_the_pid_and_the_restart_count(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    recorder = Recorder()
    recipe = sim_recipe("kept", free_port())
    first = supervisor_of(recipe, folder, http, recorder)
    first.start()
    healthy = await recorder.reach(S.HEALTHY)
    assert healthy.ref is not None
    os.kill(int(healthy.ref), signal.SIGKILL)
    restarted = await recorder.reach(S.HEALTHY, 2)
    await first.leave()  # the panel quits: the server runs on

    (adopted,) = await launcher_in(folder).adopt()
    assert adopted.ref == restarted.ref
    again = Recorder()
    second = supervisor_of(recipe, folder, http, again, adopted=adopted)
    second.start()
    healthy = await again.reach(S.HEALTHY)
    assert healthy.ref == restarted.ref and healthy.restarts == 1
    assert S.STARTING not in again.states()
    await second.stop()


async def test_a_hung_server_is_unhealthy_then_restarted(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    """SIGSTOP freezes it: its process runs but /health never answers; after unhealthy_s
    it is stopped (SIGKILL after the grace) and started anew."""
    recorder = Recorder()
    recipe = sim_recipe("frozen", free_port(), unhealthy_s=1.0)
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    first = await recorder.reach(S.HEALTHY)
    assert first.ref is not None
    os.kill(int(first.ref), signal.SIGSTOP)
    unhealthy = await recorder.reach(S.UNHEALTHY)
    assert unhealthy.since is not None and "did not answer" in unhealthy.detail
    exited = await recorder.reach(S.EXITED)
    assert exited.detail.startswith("failed its health check for 1 s")
    again = await recorder.reach(S.HEALTHY, 2)
    assert again.ref not in (None, first.ref) and "healthy again" in again.detail
    await supervisor.stop()
