"""Run control on both hosts alike: this machine (psutil) and SSH to a real sshd on loopback.

Real processes throughout: `gen-tui run` driving the simulator, and a stand-in for a user's
own `run_inference.py` that writes the seed's old record layout (and, on request, ignores
SIGTERM like a script stuck in a drain).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts import (
    LOG_DIR,
    DatasetTotals,
    KillResult,
    ResumeRefused,
    RunIdentity,
    RunProcess,
    SSHHost,
    StartError,
    WatchStatus,
    resume_argv,
)
from gen_tui.backends.hosts.connection import SSHConnection
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.store.lock import DatasetLock
from gen_tui.backends.store.prompts import DatasetNameError
from gen_tui.backends.store.records import RAW_FILE, scan_records
from tests.support.locks import is_locked
from tests.support.polling import wait_until
from tests.support.records import progress, read_records, record_commands, record_lines, recount
from tests.support.runs import AnyHost, alive, append_records, standin_argv
from tests.support.sshd import Sshd


async def listed(host: AnyHost, identity: RunIdentity) -> RunProcess:
    runs = (await host.survey()).runs
    found = [run for run in runs if run.identity.same_process(identity)]
    assert found, f"pid {identity.pid} not in {[r.pid for r in runs]}"
    return found[0]


async def test_foreign_script_is_listed_refused_on_identity_then_stopped(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    out = host.output_dir
    log = str(tmp_path / "logs" / "standin.log")
    identity = await host.start(standin_argv(standin, out, "B3"), log)
    assert identity.cmdline[1:] == (str(standin), "--datasets", "B3", "--output-dir", out)
    await wait_until(lambda: record_lines(Path(out) / "B3") >= 5, what="stand-in writes")
    run = await listed(host, identity)
    # No lock, but its record file is open for writing: it writes B3 (issue 30, point 5).
    assert (run.datasets, run.gen_tui, run.state, run.writing) == (
        ("B3",),
        False,
        "running",
        ("B3",),
    )
    assert run.output_dir == out and 0 < run.elapsed_s < 600  # it ran while it wrote 5 records

    # Another start time or command line under the same pid is not our run: no signal.
    for other in (
        dataclasses.replace(identity, start_ticks=(identity.start_ticks or 0) + 1, start_time=1.0),
        dataclasses.replace(identity, cmdline=(*identity.cmdline, "--extra")),
    ):
        outcome = await host.kill(other, grace_s=5)
        assert outcome.result is KillResult.REFUSED, outcome
    assert alive(identity.pid)

    outcome = await host.kill(identity, grace_s=10)
    assert outcome.result is KillResult.STOPPED, outcome
    assert outcome.files_stable is True
    assert not alive(identity.pid)
    assert "stopped cleanly" in Path(log).read_text()
    assert (await host.kill(identity)).result is KillResult.ALREADY_GONE


async def test_sigterm_ignored_escalates_to_sigkill_with_a_countdown(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    out = host.output_dir
    argv = standin_argv(standin, out, "B4", "--on-term", "ignore")
    identity = await host.start(argv, str(tmp_path / "stubborn.log"))
    await wait_until(lambda: record_lines(Path(out) / "B4") >= 5, what="stand-in writes")
    await listed(host, identity)
    ticks: list[int] = []
    outcome = await host.kill(identity, grace_s=2, on_tick=ticks.append)
    assert outcome.result is KillResult.KILLED, outcome
    assert ticks and ticks == sorted(ticks, reverse=True) and all(0 <= t < 2 for t in ticks)
    assert outcome.files_stable is True
    assert "ignoring SIGTERM" in (tmp_path / "stubborn.log").read_text()
    size = (Path(out) / "B4" / RAW_FILE).stat().st_size
    scan = scan_records(Path(out) / "B4" / RAW_FILE)
    assert scan.valid_bytes == size and not scan.torn_tail, "a SIGKILL tore a line"


@pytest.mark.quick
async def test_gen_tui_run_is_stopped_without_loss_and_resumed_to_its_new_budget(
    host: AnyHost, sim: Any, tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=2000, slots=64, profiles={"B2": LengthProfile(mean=150)})
    out = Path(host.output_dir)
    argv = [
        *(sys.executable, "-m", "gen_tui.app.cli", "run"),
        *("--prompts-dir", str(prompts_dir(B2=3000))),
        *("--tokenizer", str(tokenizer_dir)),
        *("--output-dir", str(out), "--server-url", server.url),
        *("--plain", "--concurrency", "8", "--max-new-tokens", "1024", "--datasets", "B2"),
    ]
    # A stale run with no token budget is writing B2.
    identity = await host.start(argv, str(tmp_path / "first.log"))
    watch = host.watch(str(out), ["B2"])
    items: list[DatasetTotals | WatchStatus] = []
    consumer = asyncio.create_task(_collect(watch, items))
    try:
        await wait_until(lambda: record_lines(out / "B2") >= 20, 60, "first records")
        run = await listed(host, identity)
        assert run.gen_tui and run.state == "writing"
        assert run.datasets == ("B2",) and run.writing == ("B2",)

        outcome = await host.kill(identity, grace_s=30)
        assert outcome.result is KillResult.STOPPED, outcome
        assert outcome.files_stable is True
        said = re.search(r"drained and exited after SIGTERM; (\d+) answers?", outcome.detail)
        assert said and int(said.group(1)) <= recount(out / "B2")[1], outcome.detail
        assert outcome.sizes == {str(out / "B2" / RAW_FILE): (out / "B2" / RAW_FILE).stat().st_size}
        assert not is_locked(out / "B2" / "run.lock")
        tokens, records = recount(out / "B2")
        assert records == server.stats.completed, "a completed response was not written"
        assert progress(out / "B2")["state"] == "stopped"

        budget = tokens + 6000
        resumed = await host.resume(run, budget)
        assert resumed.cmdline == (*identity.cmdline, "--max-tokens-per-dataset", str(budget))
        assert (await listed(host, resumed)).datasets == ("B2",)
        lock = out / "B2" / "run.lock"
        await wait_until(
            lambda: not alive(resumed.pid) and not is_locked(lock), 60, "resumed run ends"
        )
        final_tokens, final_records = recount(out / "B2")
        assert final_tokens >= budget and final_records > records
        assert progress(out / "B2")["state"] == "done"
        assert progress(out / "B2")["max_tokens"] == budget
        await wait_until(
            lambda: (
                (totals := watch.totals.get("B2")) is not None
                and (totals.tokens, totals.samples) == (final_tokens, final_records)
            ),
            20,
            "watch totals equal the recount",
        )
    finally:
        await watch.aclose()
        await consumer
    seen = [item.tokens for item in items if isinstance(item, DatasetTotals)]
    assert seen == sorted(seen), "a total went backwards: something was counted twice"


async def _collect(watch: Any, items: list[Any]) -> None:
    async for item in watch:
        items.append(item)


async def test_a_start_that_reaches_the_host_after_a_later_check_is_refused(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    """The late start request: gen-tui gave up on a frozen link with a start in its socket,
    a retry checked for a live writer, found none and started one, then the frozen session
    woke and ran the first request. It relied on a check older than the retry's start."""
    out = Path(host.output_dir)
    host.template = [sys.executable, str(standin), "--output-dir", str(out)]
    (out / "B7").mkdir()
    late_check = watcher.start_seq(str(out))  # what the first request's check had read
    retry = await host.resume("B7", 1000)
    late = standin_argv(standin, str(out), "B7", "--max-tokens-per-dataset", "1000")
    try:
        with pytest.raises(
            ResumeRefused, match="another start reached the output folder after the check"
        ):
            await host.start(
                late, str(tmp_path / "late.log"), output_dir=str(out), expect=late_check
            )
        writers = [
            run
            for run in (await host.survey()).runs
            if "B7" in run.datasets and run.output_dir == host.output_dir
        ]
        assert [run.pid for run in writers] == [retry.pid]
        assert not (tmp_path / "late.log").exists()
        # A start that relies on the newest check goes ahead.
        (out / "B8").mkdir()
        other = await host.resume("B8", 1000)
        assert other.pid != retry.pid
        assert (await host.kill(other, grace_s=10)).result is KillResult.STOPPED
    finally:  # the stop is checked after, where a failure cannot hide the test's own
        outcome = await host.kill(retry, grace_s=10)
    assert outcome.result is KillResult.STOPPED


