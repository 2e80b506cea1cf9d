"""Issue 30, point 6: the watcher's /metrics reads on a shared box, with real servers and
a real second Unix user.

(a) A server that drips its header a byte at a time held the whole host's telemetry: the
reads were one after the other, each bounded per byte only. (b) A server's `1e308`, `NaN`
and `+Inf` drew 300-digit figures. (c) The watcher (root, here) read any URL another
user's command line named.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.widgets.format import server_text
from tests.support.load import busy
from tests.support.polling import wait_until
from tests.support.users import OTHER_USER, ensure_user

HOSTILE_METRICS = (
    "# TYPE sglang:num_running_reqs gauge\n"
    'sglang:num_running_reqs{tp_rank="0"} 1e308\n'
    'sglang:num_running_reqs{tp_rank="1"} 1e308\n'
    "# TYPE sglang:num_queue_reqs gauge\n"
    "sglang:num_queue_reqs NaN\n"
    "# TYPE sglang:gen_throughput gauge\n"
    "sglang:gen_throughput +Inf\n"
    "# TYPE sglang:token_usage gauge\n"
    "sglang:token_usage 1e308\n"
    "# TYPE sglang:num_retracted_requests_total counter\n"
    "sglang:num_retracted_requests_total 1e300\n"
)


class Hostile:
    """A raw TCP server on loopback: `drip` sends a status line then a header byte every
    0.3 s for ever; `numbers` answers HOSTILE_METRICS. It counts the requests it got."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            if self.mode == "drip":
                writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while True:
                    await writer.drain()
                    await asyncio.sleep(0.3)
                    writer.write(b"a")
            body = HOSTILE_METRICS.encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def hostile() -> AsyncIterator[Callable[[str], Any]]:
    made: list[Hostile] = []

    async def start(mode: str) -> Hostile:
        server = Hostile(mode)
        await server.start()
        made.append(server)
        return server

    yield start
    for server in made:
        await server.stop()


async def _monitored(monitor: HostMonitor) -> asyncio.Task[None]:
    return asyncio.create_task(monitor.run())


def _report(monitor: HostMonitor, url: str) -> ServerReport | None:
    return monitor.servers().get(url)


async def test_a_dripping_server_never_freezes_the_others_reads(
    tmp_path: Path, sim: Callable[..., Any], hostile: Callable[[str], Any]
) -> None:
    drip = await hostile("drip")
    server = await sim(slots=2, tokens_per_s=20.0, context_length=200_000)
    # "localhost" sorts after "127.0.0.1": the dripping server is read first.
    named = server.url.replace("127.0.0.1", "localhost")
    out = tmp_path / "out"
    out.mkdir()
    monitor = HostMonitor(LocalHost(out), survey_s=0.3, servers=(drip.url, named))
    task = await _monitored(monitor)
    try:
        started = time.monotonic()
        async with busy(server, 3):
            await wait_until(
                lambda: (r := _report(monitor, named)) and r.metrics and r.metrics.running == 2,
                15,
                "the healthy server's load while the other drips",
                detail=lambda: f"servers={monitor.servers()}",
            )
        loaded_after = time.monotonic() - started
        report = await wait_until(
            lambda: (r := _report(monitor, drip.url)) and r.state != "ok" and r,
            15,
            "the dripping server said as too slow",
        )
        said_after = time.monotonic() - started
        assert "no whole answer within 3 s" in report.state
        # The healthy server keeps being read, round after round, while the drip goes on.
        async with busy(server, 1):
            await wait_until(
                lambda: (r := _report(monitor, named)) and r.metrics and r.metrics.running == 1,
                15,
                "a second reading of the healthy server",
            )
        print(f"healthy load after {loaded_after:.1f} s; drip said after {said_after:.1f} s")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_hostile_numbers_from_a_server_draw_bounded_figures(
    tmp_path: Path, hostile: Callable[[str], Any]
) -> None:
    numbers = await hostile("numbers")
    out = tmp_path / "out"
    out.mkdir()
    monitor = HostMonitor(LocalHost(out), survey_s=0.3, servers=(numbers.url,))
    task = await _monitored(monitor)
    try:
        report = await wait_until(
            lambda: (r := _report(monitor, numbers.url)) and r.state == "ok" and r,
            20,
            "the hostile server's figures",
            detail=lambda: f"servers={monitor.servers()}",
        )
        assert report.metrics is not None
        for detail in (False, True):
            text = server_text(numbers.url, report.state, report.metrics, detail=detail)
            assert len(text) < 120, text
            assert max(len(word) for word in text.split()) < 16, text
        metrics = report.metrics
        assert (metrics.running, metrics.queued, metrics.kv_usage) == (None, None, None)
        assert (metrics.gen_tok_s, metrics.retracted) == (None, None)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_watcher_reads_no_url_another_users_command_line_names(
    tmp_path: Path, sim: Callable[..., Any], hostile: Callable[[str], Any]
) -> None:
    user = ensure_user(OTHER_USER)
    theirs = await hostile("numbers")
    ours = await sim(slots=2, tokens_per_s=20.0, context_length=200_000)
    out = tmp_path / "out"
    out.mkdir()
    sleeper = "import time; time.sleep(60)"
    words = ["run_inference.py", "--datasets", "{}", "--output-dir", str(out), "--server-url"]
    other = subprocess.Popen(
        ["python3", "-c", sleeper, *[w.format("B1") for w in words], theirs.url],
        user=user.pw_uid,
        group=user.pw_gid,
        cwd="/",
    )
    mine = subprocess.Popen(["python3", "-c", sleeper, *[w.format("B2") for w in words], ours.url])
    monitor = HostMonitor(LocalHost(out), survey_s=0.3)
    task = await _monitored(monitor)
    try:
        await wait_until(
            lambda: {run.pid for run in monitor.runs} >= {other.pid, mine.pid},
            20,
            "both runs listed",
        )
        # Our own run's server is read (so the watcher does read the URLs runs name) ...
        await wait_until(
            lambda: (r := _report(monitor, ours.url)) and r.state == "ok",
            20,
            "our run's server read on the box",
            detail=lambda: f"servers={monitor.servers()}",
        )
        await asyncio.sleep(3)  # a round or more of reads after both were listed
        # ... and the other user's never: not one GET reached it.
        assert theirs.requests == 0
        assert theirs.url not in monitor.servers()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for process in (other, mine):
            process.kill()
            process.wait()
