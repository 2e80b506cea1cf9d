"""Link chaos: the SSH connection serving gen-tui is killed and frozen while runs are watched,
killed and resumed.

A real OpenSSH sshd on loopback stands in for the GPU box; two real `gen-tui run` processes
(datasets LinkA and LinkB, against a real `gen-tui sim`) write there, started over SSH. A
:class:`HostMonitor` watches them through an :class:`SSHHost` with a short keepalive (1 s,
2 misses), as the panel does. Each step picks a dataset and does what a person would: `k`
(`monitor.kill`) if it runs, `r` (`monitor.resume`, or `monitor.resume_run` on the ended
run) if it does not. At a random moment around that step (up to a second before it starts,
or up to 2.5 s into it) the sshd process serving our connection (found by our socket's
port) is killed with SIGKILL, or frozen with SIGSTOP for 0.5 to 5 s and then continued:
short freezes stall the link without dropping it, long ones trip the keepalive.

What is held, by checks that use no backends code (`checker.py`, `procs.py`, /proc):

- totals: every total the monitor received equals a recount of the record file up to the
  byte offset it reports (plus, at most, the next line, counted provisionally), totals
  never go backwards, and after each heal the watch catches up with the file as it was;
  at the end, with every run stopped, they equal a full recount;
- kills: an outcome that says stopped, killed or already gone means the process is gone;
  a kill that raises says so in a clear `RunError`/`SSHError`, and what is then true
  (still running, or stopped anyway) is checked, and a retry ends it;
- resumes: each resume starts at most one process; a resume that raises starts nothing or
  one, and retrying it after the heal is refused while that one runs; never two live
  `gen-tui run` processes of one dataset, never two processes with its record file open
  for writing, and the writer is the `run.lock` holder (sampled every 0.1 s from /proc);
- records: what was once on disk stays, byte for byte; no sample_id twice; every response
  the server completed is on disk (every stop here is a SIGTERM drain);
- no remote process outlives its link: no watcher or signal script left at the end.

Reproduce a failure with the seed it prints: `CHAOS_SEED=... pytest tests/chaos -k link`.
test_link_cutoffs.py pins the defects it found, each with the fault at its exact moment (a
command, a listing, a kill's file check, a resume's check or start cut off); totals_audit.py
holds the check of the totals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts import (
    KillOutcome,
    KillResult,
    ResumeRefused,
    RunError,
    RunIdentity,
    RunProcess,
    SSHHost,
)
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.hosts.ssh_target import SSHError
from tests.support.polling import wait_until
from tests.support.sshd import Sshd, python38
from tests.support.surveys import SurveyClock

from .checker import FolderState, check_folder, error_ids, prompt_ids, sample_of_rid, split_records
from .link import HEAL_TIMEOUT_S, KEEPALIVE, RAW, Faults, Truth, alive, later, shape
from .procs import GEN_TUI, SimProcess
from .totals_audit import TotalsAudit

DATASETS = ("LinkA", "LinkB")  # names no other test uses: the monitor sees every run here
FAULTS_PER_ITERATION = 3
GRACE_S = 20.0  # the engine drains in well under a second: every stop is a SIGTERM drain
BUDGET = 10**9  # resumed runs never reach it: they stop only when told to
ACTION_TIMEOUT_S = 120.0  # a kill or resume that outlasts this hangs: a failure
SIM_ARGS = ["--slots", "8", "--tokens-per-s", "400", "--default-mean", "50"]


async def within(awaitable: Awaitable[Any], seconds: float, what: str) -> Any:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise AssertionError(f"{what} did not finish within {seconds:g} s (a hang)") from None


async def test_link_chaos_keeps_totals_exact_and_every_kill_and_resume_accounted(
    sshd: Sshd,
    tmp_path: Path,
    tokenizer_dir: Path,
    chaos_iterations: int,
    chaos_report: Any,
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(2**32)))
    print(f"link chaos seed: CHAOS_SEED={seed}")
    rng = random.Random(seed)
    steps = FAULTS_PER_ITERATION * chaos_iterations
    prompts = tmp_path / "prompts"
    for name in DATASETS:
        write_prompts(prompts / f"{name}.jsonl", 1000 + 600 * chaos_iterations)
    ids = {name: prompt_ids(prompts / f"{name}.jsonl") for name in DATASETS}
    out = tmp_path / "out"
    out.mkdir()
    sim = SimProcess(tmp_path / "sim", SIM_ARGS).start()
    host = SSHHost(
        "gpu-box",
        sshd.alias,
        str(out),
        options=sshd.options(**KEEPALIVE),
        python=python38() or "python3",
    )
    faults = Faults(sshd, host.connection)
    truth = Truth(out, DATASETS)
    audit = TotalsAudit(out, DATASETS, seed)
    monitor: HostMonitor

    def on_change() -> None:
        audit.receive(monitor.totals)

    monitor = HostMonitor(host, DATASETS, on_change=on_change)
    surveyed = SurveyClock(monitor)
    host_resume = host.resume
    resumed_by_host: list[RunIdentity] = []

    async def spied_resume(*args: Any, **kwargs: Any) -> RunIdentity:
        identity = await host_resume(*args, **kwargs)
        resumed_by_host.append(identity)
        return identity

    host.resume = spied_resume  # type: ignore[method-assign]

    events: Counter[str] = Counter()
    messages: Counter[str] = Counter()
    started = time.monotonic()
    loop: asyncio.Task[None] | None = None

    def argv(name: str) -> list[str]:
        return [
            *GEN_TUI, "run",
            "--prompts-dir", str(prompts),
            "--tokenizer", str(tokenizer_dir),
            "--output-dir", str(out),
            "--server-url", sim.url,
            "--plain",
            "--concurrency", "2",
            "--max-new-tokens", "256",
            "--datasets", name,
            "--max-tokens-per-dataset", str(BUDGET),
        ]  # fmt: skip

    def monitor_pids(name: str) -> set[int]:
        return {
            run.pid
            for run in monitor.runs
            if name in run.datasets and run.output_dir == monitor.output_dir
        }

    async def settle(label: str) -> None:
        """Wait for the heal: a survey after the last fault, the run list true, totals caught up."""
        since = max(faults.last_end, time.time() - 0.01)
        monitor.poke()
        await wait_until(
            lambda: monitor.state == "connected" and surveyed.at > since,
            HEAL_TIMEOUT_S,
            f"{label}: a survey after the link healed (state: {monitor.state})",
        )

        def agrees() -> bool:
            return all(
                monitor_pids(name) == {pid for pid, _ in truth.runs_of(name)} for name in DATASETS
            )

        await wait_until(agrees, HEAL_TIMEOUT_S, f"{label}: the run list matches the processes")
        sizes = {}
        for name in DATASETS:
            path = out / name / RAW
            data = path.read_bytes() if path.exists() else b""
            sizes[name] = data.rfind(b"\n") + 1
        await wait_until(
            lambda: all(
                name in monitor.totals and monitor.totals[name].offset >= sizes[name]
                for name in DATASETS
            ),
            HEAL_TIMEOUT_S,
            f"{label}: the watch catches up with the files (watch: {monitor.watch_state})",
        )
        audit.verify(label)
        assert not truth.violations, f"{label} (seed {seed}): {truth.violations[:5]}"

    def live(name: str) -> list[tuple[int, float]]:
        return truth.runs_of(name)

    async def kill_step(name: str, run: RunProcess, label: str) -> None:
        key = next(k for k in live(name) if k[0] == run.pid)
        outcome: KillOutcome | None = None
        error: Exception | None = None
        try:
            outcome = await within(monitor.kill(run.identity, GRACE_S), ACTION_TIMEOUT_S, label)
        except (SSHError, RunError) as exc:
            error = exc
        await faults_done()
        if outcome is not None:
            assert outcome.result in (KillResult.STOPPED, KillResult.KILLED), f"{label}: {outcome}"
            assert not alive(key), f"{label}: says {outcome.result}, yet pid {key[0]} runs"
            assert outcome.files_stable is not False, f"{label}: false alarm: {outcome.detail}"
            cut = "; its file check cut off" if "could not be checked" in outcome.detail else ""
            events[f"kill: {outcome.result}{cut}"] += 1
            await settle(label)
            return
        assert error is not None
        messages[f"kill: {type(error).__name__}: {shape(str(error))}"] += 1
        await settle(label)
        still = alive(key)
        # What a person does next: look again (done: the run list is true), and press k again.
        again = await within(monitor.kill(run.identity, GRACE_S), ACTION_TIMEOUT_S, label)
        assert again.result in (
            KillResult.STOPPED,
            KillResult.KILLED,
            KillResult.ALREADY_GONE,
        ), f"{label}: retried: {again}"
        assert not alive(key), f"{label}: retried: says {again.result}, yet pid {key[0]} runs"
        state = "still running" if still else "stopped anyway"
        events[f"kill raised; the run was {state}; retried: {again.result}"] += 1
        await settle(label)

    async def resume_step(name: str, label: str) -> None:
        before = time.monotonic()
        done_by_host = len(resumed_by_host)
        # This folder's: the host's ended runs are every folder's, and another test's
        # LinkB beside this one (a second suite on the machine) was resumed in its folder,
        # as the panel's run list would (its `R` offers them under "others").
        ended = [
            run
            for run in monitor.ended
            if run.datasets == (name,) and run.output_dir == monitor.output_dir
        ]
        how = "resume_run" if ended and rng.random() < 0.5 else "resume"
        identity: RunIdentity | None = None
        error: Exception | None = None
        try:
            if how == "resume_run":
                action = monitor.resume_run(ended[0], BUDGET)
            else:
                action = monitor.resume(name, BUDGET)
            identity = await within(action, ACTION_TIMEOUT_S, label)
        except ResumeRefused as exc:
            raise AssertionError(f"{label}: refused with no writer running: {exc}") from None
        except (SSHError, RunError) as exc:
            error = exc
        await faults_done()
        await truth.sampled_since(time.monotonic(), label)  # it has seen what started
        new = truth.started_since(name, before)
        assert len(new) <= 1, f"{label}: one {how} started {len(new)} runs: {new}"
        if identity is not None:
            assert [pid for pid, _ in new] == [identity.pid], f"{label}: {identity.pid} vs {new}"
            events[f"{how}: started"] += 1
            await settle(label)
            return
        assert error is not None
        kind = f"{how}: {type(error).__name__}: {shape(str(error))}"
        messages[kind] += 1
        host_started = len(resumed_by_host) > done_by_host
        if new and not host_started:
            assert re.search(r"may have started|may be running", str(error)), (
                f"{label}: a run started (pid {new[0][0]}), but the user read: {error}"
            )
        await settle(label)
        # A person presses r again once the link is back: refused while the first one runs.
        if new and alive(new[0]):
            with pytest.raises(ResumeRefused):
                await within(monitor.resume(name, BUDGET), ACTION_TIMEOUT_S, label)
            outcome = "refused (the first one runs)"
        else:
            again = time.monotonic()
            try:
                retried = await within(monitor.resume(name, BUDGET), ACTION_TIMEOUT_S, label)
            except ResumeRefused:
                # The first start's helper on the host outlived the link and launched after
                # the look (seen once beside a second suite: the run 1 s after the helper):
                # the start guard lets one start through and refuses the other. The person
                # was told the first may have started.
                assert re.search(r"may have started|may be running", str(error)), (label, error)
                await truth.sampled_since(time.monotonic(), label)
                late = truth.started_since(name, before)
                assert len(late) == 1, f"{label}: refused, and {len(late)} runs started: {late}"
                outcome = "refused (the first one started late)"
            else:
                await truth.sampled_since(time.monotonic(), label)
                assert [pid for pid, _ in truth.started_since(name, again)] == [retried.pid]
                outcome = "started"
        if host_started:
            what = "started, but the survey after it failed"
        else:
            what = "started" if new else "nothing started"
        events[f"{how} raised; {what}; retried: {outcome}"] += 1
        await settle(label)

    pending: list[asyncio.Task[None]] = []

    async def faults_done() -> None:
        while pending:
            await within(pending.pop(), HEAL_TIMEOUT_S, "a fault")

    try:
        truth.start()
        await host.connect()
        for name in DATASETS:
            await host.start(argv(name), str(tmp_path / "logs" / f"{name}-first.log"))
        loop = asyncio.create_task(monitor.run())
        await settle("start")
        kinds = []
        for _ in range(chaos_iterations):
            batch = ["kill", "freeze", rng.choice(["kill", "freeze"])]
            rng.shuffle(batch)
            kinds += batch
        for step, kind in enumerate(kinds[:steps]):
            name = rng.choice(DATASETS)
            running = live(name)
            freeze_s = rng.uniform(0.5, 5.0)
            delay = rng.uniform(-1.0, 2.5)
            what = "kill" if running else "resume"
            label = f"step {step} ({what} {name}, {kind} at {delay:+.2f} s)"
            if delay < 0:
                pending.append(asyncio.create_task(faults.strike(kind, freeze_s)))
                await asyncio.sleep(-delay)
            else:
                pending.append(asyncio.create_task(later(delay, faults.strike(kind, freeze_s))))
            if running:
                run = monitor.writer(name)
                assert run is not None and run.pid == running[0][0], f"{label}: {run}"
                await kill_step(name, run, label)
            else:
                await resume_step(name, label)

        # The end: every run stopped through the monitor, on a quiet link; totals exact.
        for name in DATASETS:
            run = monitor.writer(name)
            if run is not None:
                outcome = await within(monitor.kill(run.identity, GRACE_S), ACTION_TIMEOUT_S, "end")
                assert outcome.result is KillResult.STOPPED, outcome
        await settle("end")
        for name in DATASETS:
            path = out / name / RAW
            records, _ = split_records(path.read_bytes(), str(path))
            final = monitor.totals[name]
            assert (final.samples, final.tokens, final.offset) == (
                len(records),
                sum(r.tokens for r in records),
                path.stat().st_size,
            ), f"{name}: final totals {final} against a full recount (seed {seed})"
    finally:
        faults.thaw()
        for task in pending:
            task.cancel()
        if loop is not None:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        await monitor.close()
        truth.halt()
        for name in DATASETS:  # a failed run leaves nothing behind: our runs, by pid
            for pid, _ in truth.runs_of(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        stats = sim.stats() if sim.process and sim.process.poll() is None else {}
        sim.stop()

    # Nothing lost, nothing twice, every completed response on disk, nothing left running.
    lost = duplicated = 0
    completed: dict[str, set[str]] = {name: set() for name in DATASETS}
    for rid in stats.get("completed_rids", []):
        parsed = sample_of_rid(rid)
        if parsed is not None and parsed[0] in completed:
            completed[parsed[0]].add(parsed[1])
    finals = {}
    for name in DATASETS:
        state = FolderState(out / name)
        report = check_folder(state, ids[name], clean_exit=True)
        finals[name] = report.records
        audit.records_checked += report.records
        missing = completed[name] - state.ever - error_ids(out / name)
        lost += len(missing)
        counts = Counter(record.sample_id for record in state.records_now())
        duplicated += sum(n - 1 for n in counts.values() if n > 1)
    await wait_until(lambda: not truth.helpers(), 15, "no watcher or script outlives its link")
    runs_started = sum(len(seen) for seen in truth.seen.values())
    chaos_report(
        scenario="link chaos",
        iterations=chaos_iterations,
        seed=seed,
        faults=dict(faults.counts),
        freeze_s=[round(min(faults.freeze_s or [0]), 1), round(max(faults.freeze_s or [0]), 1)],
        events=dict(events),
        errors_seen=dict(messages),
        reconnects=host.connection.generation - 1,
        runs_started=runs_started,
        process_samples=truth.samples,
        max_remote_helpers=truth.max_helpers,
        totals_checked=audit.totals_checked,
        records_final=sum(finals.values()),
        records_checked=audit.records_checked,
        lost=lost,
        duplicated=duplicated,
        elapsed_s=round(time.monotonic() - started, 1),
    )
    assert lost == 0 and duplicated == 0, (lost, duplicated)
    assert not truth.violations, truth.violations[:5]
