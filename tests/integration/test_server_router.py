"""A router in front of the servers (issue 32), with the real sglang-router 0.3.2: the
fleet starts two `gen-tui sim` workers and the router from recipes; `kill -9` of one
worker takes it off the router's worker list (DELETE /workers/ID) while it is down, and
its restart puts it back (POST /workers). Skipped, saying why, without the router."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.router import listed
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.router import get_json, router_problem, router_recipe
from tests.support.servers import kill_servers, routed_fleet, sim_recipe

S = ServerState


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


async def test_a_killed_worker_leaves_the_router_and_comes_back(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    workers = [sim_recipe(f"w{i}", free_port()) for i in range(2)]
    router = router_recipe()
    fleet, recorder, urls = routed_fleet(workers, router, folder, http)
    await fleet.up()
    await recorder.reach(S.HEALTHY, 3, timeout=90)

    def listing() -> set[str]:
        return set(listed(get_json(f"{urls['router']}/workers")))

    def said() -> str:
        lines = fleet.router_workers.lines if fleet.router_workers else []
        return "\n".join([*(e.line() for e in recorder.events), *lines, str(listing())])

    await wait_until(
        lambda: listing() == {urls["w0"], urls["w1"]}, 60, "both workers listed", detail=said
    )
    w0 = next(e for e in recorder.events if e.name == "w0" and e.state is S.HEALTHY)
    assert w0.ref is not None
    os.kill(int(w0.ref), signal.SIGKILL)
    await wait_until(lambda: listing() == {urls["w1"]}, 30, "w0 off the router's list", detail=said)
    await wait_until(
        lambda: [e for e in recorder.events if e.name == "w0" and e.state is S.HEALTHY][1:],
        60,
        "w0 healthy again",
    )
    await wait_until(
        lambda: listing() == {urls["w0"], urls["w1"]}, 30, "w0 back on the list", detail=said
    )
    assert fleet.router_workers is not None
    assert any(
        line.startswith(f"router: removed {urls['w0']}") for line in fleet.router_workers.lines
    )
    assert any(
        line.startswith(f"router: added {urls['w0']}") for line in fleet.router_workers.lines
    )
    await fleet.stop()
