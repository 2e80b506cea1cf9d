"""A stop on purpose drains first (issue 32): with real `gen-tui sim` servers and the real
sglang-router 0.3.2, stopping one worker takes it off the router's list while it still
runs, its in-flight request finishes whole, and only then is it sent SIGTERM; a drain that
would last too long is cut at the recipe's `drain_s`, and a server that ignores SIGTERM is
killed after the grace."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.servers.drain import in_flight
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.fleet import Fleet
from gen_tui.backends.servers.history import ServerHistory
from gen_tui.backends.servers.router import listed
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.records import record_lines
from tests.support.router import get_json, router_problem, router_recipe
from tests.support.runs import finish, run_args, spawn
from tests.support.server_story import check_once
from tests.support.servers import (
    Recorder,
    gen_tui_in,
    kill_servers,
    launcher_in,
    routed_fleet,
    sim_recipe,
    supervisor_of,
)

S = ServerState
SLOW = ("--tokens-per-s", "40")
"""A sim slow enough that a 160-token answer is in flight for about 4 s."""
PROMPTS = 300


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def _generate(http: aiohttp.ClientSession, url: str, tokens: int) -> tuple[int, Any]:
    payload = {
        "text": "hello",
        "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
    }
    async with http.post(f"{url}/generate", json=payload) as answer:
        return answer.status, await answer.json(content_type=None)


async def _busy(http: aiohttp.ClientSession, url: str) -> None:
    async def running() -> bool:
        return (await in_flight(http, url) or 0) >= 1

    deadline = time.monotonic() + 20
    while not await running():
        assert time.monotonic() < deadline, f"{url} never had a request in flight"
        await asyncio.sleep(0.1)


async def test_a_stopped_worker_leaves_the_router_then_finishes_its_request(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    workers = [sim_recipe(f"w{i}", free_port(), *SLOW, drain_s=30.0) for i in range(2)]
    router = router_recipe()
    fleet, recorder, urls = routed_fleet(workers, router, folder, http)
    await fleet.up()
    try:
        await recorder.reach(S.HEALTHY, 3, timeout=90)

        def listing() -> set[str]:
            return set(listed(get_json(f"{urls['router']}/workers")))

        await wait_until(lambda: listing() == {urls["w0"], urls["w1"]}, 60, "both listed")
        w0 = fleet.supervisors["w0"].launched
        assert w0 is not None and w0.identity is not None
        pid = w0.identity.pid
        request = asyncio.create_task(_generate(http, urls["w0"], 160))
        await _busy(http, urls["w0"])
        stopping = asyncio.create_task(fleet.stop(["w0"]))
        # Off the router's list while it still runs and serves its request.
        await wait_until(lambda: listing() == {urls["w1"]}, 10, "w0 off the router's list")
        assert _alive(pid) and not request.done()
        status, body = await asyncio.wait_for(request, 30)
        assert status == 200 and body["meta_info"]["completion_tokens"] == 160
        (said,) = await asyncio.wait_for(stopping, 30)
        assert f"router: removed {urls['w0']}" in said, said
        assert "drained in" in said and "exited after SIGTERM" in said, said
        assert not _alive(pid)
        states = recorder.states("w0")
        assert states[-2:] == [S.DRAINING, S.STOPPED], states
        assert listing() == {urls["w1"]}  # not added back by the reconciling
    finally:
        await fleet.stop()


async def test_a_drain_is_bounded_by_the_recipe(folder: Path, http: aiohttp.ClientSession) -> None:
    recipe = sim_recipe("w0", free_port(), *SLOW, drain_s=1.0)
    recorder = Recorder()
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    try:
        await recorder.reach(S.HEALTHY, timeout=60)
        request = asyncio.create_task(_generate(http, recipe.url(), 4000))  # ~100 s
        await _busy(http, recipe.url())
        began = time.monotonic()
        said = await supervisor.stop()
        took = time.monotonic() - began
        assert "1 request(s) still in flight after 1 s: stopped anyway" in said, said
        assert took < 1 + 3 + 2, took  # the drain, the grace, a little slack
        try:  # cut short: an error, or the server's abort of what it had in flight
            status, body = await asyncio.wait_for(request, 10)
        except aiohttp.ClientError:
            pass
        else:
            assert status != 200 or body["meta_info"]["completion_tokens"] < 4000, body
    finally:
        await supervisor.stop()


async def test_a_restart_that_never_comes_up_takes_its_notice_along(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    """A restart keeps its drain notice until the server is healthy again; one that never
    comes up (its edited flags refused) ends failed, and its notice goes then: kept, it
    would hold the runs on this machine off that port for ever."""
    recipe = sim_recipe("w0", free_port(), drain_s=1.0)
    recorder = Recorder()
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    notice = folder / "draining" / f"{recipe.port}.json"
    try:
        await recorder.reach(S.HEALTHY, timeout=60)
        supervisor.recipe = replace(recipe, argv=(*recipe.argv, "--no-such-flag"))
        await supervisor.restart()
        assert notice.exists()  # drained and stopped, not up again yet
        assert await asyncio.wait_for(supervisor.wait(), 60) is S.FAILED
        assert "never came up" in recorder.last(S.FAILED).detail
        assert not notice.exists(), "the notice outlived a restart that failed"
    finally:
        await supervisor.stop()


IGNORES_TERM = """
import http.server, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


