"""A stop over SSH whose link drops or freezes under it (issue 32, backends/servers/drain.py):
tried again once the link is back, for RELINK_S at most, and said; a stop that fails for
good ends its drain (the server still serves: a notice kept would be written again on each
reconnect of its link, keeping the runs off a server nobody stops)."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.hosts.connection import Disconnected
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.servers import drain
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from tests.support.servers import IdleLauncher


class CutLauncher(IdleLauncher):
    """Its stop is cut off by its link `cuts` times, then done; its drain notices noted."""

    def __init__(self, cuts: int) -> None:
        self.cuts = cuts
        self.stops = 0
        self.told: list[str] = []

    async def stop(self, launched: Launched, grace_s: float) -> str:
        self.stops += 1
        if self.stops <= self.cuts:
            raise Disconnected("box: link lost before the command finished (keepalive)")
        return f"pid {launched.ref} exited after SIGTERM"

    async def tell_drain(self, launched: Launched, url: str, wait_s: float, grace_s: float) -> bool:
        self.told.append("told")
        return True

    async def end_drain(self, launched: Launched) -> None:
        self.told.append("ended")


LAUNCHED = Launched("near", "4242", "box", 30001, time.time(), "near.log")


async def test_a_stop_cut_off_by_its_link_is_tried_again_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drain, "RETRY_PAUSE_S", 0.01)
    launcher = CutLauncher(cuts=2)
    said = await drain.stop_through_drops(launcher, LAUNCHED, 5.0)
    assert launcher.stops == 3
    assert (
        said == "pid 4242 exited after SIGTERM (after its link dropped 2 time(s) during the stop)"
    )
    assert await drain.stop_through_drops(CutLauncher(cuts=0), LAUNCHED, 5.0) == (
        "pid 4242 exited after SIGTERM"  # not cut: said as before
    )


async def test_a_stop_whose_link_does_not_come_back_fails_in_one_line_and_ends_its_drain(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(drain, "RETRY_PAUSE_S", 0.01)
    monkeypatch.setattr(drain, "RELINK_S", 0.2)
    launcher = CutLauncher(cuts=10**9)
    recipe = ServerRecipe("near", ("serve",), 30001)
    async with aiohttp.ClientSession() as session:
        supervisor = ServerSupervisor(
            recipe, "http://127.0.0.1:1", launcher, StateFile(tmp_path), session
        )
        supervisor.launched = LAUNCHED
        with pytest.raises(SSHError, match=r"cut off by its link \d+ time\(s\) in 0.2 s"):
            await supervisor.stop(drain_s=0.1, grace_s=0.1)
    assert launcher.stops >= 2
    assert launcher.told == ["told", "ended"]  # the runs may send to it again
