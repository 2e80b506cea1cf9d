"""A server on a `[[hosts]]` machine (issue 32), over a real OpenSSH sshd: the recipe's
command starts through the SSH host's guarded start (quoted words, its environment), the
supervisor follows it there, `kill -9` is seen (as gone: no exit code crosses SSH) and the
server comes back with a new pid; a second launcher adopts it."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import psutil
import pytest

from gen_tui.backends.hosts import LocalHost, SSHHost
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.process import MARKER, ProcessLauncher
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from tests.support.servers import Recorder, free_port, kill_servers, sim_recipe
from tests.support.sshd import Sshd

S = ServerState


@pytest.fixture
async def box(sshd: Sshd, tmp_path: Path) -> AsyncIterator[SSHHost]:
    host = SSHHost("box", sshd.target, str(tmp_path / "remote"), options=sshd.options())
    yield host
    await host.close()
    kill_servers(tmp_path / "state")


async def test_a_server_over_ssh_restarts_and_is_adopted(
    box: SSHHost, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    state = StateFile(tmp_path / "state")
    hosts = {"local": LocalHost(tmp_path / "state"), "box": box}
    launcher = ProcessLauncher(
        hosts, str(tmp_path / "state"), state, remote_folder=str(tmp_path / "remote")
    )
    recipe = replace(
        sim_recipe("far", free_port(), env=(("NOTE", "it's a 'quoted' word"),)), host="box"
    )
    recorder = Recorder()
    supervisor = ServerSupervisor(
        recipe, recipe.url(), launcher, state, http, [recorder], check_s=0.2, grace_s=3.0
    )
    supervisor.start()
    first = await recorder.reach(S.HEALTHY, timeout=120)  # a first SSH link on a busy box
    assert first.ref is not None
    environ = psutil.Process(int(first.ref)).environ()
    assert environ[MARKER] == "far" and environ["NOTE"] == "it's a 'quoted' word"
    assert (tmp_path / "remote" / "far.log").exists()

    os.kill(int(first.ref), signal.SIGKILL)
    exited = await recorder.reach(S.EXITED)
    assert "is gone" in exited.detail and "listening on" in exited.detail
    again = await recorder.reach(S.HEALTHY, 2)
    assert again.ref not in (None, first.ref) and "healthy again" in again.detail
    await supervisor.leave()

    (adopted,) = await ProcessLauncher(hosts, str(tmp_path / "state"), state).adopt()
    assert adopted.ref == again.ref and adopted.host == "box"
    await supervisor.stop()
