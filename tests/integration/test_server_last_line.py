"""A routed server's last log line is its own, not the router's probe (issue 32): with real
`gen-tui sim` workers behind the real sglang-router 0.3.2, the workers' logs end with the
router's refused HTTP/2 probe, and the router's with the supervisor's /health checks; the
line the panel and `gen-tui servers status` show is the one before them."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.process import PROBE_LINE
from gen_tui.backends.servers.router import listed
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.router import get_json, router_problem, router_recipe
from tests.support.servers import kill_servers, routed_fleet, sim_recipe


async def test_the_router_s_probes_are_not_a_server_s_last_line(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    if problem := router_problem():
        pytest.skip(problem)
    folder = tmp_path / "servers"
    fleet, recorder, urls = routed_fleet(
        [sim_recipe("w0", free_port())], router_recipe(), folder, http
    )
    try:
        await fleet.up()
        await recorder.reach(ServerState.HEALTHY, 2, timeout=90)
        await wait_until(
            lambda: set(listed(get_json(f"{urls['router']}/workers"))) == {urls["w0"]}, 60, "listed"
        )
        supervisor = fleet.supervisors["w0"]
        assert supervisor.launched is not None
        log = Path(supervisor.launched.log)
        await wait_until(lambda: PROBE_LINE.search(log.read_text()) is not None, 30, "a probe")
        tail = [line for line in log.read_text().splitlines() if line.strip()]
        assert PROBE_LINE.search(tail[-1]), tail  # the raw log ends with the router's probe
        last = await supervisor.launcher.last_line(supervisor.launched)
        assert last == f"listening on {urls['w0']}", (last, tail[-5:])
        router = fleet.supervisors[fleet.router_name or ""]
        assert router.launched is not None
        said = await router.launcher.last_line(router.launched)
        assert said and "uri=/health" not in said, said
    finally:
        await fleet.stop()
        kill_servers(folder)
