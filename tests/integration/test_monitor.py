"""HostMonitor against real processes, locally and over a real sshd: discovery, live totals
equal to a recount, budgets read from command lines, kill and resume."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from gen_tui.backends.aio import stop
from gen_tui.backends.hosts import KillResult
from gen_tui.backends.hosts.local import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor, budget_from_argv
from gen_tui.backends.hosts.watch import LineSource
from gen_tui.backends.progress.rate import RateMeter
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.polling import wait_until
from tests.support.records import recount
from tests.support.runs import AnyHost, alive, standin_argv


def test_rates_come_from_successive_totals_and_decay_when_writing_stops() -> None:
    meter = RateMeter(window_s=10)
    assert meter.rates(0.0) == (0.0, 0.0)
    for second in range(5):
        meter.add(float(second), 100 * second, 2 * second)
    assert meter.rates(4.0) == (100.0, 2.0)
    assert meter.rates(8.0) == (50.0, 1.0)  # nothing new for 4 s: half the rate
    meter.add(9.0, 10, 1)  # the file was replaced: old points would give a negative rate
    meter.add(10.0, 30, 2)
    assert meter.rates(10.0) == (20.0, 1.0)


def test_budgets_are_read_from_a_command_line_in_every_spelling() -> None:
    assert budget_from_argv(["x", "--max-tokens-per-dataset", "10M"]) == (10_000_000, None)
    assert budget_from_argv(["x", "--token-budget=2.5e6", "--max-samples", "500"]) == (
        2_500_000,
        500,
    )
    assert budget_from_argv(["x", "--max-tokens-per-dataset", "lots"]) == (None, None)
    assert budget_from_argv(["x"]) == (None, None)


async def test_monitor_finds_watches_kills_and_resumes_foreign_runs(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    out = Path(host.output_dir)
    first = await host.start(
        standin_argv(standin, str(out), "B3", "--max-tokens-per-dataset", "50k"),
        str(tmp_path / "b3.log"),
    )
    monitor = HostMonitor(host, survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(lambda: "B3" in monitor.totals, 30, "B3 discovered and counted")
        assert monitor.state == "connected"
        writer = monitor.writer("B3")
        assert writer is not None and writer.identity.same_process(first)
        await wait_until(
            lambda: (snap := monitor.snapshot("B3")) is not None and snap.tok_s > 0, 20, "a rate"
        )
        snap = monitor.snapshot("B3")
        assert snap is not None
        assert (snap.state, snap.max_tokens, snap.pid, snap.host) == (
            DatasetState.ACTIVE,
            50_000,
            first.pid,
            host.name,
        )
        assert snap.eta_s is not None and snap.eta_s > 0

        # A dataset that appears later joins without recounting the first.
        second = await host.start(standin_argv(standin, str(out), "B5"), str(tmp_path / "b5.log"))
        await wait_until(lambda: "B5" in monitor.totals, 30, "B5 discovered")
        seen = [monitor.totals["B3"].tokens]

        outcome = await monitor.kill(first, grace_s=10)
        assert outcome.result is KillResult.STOPPED and outcome.files_stable is True
        tokens, samples = recount(out / "B3")
        await wait_until(
            lambda: (
                (monitor.totals["B3"].tokens, monitor.totals["B3"].samples) == (tokens, samples)
            ),
            20,
            "B3 totals equal a recount",
        )
        seen.append(monitor.totals["B3"].tokens)
        await wait_until(lambda: monitor.writer("B3") is None, 10, "the run list drops it")
        assert monitor.snapshot("B3").state is DatasetState.STOPPED  # type: ignore[union-attr]

        resumed = await monitor.resume("B3", tokens + 100)
        assert resumed.pid != first.pid
        assert resumed.cmdline[-2:] == ("--max-tokens-per-dataset", str(tokens + 100))
        await wait_until(lambda: monitor.writer("B3") is not None, 10, "the new writer")
        assert monitor.snapshot("B3").max_tokens == tokens + 100  # type: ignore[union-attr]
        for identity in (resumed, second):
            assert (await monitor.kill(identity, grace_s=10)).result is KillResult.STOPPED
        final = recount(out / "B3")
        await wait_until(
            lambda: (monitor.totals["B3"].tokens, monitor.totals["B3"].samples) == final,
            20,
            "B3 totals equal a recount after the resumed run",
        )
        seen.append(monitor.totals["B3"].tokens)
        assert seen == sorted(seen)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not alive(first.pid)  # outside `finally`: a failure above is not masked by it


async def test_a_dataset_of_the_same_name_in_another_folder_is_not_ours(
    standin: Path, tmp_path: Path
) -> None:
    """Two B3s on one machine: the one writing elsewhere is neither our writer nor a reason
    to refuse our resume (local hosts list every matching process of the machine)."""
    from gen_tui.backends.hosts import LocalHost

    ours, elsewhere = tmp_path / "ours", tmp_path / "elsewhere"
    ours.mkdir()
    elsewhere.mkdir()
    host = LocalHost(ours)
    other = await host.start(standin_argv(standin, str(elsewhere), "B3"), str(tmp_path / "o.log"))
    mine = await host.start(standin_argv(standin, str(ours), "B3"), str(tmp_path / "m.log"))
    monitor = HostMonitor(host, survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    started = [other, mine]
    try:
        await wait_until(lambda: "B3" in monitor.totals, 30, "our B3 counted")
        writer = monitor.writer("B3")
        assert writer is not None and writer.identity.same_process(mine)
        assert (await monitor.kill(mine, grace_s=10)).result is KillResult.STOPPED
        assert monitor.writer("B3") is None, "the B3 writing elsewhere was taken for ours"
        resumed = await monitor.resume("B3", 1000)
        started.append(resumed)
        assert str(ours) in resumed.cmdline
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for identity in started:
            if alive(identity.pid):
                await host.kill(identity, grace_s=5)


async def test_a_watch_stream_that_broke_is_said_and_started_again(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault nothing expects where the watch stream opens (injected: the first opening
    raises RuntimeError): the host's state says the stream broke, and the next survey
    starts a new one, so the totals come. Before, the stream's task died unseen, its
    reader waited forever, and the host's datasets never got totals (issue 31, residual 5:
    where one of two links' streams could stall)."""
    out = tmp_path / "out"
    (out / "B3").mkdir(parents=True)
    run = subprocess.Popen(
        standin_argv(standin, str(out), "B3"), stdout=subprocess.DEVNULL, start_new_session=True
    )
    opened: list[list[str]] = []
    real = LocalHost._open_watcher

    async def first_breaks(self: LocalHost, args: list[str]) -> LineSource:
        opened.append(args)
        if len(opened) == 1:
            raise RuntimeError("a fault nothing expected")
        return await real(self, args)

    monkeypatch.setattr(LocalHost, "_open_watcher", first_breaks)
    said: list[str] = []
    monitor = HostMonitor(LocalHost(str(out)), survey_s=0.3)
    monitor.on_change = lambda: said.append(monitor.status)
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(lambda: "B3" in monitor.totals, 30, "B3 counted", detail=lambda: said)
        assert len(opened) >= 2
        broke = [s for s in said if "broke" in s]
        assert broke and "RuntimeError: a fault nothing expected" in broke[0], said
        await wait_until(lambda: monitor.status == "connected", 10, detail=lambda: said)
    finally:
        await stop(task)
        run.kill()
        run.wait()