async def test_a_server_ignoring_sigterm_is_killed_after_the_grace(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    recipe = ServerRecipe(
        "stubborn", (sys.executable, "-c", IGNORES_TERM, str(port)), port, startup_s=20.0
    )
    recorder = Recorder()
    supervisor = supervisor_of(recipe, folder, http, recorder)
    supervisor.start()
    await recorder.reach(S.HEALTHY, timeout=30)
    launched = supervisor.launched
    assert launched is not None and launched.identity is not None
    began = time.monotonic()
    said = await supervisor.stop()
    took = time.monotonic() - began
    # No /metrics: nothing known to wait for; SIGTERM ignored for the grace; then SIGKILL.
    assert "its load is not known (no /metrics): not waited for" in said, said
    assert "ignored SIGTERM for 3 s and was killed (SIGKILL)" in said, said
    assert 3 <= took < 8, took
    assert not _alive(launched.identity.pid)


def _toml(recipe: ServerRecipe, table: str) -> str:
    words = ", ".join(f'"{word}"' for word in recipe.argv)
    name = f'name = "{recipe.name}"\n' if table == "[[servers]]" else ""
    return f"{table}\n{name}argv = [{words}]\nport = {recipe.port}\ndrain_s = {recipe.drain_s}\n"


async def test_servers_stop_takes_it_off_the_router_first(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """`gen-tui servers stop w0`, another process than the fleet's: it adopts the router
    from the state file, takes w0 off its list, waits for w0's request, then stops it."""
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    state = tmp_path / "state"
    folder = state / "gen-tui" / "servers"
    workers = [sim_recipe(f"w{i}", free_port(), *SLOW, drain_s=30.0) for i in range(2)]
    router = router_recipe()
    config = tmp_path / "gen-tui.toml"
    config.write_text(
        "".join([*(_toml(w, "[[servers]]") for w in workers), _toml(router, "[router]")])
    )
    fleet, recorder, urls = routed_fleet(workers, router, folder, http)
    await fleet.up()
    try:
        await recorder.reach(S.HEALTHY, 3, timeout=90)

        def listing() -> set[str]:
            return set(listed(get_json(f"{urls['router']}/workers")))

        await wait_until(lambda: listing() == {urls["w0"], urls["w1"]}, 60, "both listed")
        await fleet.leave()  # the fleet's process watches no more: the command acts alone
        request = asyncio.create_task(_generate(http, urls["w0"], 160))
        await _busy(http, urls["w0"])
        stop = await gen_tui_in(state, "servers", "--config", str(config), "stop", "w0")
        await wait_until(lambda: listing() == {urls["w1"]}, 10, "w0 off the router's list")
        assert not request.done()
        # Its runs on this machine told too (those sent to it straight), while it drains.
        notice = folder / "draining" / f"{workers[0].port}.json"
        assert notice.exists()
        status, body = await asyncio.wait_for(request, 30)
        assert status == 200 and body["meta_info"]["completion_tokens"] == 160
        code, out, err = await finish(stop, 60)
        assert code == 0, err
        assert out.startswith(f"w0: router: removed {urls['w0']}"), out
        assert "drained in" in out and "exited after SIGTERM" in out, out
        assert not notice.exists(), "the notice outlived the stop for good"
        history = [(line["server"], line["state"]) for line in ServerHistory(folder).read()]
        assert history[-1] == ("w0", "stopped")
    finally:
        await fleet.stop()
        kill_servers(folder)


async def test_a_run_sent_straight_to_a_stopped_server_goes_on_with_the_other(
    http: aiohttp.ClientSession, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """A run that names both servers (no router), on the servers' machine: w0's drain
    notice (backends/drain_notice.py) tells it, so it sends w0 nothing new, w0's requests
    in flight finish there, the drain empties w0 well before its `drain_s` and the SIGTERM
    cuts nothing; the run ends with every prompt answered once, none asked again."""
    state = tmp_path / "state"  # the run's XDG_STATE_HOME: it reads the same notices
    folder = state / "gen-tui" / "servers"
    # Answers of 200 tokens or so (1 s each): the drain waits for the longest in flight.
    flags = ("--slots", "8", "--tokens-per-s", "200", "--default-mean", "200")
    flags += ("--default-cv", "0.2")
    workers = [sim_recipe(f"w{i}", free_port(), *flags, drain_s=10.0) for i in range(2)]
    launcher = launcher_in(folder)
    recorder = Recorder()
    urls = {recipe.name: recipe.url() for recipe in workers}
    fleet = Fleet(workers, urls, {"process": launcher}, launcher.state, http, [recorder],
                  check_s=0.2, grace_s=3.0)  # fmt: skip
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", PROMPTS)
    ids = {str(json.loads(line)["id"]) for line in (prompts / "A.jsonl").open()}
    out = tmp_path / "out"
    try:
        await fleet.up()
        await recorder.reach(S.HEALTHY, 2, timeout=60)
        run = await spawn(
            *run_args(tokenizer_dir, prompts, out, urls["w0"], "--server-url", urls["w1"]),
            *("--concurrency", "16"),
            env={"XDG_STATE_HOME": str(state)},
        )
        finishing = asyncio.create_task(finish(run, 180))
        await wait_until(lambda: record_lines(out / "A") >= 40 or finishing.done(), 60, "40")
        assert not finishing.done(), finishing.result()
        await _busy(http, urls["w0"])
        began = time.monotonic()
        said = await fleet.stop(["w0"])  # what the servers view's stop does
        took = time.monotonic() - began
        assert recorder.states("w0")[-2:] == [S.DRAINING, S.STOPPED], recorder.states("w0")
        at_stop = record_lines(out / "A")
        assert not finishing.done(), "the run ended before the stop"
        # Stopped for good, its notice is gone with it: a server started on its port later
        # (by hand, or again from the panel) is not kept out of the runs.
        notice = folder / "draining" / f"{workers[0].port}.json"
        assert not notice.exists()
        code, stdout, stderr = await finishing
        # A restart keeps the notice while w0 is down, and removes it once w0 is healthy.
        fleet.supervisors["w0"].start()
        await recorder.reach(S.HEALTHY, 3, timeout=60)
        restarting = asyncio.create_task(fleet.supervisors["w0"].restart())
        await wait_until(notice.exists, 30, "the restart's notice")
        await restarting
        assert notice.exists(), "the notice went before w0 was healthy again"
        await recorder.reach(S.HEALTHY, 4, timeout=60)
        assert not notice.exists()
    finally:
        await fleet.stop()
        kill_servers(folder)
    assert code == 0, stderr[-2000:]
    (line,) = said
    # Emptied by the drain: nothing in flight when the SIGTERM came, nothing cut.
    assert "drained in" in line and "stopped anyway" not in line, line
    assert took < 10, took
    assert f"{urls['w0']} is being drained before a stop" in stdout, stdout[-2000:]
    written = check_once(out / "A", ids)
    assert set(written) == ids, f"{len(ids - set(written))} prompt(s) never written"
    assert not (out / "A" / "errors.jsonl").exists() or not (out / "A" / "errors.jsonl").read_text()
    # No request cut by the stop, none asked again; once w0 is stopped for good (its notice
    # gone), a request sent there finds nothing listening and goes to w1 at once.
    retried = [line for line in stdout.splitlines() if "retry" in line]
    cut = [line for line in retried if "connect" not in line.lower()]
    assert cut == [], retried
    print(f"stopped w0 at {at_stop} of {PROMPTS} records in {took:.1f} s: {line}")


async def test_servers_stop_never_prints_asyncio_s_unknown_child_warning(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """`gen-tui servers stop`, five times over a server started anew each time: its stderr
    stays empty. It printed "Unknown child process pid N, will report returncode 255" about
    one try in three (its signal script collected by Popen.kill's poll before asyncio's
    watcher: see backends/aio.py's kill_child; tests/unit/test_kill_child.py makes that
    race certain)."""
    state = tmp_path / "state"
    folder = state / "gen-tui" / "servers"
    recipe = sim_recipe("w0", free_port(), drain_s=2.0)
    config = tmp_path / "gen-tui.toml"
    config.write_text(_toml(recipe, "[[servers]]"))
    try:
        for attempt in range(5):
            recorder = Recorder()
            supervisor = supervisor_of(recipe, folder, http, recorder)
            supervisor.start()
            await recorder.reach(S.HEALTHY, timeout=60)
            await supervisor.leave()  # left running: the command stops it alone
            stop = await gen_tui_in(state, "servers", "--config", str(config), "stop", "w0")
            code, out, err = await finish(stop, 60)
            assert code == 0, err
            assert "exited after SIGTERM" in out, (attempt, out)
            assert err == "", (attempt, err)
    finally:
        kill_servers(folder)
