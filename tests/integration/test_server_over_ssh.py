"""A server on a `[[hosts]]` machine (issue 32), over a real OpenSSH sshd: the recipe's
command starts through the SSH host's guarded start (quoted words, its environment), the
supervisor follows it there, `kill -9` of the server is seen with its signal (the exit
wrapper writes the status beside its log), a code with its code, and the server comes back
with a new pid; a second launcher adopts it."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import psutil
import pytest

from gen_tui.backends.config.server_recipe import RestartPolicy, ServerRecipe
from gen_tui.backends.drain_notice import NOTICE_FOLDER, read_notices
from gen_tui.backends.hosts import LocalHost, SSHHost
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.process import MARKER, ProcessLauncher
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from tests.support.ports import free_port
from tests.support.servers import Recorder, kill_servers, sim_recipe
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

    # The pid gen-tui follows is the exit wrapper's (the session's leader); the server is
    # its child: the process an OOM kill or a `kill -9` of the server hits. Its last log
    # line stays its own (a shell wrapper would have added "Killed").
    (server,) = psutil.Process(int(first.ref)).children()
    assert server.cmdline()[: len(recipe.argv)] == list(recipe.argv)
    os.kill(server.pid, signal.SIGKILL)
    exited = await recorder.reach(S.EXITED)
    assert "was killed by SIGKILL" in exited.detail and "listening on" in exited.detail, exited
    assert exited.detail.startswith(f"pid {first.ref} was killed by SIGKILL")
    again = await recorder.reach(S.HEALTHY, 2)
    assert again.ref not in (None, first.ref) and "healthy again" in again.detail
    await supervisor.leave()

    (adopted,) = await ProcessLauncher(hosts, str(tmp_path / "state"), state).adopt()
    assert adopted.ref == again.ref and adopted.host == "box"
    assert again.ref is not None
    wrapper = psutil.Process(int(again.ref))
    (server,) = wrapper.children()
    said = await supervisor.stop()
    assert "exited after SIGTERM" in said, said  # the session's SIGTERM reached the server
    for process in (server, wrapper):  # gone, or a zombie its new parent has not reaped
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


EXITS_3 = """
import http.server, sys, threading
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
threading.Event().wait(float(sys.argv[2]))
print("giving up with code 3", flush=True)
sys.exit(3)
"""


async def test_a_server_over_ssh_that_exits_reports_its_code(
    box: SSHHost, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    state = StateFile(tmp_path / "state")
    remote = tmp_path / "remote it's $HOME"  # every word crosses as data, never shell text
    launcher = ProcessLauncher(
        {"local": LocalHost(tmp_path / "state"), "box": box},
        str(tmp_path / "state"),
        state,
        remote_folder=str(remote),
    )
    port = free_port()
    recipe = ServerRecipe(
        "quits",
        (sys.executable, "-c", EXITS_3, str(port), "3"),
        port,
        host="box",
        startup_s=30.0,
        restart=RestartPolicy(0, 0.1, 0.1),  # no restart: one exit, then down
    )
    recorder = Recorder()
    supervisor = ServerSupervisor(
        recipe, recipe.url(), launcher, state, http, [recorder], check_s=0.2, grace_s=3.0
    )
    supervisor.start()
    await recorder.reach(S.HEALTHY, timeout=120)
    exited = await recorder.reach(S.EXITED, timeout=30)
    assert "exited with code 3" in exited.detail, exited.detail
    assert exited.detail.endswith("its log's last line: giving up with code 3")
    assert (remote / "quits.exit").read_text() == "3\n"
    assert await supervisor.wait() is S.DOWN


async def test_a_drain_notice_over_ssh_is_on_the_server_s_machine(
    box: SSHHost, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The drain notice (backends/drain_notice.py) is written where the server runs, in its
    host's servers' folder, for the runs on that machine: a restart's stays there while the
    server is down and goes once it is healthy again; a stop for good takes it along."""
    state = StateFile(tmp_path / "state")
    remote = tmp_path / "remote it's $HOME"  # every word crosses as data, never shell text
    launcher = ProcessLauncher(
        {"local": LocalHost(tmp_path / "state"), "box": box},
        str(tmp_path / "state"),
        state,
        remote_folder=str(remote),
    )
    recipe = replace(sim_recipe("far", free_port(), drain_s=1.0), host="box")
    recorder = Recorder()
    supervisor = ServerSupervisor(
        recipe, recipe.url(), launcher, state, http, [recorder], check_s=0.2, grace_s=3.0
    )
    supervisor.start()
    try:
        await recorder.reach(S.HEALTHY, timeout=120)
        await supervisor.restart()  # stopped (drained), started again: not healthy yet
        assert "drained in" in recorder.last(S.STOPPED).detail
        assert "its runs told" in recorder.last(S.DRAINING).detail
        notices = read_notices(remote / NOTICE_FOLDER)
        assert notices.ports == {recipe.port} and notices.bad == (), notices
        assert not (tmp_path / "state" / NOTICE_FOLDER).exists()  # not this machine's
        await recorder.reach(S.HEALTHY, 2, timeout=120)
        assert read_notices(remote / NOTICE_FOLDER).ports == frozenset()
        said = await supervisor.stop()
        assert "drained in" in said, said
        assert "its runs told" in recorder.last(S.DRAINING).detail
        assert read_notices(remote / NOTICE_FOLDER).ports == frozenset()  # gone with it
    finally:
        await supervisor.stop()