async def test_two_resumes_at_once_start_one_run(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    """A double `r`: both checks may find no writer; the start count lets one through. The
    count is what every check reads, here as over sshd, and each start moves it by one."""
    out = Path(host.output_dir)
    host.template = [sys.executable, str(standin), "--output-dir", str(out)]
    (out / "B9").mkdir()
    before = (await host._ps(host.pattern, str(out))).start_seq
    assert before == watcher.start_seq(str(out))
    results = await asyncio.gather(
        host.resume("B9", 1000), host.resume("B9", 1000), return_exceptions=True
    )
    started = [r for r in results if isinstance(r, RunIdentity)]
    try:
        assert len(started) == 1, results
        assert [type(r) for r in results if not isinstance(r, RunIdentity)] == [ResumeRefused]
        assert (await host._ps(host.pattern, str(out))).start_seq == before + 1
        writers = [
            run
            for run in (await host.survey()).runs
            if "B9" in run.datasets and run.output_dir == host.output_dir
        ]
        assert [run.pid for run in writers] == [started[0].pid]
    finally:  # the stops are checked after, where a failure cannot hide the test's own
        outcomes = [await host.kill(identity, grace_s=10) for identity in started]
    assert [o.result for o in outcomes] == [KillResult.STOPPED] * len(started)


async def test_a_start_the_host_cannot_make_says_why(host: AnyHost, tmp_path: Path) -> None:
    """A word the OS refuses (a NUL byte), and an unreadable start count: one clear line
    each, over sshd as here, never "python3 failed" or a bare ValueError."""
    out = Path(host.output_dir)
    with pytest.raises(StartError, match=r"cannot start .*(null|NUL)"):
        await host.start([sys.executable, "-c", "pass\x00"], str(tmp_path / "a.log"))
    seq = out / LOG_DIR / watcher.START_SEQ
    seq.parent.mkdir(exist_ok=True)
    seq.write_text("not a number\n")
    with pytest.raises(StartError, match="cannot read the start count"):
        await host.start([sys.executable, "-c", "pass"], str(tmp_path / "b.log"))
    assert not (tmp_path / "b.log").exists()


async def test_resume_refuses_a_live_writer_and_starts_nothing(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    out = Path(host.output_dir)
    host.template = [sys.executable, str(standin), "--output-dir", str(out)]
    (out / "B6").mkdir()
    lock = DatasetLock(out / "B6" / "run.lock")
    lock.acquire()  # this test process is the live writer
    try:
        with pytest.raises(
            ResumeRefused, match=rf"B6: a live writer holds its lock \(pid {os.getpid()} "
        ):
            await host.resume("B6", 1000)
    finally:
        lock.release()

    # A foreign script has no lock, but the run list knows it writes B5.
    identity = await host.start(standin_argv(standin, str(out), "B5"), str(tmp_path / "b5.log"))
    with pytest.raises(ResumeRefused, match=f"B5: run {identity.pid} .* is writing it"):
        await host.resume("B5", 1000)
    run = await listed(host, identity)
    with pytest.raises(ResumeRefused, match=f"run {identity.pid} is still running"):
        await host.resume(run, 1000)
    assert watcher.start_seq(str(out)) == 1, "a refused resume started something"
    assert not list((out / ".gen-tui-logs").glob("*.log"))
    assert (await host.kill(identity, grace_s=10)).result is KillResult.STOPPED

    # Once stopped, the template resumes it (with quoted, appended flags).
    resumed = await host.resume("B5", 500, max_samples=70)
    assert resumed.cmdline[-6:] == (
        *("--datasets", "B5", "--max-tokens-per-dataset", "500"),
        *("--max-samples", "70"),
    )
    assert (await host.kill(resumed, grace_s=10)).result is KillResult.STOPPED


HOSTILE = ["; touch CANARY #", "$(touch CANARY)", "`touch CANARY`", 'it\'s "quoted"', "~", "*"]


async def test_injection_is_refused_and_every_value_is_quoted(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    calls: list[str] = record_commands(host.connection) if isinstance(host, SSHHost) else []

    canary = Path.home() / "CANARY"
    assert not canary.exists()
    host.template = [sys.executable, str(standin)]
    for bad in ("B2; rm -rf ~", "B2$(touch CANARY)", "../B2", "-rf"):
        with pytest.raises(DatasetNameError, match="is not allowed"):
            await host.resume(bad, 10)
        with pytest.raises(DatasetNameError):
            host.watch(host.output_dir, ["B1", bad])
    fake = RunProcess(
        RunIdentity("x", 1, 0.0, "", ("python", "run_inference.py")),
        ("B1",),
        "running",
        0.0,
        host.output_dir,
        None,
    )
    with pytest.raises(DatasetNameError):
        await host.resume(fake, 10, datasets=["B1", "B1;id"])
    assert calls == [], "something reached the host before the names were checked"

    # Values that are not names are quoted: the process sees exactly what was given.
    log = tmp_path / "a log dir $(touch CANARY)" / "it's `x`.log"
    argv = standin_argv(standin, host.output_dir, "B7", "--note", *HOSTILE)
    identity = await host.start(argv, str(log))
    await wait_until(lambda: (Path(host.output_dir) / "B7" / "argv.json").exists())
    assert json.loads((Path(host.output_dir) / "B7" / "argv.json").read_text()) == argv[1:]
    assert identity.cmdline == tuple(argv)
    assert log.exists()
    assert (await host.kill(identity, grace_s=10)).result is KillResult.STOPPED
    assert not canary.exists() and not (tmp_path / "CANARY").exists()


async def test_a_command_that_exits_at_once_is_reported_with_its_log(
    host: AnyHost, tmp_path: Path
) -> None:
    argv = [sys.executable, "-c", "import sys; print('no such model'); sys.exit(3)"]
    with pytest.raises(StartError, match="no such model"):
        await host.start(argv, str(tmp_path / "fail.log"))


def _is_watcher(process: psutil.Process) -> bool:
    try:
        return process.cmdline()[:3] == [sys.executable, *watcher.PYTHON_FLAGS, "-"]
    except psutil.Error:
        return False


def _break_link(host: AnyHost, request: pytest.FixtureRequest, before: set[int]) -> None:
    """SSH: kill the sshd process serving our connection. Local: kill the watcher process."""
    if isinstance(host, SSHHost):
        server: Sshd = request.getfixturevalue("sshd")
        victims = [p for p in server.sessions() if p.pid not in before]
    else:
        victims = [p for p in psutil.Process().children() if _is_watcher(p)]
    assert victims
    for process in victims:
        process.kill()


async def test_watch_recovers_from_a_dropped_link_with_exact_totals(
    host: AnyHost, request: pytest.FixtureRequest
) -> None:
    out = Path(host.output_dir)
    before: set[int] = set()
    if isinstance(host, SSHHost):
        # A connection of our own, made now, so we know which sshd session serves it.
        server: Sshd = request.getfixturevalue("sshd")
        await host.close()
        host.connection = SSHConnection(server.alias, server.options(), backoff_s=(0.2, 0.5))
        before = {p.pid for p in server.sessions()}
        await host.connect()
    await append_records(out / "A", 50, "a")
    watch = host.watch(str(out), ["A", "B"])
    items: list[DatasetTotals | WatchStatus] = []
    consumer = asyncio.create_task(_collect(watch, items))
    try:
        await wait_until(lambda: "A" in watch.totals and watch.totals["A"].samples == 50, 20)
        writers = asyncio.gather(
            append_records(out / "A", 150, "x"), append_records(out / "B", 150, "y")
        )
        await asyncio.sleep(0.5)
        _break_link(host, request, before)
        await wait_until(
            lambda: any(isinstance(i, WatchStatus) and "disconnected" in i.state for i in items),
            15,
            "the drop is noticed",
        )
        await writers
        expected = {name: scan_records(out / name / RAW_FILE) for name in ("A", "B")}
        await wait_until(
            lambda: all(
                name in watch.totals
                and (watch.totals[name].tokens, watch.totals[name].samples)
                == (expected[name].tokens, expected[name].records)
                for name in ("A", "B")
            ),
            30,
            "totals after the reconnect equal the recount",
        )
        assert watch.restarts >= 1
    finally:
        await watch.aclose()
        await consumer
    for name in ("A", "B"):
        seen = [i.tokens for i in items if isinstance(i, DatasetTotals) and i.dataset == name]
        assert seen == sorted(seen), f"{name}: a total went backwards"
    assert len(read_records(out / "A")) == 200


def test_resume_argv_replaces_budget_flags_or_appends_them() -> None:
    seed = ["python", "run_inference.py", "--max-samples", "7000", "--token-budget=5M"]
    assert resume_argv(seed, None, 10_000_000, None) == [
        *("python", "run_inference.py", "--max-samples", "7000", "--token-budget=10000000"),
    ]
    assert resume_argv(seed, ["B2"], None, 8000) == [
        *("python", "run_inference.py", "--max-samples", "8000", "--token-budget=5M"),
        *("--datasets", "B2"),
    ]
    engine = ["gen-tui", "run", "--datasets", "B1,B2", "--max-tokens-per-dataset", "1M"]
    assert resume_argv(engine, ["B2"], 2_000_000, None) == [
        *("gen-tui", "run", "--datasets", "B2", "--max-tokens-per-dataset", "2000000"),
    ]
    assert resume_argv(["gen-tui", "run"], None, 5, None)[-2:] == ["--max-tokens-per-dataset", "5"]
