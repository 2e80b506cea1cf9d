"""A `[[hosts]]` entry's `servers`: the watcher reads them on the box (locally and over a
real sshd) beside the servers its runs' command lines name, from before any dataset exists,
and their load reaches the HostMonitor's telemetry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.store.progress_file import ServerReport
from tests.support.load import busy
from tests.support.polling import wait_until
from tests.support.runs import AnyHost, standin_argv


def _running(monitor: HostMonitor, url: str) -> int | None:
    report: ServerReport | None = monitor.servers().get(url)
    return report.metrics.running if report and report.metrics else None


async def test_configured_servers_are_read_on_the_host_with_the_named_ones(
    host: AnyHost, standin: Path, tmp_path: Path, sim: Callable[..., Any]
) -> None:
    configured = await sim(slots=2, tokens_per_s=20.0, context_length=200_000)
    named = await sim(slots=3, tokens_per_s=20.0, context_length=200_000)
    monitor = HostMonitor(host, survey_s=0.3, servers=(configured.url,))
    task = asyncio.create_task(monitor.run())
    try:
        # No run and no dataset yet: the configured server is read all the same.
        async with busy(configured, 3):
            await wait_until(
                lambda: _running(monitor, configured.url) == 2,
                30,
                "the configured server's load, read on the box",
                detail=lambda: f"servers={monitor.servers()} watch={monitor.watch_state!r}",
            )
            report = monitor.servers()[configured.url]
            assert report.state == "ok" and report.metrics is not None
            assert (report.metrics.server, report.metrics.queued) == ("sglang", 1)
            assert report.metrics.gen_tok_s == 2 * 20.0
        assert monitor.datasets == ()

        # A run naming another server on its command line: both are read, side by side.
        argv = standin_argv(standin, host.output_dir, "B2", "--server-url", named.url)
        await host.start(argv, str(tmp_path / "b2.log"))  # (the fixture stops it)
        async with busy(named, 1), busy(configured, 1):
            await wait_until(
                lambda: (_running(monitor, named.url), _running(monitor, configured.url)) == (1, 1),
                30,
                "both servers' load: the run's and the configured one",
                detail=lambda: f"servers={monitor.servers()}",
            )
        assert set(monitor.servers()) == {configured.url, named.url}
        assert "B2" in monitor.datasets
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
