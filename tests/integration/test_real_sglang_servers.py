"""The servers story of issue 32 with the real parts: two real SGLang 0.5.23 servers on
this CPU (the tiny random-weight Llama of tests/support/real_sglang.py) and the real
sglang-router 0.3.2 in front of them, all started from recipes by the fleet; `kill -9` of
one server's process: it is seen exited (SIGKILL), restarted, healthy again, and the
router lists it again. Skipped, saying why, without GEN_TUI_SGLANG_PYTHON or the router.
Each server takes a core and about a minute to load: minutes in all on 2 cores."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.history import ServerHistory
from gen_tui.backends.servers.recipe import RestartPolicy, ServerRecipe
from gen_tui.backends.servers.router import listed
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.real_sglang import (
    SGLANG_PYTHON,
    model_cache,
    real_sglang_problem,
    server_env,
    tiny_model,
)
from tests.support.router import get_json, router_problem, router_recipe
from tests.support.servers import kill_servers, routed_fleet

S = ServerState
LOAD_S = 400.0
"""Two cold starts at once on 2 shared cores, then one more."""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    for problem in (real_sglang_problem(), router_problem()):
        if problem:
            pytest.skip(problem)
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


def sglang_recipe(name: str, model: Path) -> ServerRecipe:
    port = free_port()
    extra = {k: v for k, v in server_env().items() if os.environ.get(k) != v}
    argv = (
        *(SGLANG_PYTHON, "-m", "sglang.launch_server", "--model-path", str(model)),
        *("--host", "127.0.0.1", "--port", str(port), "--device", "cpu"),
        *("--attention-backend", "torch_native", "--mem-fraction-static", "0.1"),
        *("--max-total-tokens", "65536", "--skip-server-warmup", "--sleep-on-idle"),
        "--enable-metrics",
    )
    return ServerRecipe(
        name,
        argv,
        port,
        env=tuple(extra.items()),
        startup_s=LOAD_S,
        unhealthy_s=60.0,
        restart=RestartPolicy(3, 1.0, 5.0),
    )


@pytest.mark.timeout(1200)
async def test_two_real_sglang_servers_a_kill_9_and_the_router(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    model = tiny_model(model_cache())
    workers = [sglang_recipe(f"cpu{i}", model) for i in range(2)]
    router = router_recipe(startup_s=120.0)
    fleet, recorder, urls = routed_fleet(workers, router, folder, http, check_s=0.5, grace_s=20.0)
    killed_group: int | None = None

    def listing() -> set[str]:
        return set(listed(get_json(f"{urls['router']}/workers")))

    def said() -> str:
        lines = fleet.router_workers.lines if fleet.router_workers else []
        return "\n".join([*(e.line() for e in recorder.events), *lines, str(listing())])

    await fleet.up()
    try:
        await recorder.reach(S.HEALTHY, 3, timeout=LOAD_S * 2)
        await wait_until(lambda: listing() == {urls["cpu0"], urls["cpu1"]}, 60, "both listed",
                         detail=said)  # fmt: skip
        first = next(e for e in recorder.events if e.name == "cpu0" and e.state is S.HEALTHY)
        assert first.ref is not None
        killed_group = int(first.ref)
        os.kill(int(first.ref), signal.SIGKILL)  # the server's own process, as an OOM kill
        exited = await recorder.reach(S.EXITED, timeout=30)
        assert exited.name == "cpu0" and "was killed by SIGKILL" in exited.detail, said()
        await wait_until(lambda: listing() == {urls["cpu1"]}, 30, "cpu0 off the list",
                         detail=said)  # fmt: skip
        assert S.RESTARTING in recorder.states("cpu0")
        again = await wait_until(
            lambda: [e for e in recorder.events if e.name == "cpu0" and e.state is S.HEALTHY][1:],
            LOAD_S,
            "cpu0 healthy again",
            detail=said,
        )
        assert again[0].ref not in (None, first.ref) and "healthy again" in again[0].detail
        await wait_until(lambda: listing() == {urls["cpu0"], urls["cpu1"]}, 60,
                         "cpu0 back on the router's list", detail=said)  # fmt: skip
        states = [
            line["state"] for line in ServerHistory(folder).read() if line["server"] == "cpu0"
        ]
        assert states[-4:] == ["restarting", "starting", "loading", "healthy"], states
    finally:
        await fleet.stop()
        if killed_group is not None:  # the killed server's scheduler, if it outlived it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(killed_group, signal.SIGKILL)
