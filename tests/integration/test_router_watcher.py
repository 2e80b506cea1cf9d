"""A router watched on its box: the watcher finds that a server URL is an sglang-router (its
/metrics answers 404, its /get_server_info says `router_manager`), reads each worker's
/metrics there, and the monitor shows the router's per-worker loads and their sum, for a
router no gen-tui run writes a progress.json about (here: one only configured)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.telemetry.workers import healthy_count
from tests.support.load import busy
from tests.support.polling import wait_until
from tests.support.runs import AnyHost

SLOW = {"tokens_per_s": 20.0, "context_length": 200_000}


async def test_a_routers_workers_are_read_on_the_box_and_summed(
    host: AnyHost, sim: Callable[..., Any], router: Any
) -> None:
    small, large = await sim(slots=2, **SLOW), await sim(slots=4, **SLOW)
    url = await router(small.url, large.url)
    assert await asyncio.to_thread(watcher.router_workers, small.url) is None, "no router"
    listed = await asyncio.to_thread(watcher.router_workers, url)
    assert listed == sorted(
        [{"url": small.url, "healthy": True}, {"url": large.url, "healthy": True}],
        key=lambda worker: worker["url"],
    )
    monitor = HostMonitor(host, servers=[url], survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        async with busy(small, 3), busy(large, 5):  # 2 run + 1 queued, 4 run + 1 queued

            def loaded() -> Any:
                report = monitor.servers().get(url)
                workers = (report.workers if report else None) or ()
                loads = {w.url: (w.metrics.running, w.metrics.queued) for w in workers if w.metrics}
                return report if loads == {small.url: (2, 1), large.url: (4, 1)} else None

            report = await wait_until(loaded, 30, "both workers' loads, read on the box")
            assert report.state == "ok" and report.metrics is not None
            assert (report.metrics.running, report.metrics.queued) == (6, 2)
            assert report.metrics.gen_tok_s == 6 * SLOW["tokens_per_s"]
            assert healthy_count(report.workers) == 2
        await large.stop()

        def down() -> Any:
            report = monitor.servers().get(url)
            found = {w.url: w for w in (report.workers or ())} if report else {}
            worker = found.get(large.url)
            return worker if worker is not None and worker.state.startswith("down: ") else None

        gone = await wait_until(down, 30, "the stopped worker said down")
        assert gone.metrics is None and "refused" in gone.state.lower()
        assert healthy_count(monitor.servers()[url].workers or ()) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
