"""Runs: see, stop, start and resume generation processes, here or on a GPU box over SSH.

A run is a process whose command line matches the host's pattern: gen-tui's own engine or a
user's `python run_inference.py ...`. Both are listed and controlled alike, as long as they
write the record layout of `records.py`.

Why it works the way it does:

- Identity, not pid: a run is remembered as host, pid, start time (`/proc/PID/stat` field
  22), boot id and command line, and all of them are checked right before every signal,
  so a reused pid is never signalled.
- Stopping is the engine's own protocol: SIGTERM to the process group (the engine stops
  dispatching and drains in-flight requests, so no completed response is lost), a grace
  period counted down for the panel, then SIGKILL. "Gone" means absent or a zombie, and the
  run's record files must have stopped growing. Over SSH the signal is sent by a `kill`
  command, because sshd refuses channel signals for root.
- Resume is "start again with a new budget": the engine continues from the records on
  disk. Without a configured template the stopped run's own command line is reused with its
  budget flags replaced, so a user's script resumes the way they launched it. A dataset whose
  lock a live writer holds, or that a live run writes, is refused and nothing starts.
- Every value that reaches a remote shell is `shlex.quote`d, and dataset names pass
  :func:`check_dataset_name` before anything runs.
- Live totals come from the stdlib watcher (`watcher.py`), run over one SSH channel (or as a
  local subprocess): only counts cross the network, and after a reconnect it resumes from
  its byte offsets, so nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import asyncssh
import psutil

from gen_tui.backends import watcher
from gen_tui.backends.aio import within
from gen_tui.backends.lock import is_locked, read_holder
from gen_tui.backends.prompts import check_dataset_name
from gen_tui.backends.records import LOCK_FILE, RAW_FILE
from gen_tui.backends.ssh import SSHConnection, SSHError, SSHOptions, describe

DEFAULT_PATTERN = watcher.DEFAULT_PATTERN
DEFAULT_GRACE_S = 30.0
KILL_WAIT_S = 10.0
START_WAIT_S = 10.0
START_SETTLE_S = 0.5
LOG_DIR = watcher.LOG_DIR
TOKEN_FLAGS = ("--max-tokens-per-dataset", "--token-budget")
SAMPLE_FLAGS = ("--max-samples",)
DATASET_FLAGS = ("--datasets",)
PATH_FLAGS = ("--prompts-dir", "--output-dir", "--tokenizer", "--config")
# Programs a command line may begin with that exec the command itself in the same pid.
_TRANSITIONAL = {"setsid", "nohup", "env"}

TickCallback = Callable[[int], object]


class RunError(Exception):
    """Something about a run that a person must read: the message says what and why."""


class ResumeRefused(RunError):
    """Starting would make a second writer (or repeat a live run): nothing was started."""


class StartError(RunError):
    """The command could not be launched, or exited at once (the message holds its log)."""


@dataclass(frozen=True)
class RunIdentity:
    """Who a run is, beyond its pid: pids are reused, start time + boot + command line are not."""

    host: str
    pid: int
    start_time: float
    boot_id: str
    cmdline: tuple[str, ...]
    start_ticks: int | None = None

    def same_process(self, other: RunIdentity) -> bool:
        if self.pid != other.pid or self.cmdline != other.cmdline:
            return False
        if self.boot_id and other.boot_id and self.boot_id != other.boot_id:
            return False
        if self.start_ticks is not None and other.start_ticks is not None:
            return self.start_ticks == other.start_ticks
        return abs(self.start_time - other.start_time) < 0.05

    def cmdline_hex(self) -> str:
        """`/proc/PID/cmdline` as the remote check compares it (hex, no trailing NUL)."""
        raw = b"\0".join(arg.encode("utf-8", "surrogateescape") for arg in self.cmdline)
        return raw.hex()

    @property
    def command(self) -> str:
        return shlex.join(self.cmdline)


class KillResult(StrEnum):
    STOPPED = "stopped"
    KILLED = "killed"
    ALREADY_GONE = "already gone"
    REFUSED = "identity changed: refused"
    STUCK = "still running after SIGKILL"


@dataclass(frozen=True)
class KillOutcome:
    """What `kill` did. `files_stable` is None when no record file of the run is known."""

    result: KillResult
    detail: str
    files_stable: bool | None = None
    sizes: dict[str, int | None] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.result}: {self.detail}"


@dataclass(frozen=True)
class Run:
    """One generation process as the run list shows it."""

    identity: RunIdentity
    datasets: tuple[str, ...]
    state: str  # "writing" (holds a dataset lock), "running", "paused" (SIGSTOP)
    elapsed_s: float
    output_dir: str
    cwd: str | None
    writing: tuple[str, ...] = ()
    gen_tui: bool = False

    @property
    def pid(self) -> int:
        return self.identity.pid

    def record_files(self) -> list[str]:
        return [posixpath.join(self.output_dir, name, RAW_FILE) for name in self.datasets]


@dataclass(frozen=True)
class Survey:
    """One look at a host: its runs, and the dataset folders under its output directory."""

    runs: tuple[Run, ...]
    output_dir: str
    """The output directory as the host resolved it (absolute, `~` expanded)."""
    folders: tuple[str, ...]


@dataclass(frozen=True)
class DatasetTotals:
    """One dataset's totals as the watcher last reported them (always a full recount's)."""

    dataset: str
    tokens: int
    samples: int
    exists: bool
    offset: int
    locked: bool
    lock_pid: int | None
    mtime: float | None
    bad_lines: int
    progress: dict[str, Any] | None
    progress_fresh: bool
    received_at: float


@dataclass(frozen=True)
class WatchStatus:
    """The stream's own state: "watching", "stale: ...", "disconnected: ...", "closed"."""

    state: str


WatchItem = DatasetTotals | WatchStatus


@runtime_checkable
class Host(Protocol):
    """A machine whose runs gen-tui lists and controls: :class:`LocalHost` or :class:`SSHHost`."""

    name: str
    output_dir: str

    async def list_runs(self, pattern: str | None = None) -> list[Run]: ...

    async def survey(self, pattern: str | None = None) -> Survey: ...

    def known_run(self, identity: RunIdentity) -> Run | None: ...

    async def kill(
        self,
        identity: RunIdentity,
        grace_s: float = DEFAULT_GRACE_S,
        on_tick: TickCallback | None = None,
        files: Sequence[str] | None = None,
    ) -> KillOutcome: ...

    async def start(
        self,
        command_argv: Sequence[str],
        log_path: str,
        cwd: str | None = None,
        settle_s: float = START_SETTLE_S,
        *,
        output_dir: str | None = None,
        expect: int | None = None,
    ) -> RunIdentity: ...

    async def resume(
        self,
        run_or_dataset: Run | str,
        new_max_tokens: int | None,
        *,
        max_samples: int | None = None,
        datasets: Sequence[str] | None = None,
        log_path: str | None = None,
    ) -> RunIdentity: ...

    def watch(
        self, output_dir: str, datasets: Sequence[str], resume: Mapping[str, str] | None = None
    ) -> Watch: ...

    async def close(self) -> None: ...


# -- command lines -----------------------------------------------------------------------


def set_flag(argv: Sequence[str], names: Sequence[str], value: str) -> list[str]:
    """Replace the value of every `--flag V` / `--flag=V` among `names`, or append the first."""
    out = list(argv)
    found = False
    index = 0
    while index < len(out):
        word = out[index]
        for name in names:
            if word == name and index + 1 < len(out):
                out[index + 1] = value
                found = True
                index += 1
                break
            if word.startswith(name + "="):
                out[index] = f"{name}={value}"
                found = True
                break
        index += 1
    if not found:
        out += [names[0], value]
    return out


def resume_argv(
    argv: Sequence[str],
    datasets: Sequence[str] | None,
    max_tokens: int | None,
    max_samples: int | None,
) -> list[str]:
    """A stopped run's command line with its dataset and budget flags set for the resume."""
    out = list(argv)
    if datasets is not None:
        out = set_flag(out, DATASET_FLAGS, ",".join(datasets))
    if max_tokens is not None:
        out = set_flag(out, TOKEN_FLAGS, str(max_tokens))
    if max_samples is not None:
        out = set_flag(out, SAMPLE_FLAGS, str(max_samples))
    return out


def is_gen_tui(argv: Sequence[str]) -> bool:
    """Whether a command line is gen-tui's own engine (else a foreign script)."""
    return watcher.is_gen_tui_run(list(argv))


def _exec_done(cmdline: Sequence[str]) -> bool:
    """Whether a freshly started pid runs the command yet (not the env, setsid or nohup that
    the command line begins with: those exec it in the same pid)."""
    return bool(cmdline) and posixpath.basename(cmdline[0]) not in _TRANSITIONAL


def _raced(host: str) -> str:
    return (
        f"{host}: another start reached the output folder after the check for a live writer "
        "that this one relied on (a second start at the same time, or a late request from a "
        "lost link); nothing was started: list the runs before starting again"
    )


def _report(output: str, kind: str) -> dict[str, Any] | None:
    """The first JSON line of type `kind` the watcher printed, if any."""
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            report = json.loads(line)
            if isinstance(report, dict) and report.get("type") == kind:
                return report
    return None


def _check_budget(value: int | None, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RunError(f"{what} must be a positive integer, got {value!r}")


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


# -- the watch stream --------------------------------------------------------------------


class LineSource(Protocol):
    async def readline(self) -> str: ...

    async def close(self) -> None: ...


Opener = Callable[[list[str]], Awaitable[LineSource]]


class Watch:
    """Async iterator of :class:`DatasetTotals` (and :class:`WatchStatus` changes).

    It runs the watcher, restarts it from the last reported offsets whenever the stream ends
    or goes quiet for longer than `stale_after_s` (three missed heartbeats), and so survives
    reconnects without recounting or double counting. `totals` holds the latest per dataset.
    """

    def __init__(
        self,
        opener: Opener,
        output_dir: str,
        datasets: Sequence[str],
        heartbeat_s: float = watcher.HEARTBEAT_S,
        interval_s: float = watcher.POLL_S,
        stale_after_s: float | None = None,
        resume: Mapping[str, str] | None = None,
    ) -> None:
        self._opener = opener
        self.output_dir = output_dir
        self.datasets = tuple(check_dataset_name(name) for name in datasets)
        self.heartbeat_s = heartbeat_s
        self.interval_s = interval_s
        self.stale_after_s = stale_after_s or 3 * heartbeat_s + 1
        self.totals: dict[str, DatasetTotals] = {}
        self.status = "starting"
        self.restarts = 0
        self.last_seen: float | None = None
        resume = resume or {}
        self._resume = {name: resume.get(name, name) for name in self.datasets}
        self._queue: asyncio.Queue[WatchItem | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def offsets(self) -> dict[str, str]:
        """Each dataset's resume argument: a new Watch seeded with it counts nothing twice."""
        return dict(self._resume)

    def args(self) -> list[str]:
        """The watcher's arguments now: each dataset from its last committed offset."""
        return [
            f"--interval={self.interval_s:g}",
            f"--heartbeat={self.heartbeat_s:g}",
            "--",
            self.output_dir,
            *(self._resume[name] for name in self.datasets),
        ]

    def __aiter__(self) -> AsyncIterator[WatchItem]:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._pump())
        return self

    async def __anext__(self) -> WatchItem:
        if self._task is None and not self._closed:
            self.__aiter__()
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._set_status("closed")
        self._queue.put_nowait(None)

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _set_status(self, state: str) -> None:
        if state != self.status:
            self.status = state
            self._queue.put_nowait(WatchStatus(state))

    async def _pump(self) -> None:
        failures = 0
        while not self._closed:
            try:
                source = await self._opener(self.args())
            except (RunError, SSHError, OSError, asyncssh.Error) as exc:
                failures += 1
                self._set_status(f"disconnected: {describe(exc)}")
                await asyncio.sleep(min(30.0, 0.5 * 2**failures))
                continue
            try:
                reason = await self._read(source)
            finally:
                with contextlib.suppress(Exception):
                    await source.close()
            if reason is None:
                return
            self.restarts += 1
            self._set_status(reason)
            failures = 0 if self.last_seen else failures + 1
            await asyncio.sleep(min(5.0, 0.25 * 2**failures))

    async def _read(self, source: LineSource) -> str | None:
        while True:
            try:
                line = await within(source.readline(), self.stale_after_s)
            except TimeoutError:
                return f"stale: no word from the watcher for {self.stale_after_s:g} s"
            except (OSError, asyncssh.Error) as exc:
                return f"disconnected: {describe(exc)}"
            if not line:
                return "disconnected: the watcher stream ended"
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a remote login banner or the like: not ours
            if not isinstance(message, dict):
                continue
            self.last_seen = time.monotonic()
            kind = message.get("type")
            if kind == "hello":
                self._set_status("watching")
            elif kind == "dataset":
                self._dataset(message)
            elif kind == "error":
                self._set_status(f"failed: {message.get('message')}")
                self._queue.put_nowait(None)
                return None

    def _dataset(self, message: dict[str, Any]) -> None:
        name = message.get("dataset")
        if name not in self._resume:
            return
        self._resume[name] = str(message["resume"])
        totals = DatasetTotals(
            dataset=name,
            tokens=int(message["tokens"]),
            samples=int(message["samples"]),
            exists=bool(message["exists"]),
            offset=int(message["offset"]),
            locked=bool(message["locked"]),
            lock_pid=message.get("lock_pid"),
            mtime=message.get("mtime"),
            bad_lines=int(message.get("bad_lines", 0)),
            progress=message.get("progress"),
            progress_fresh=bool(message.get("progress_fresh")),
            received_at=time.time(),
        )
        self.totals[name] = totals
        self._queue.put_nowait(totals)


# -- the shared algorithms ---------------------------------------------------------------


class _HostBase:
    """List, kill, start, resume and watch, written once over a few per-host primitives."""

    name: str
    output_dir: str

    def __init__(
        self,
        name: str,
        output_dir: str,
        pattern: str | None = None,
        template: Sequence[str] | str | None = None,
    ) -> None:
        self.name = name
        self.output_dir = output_dir
        self.pattern = pattern or DEFAULT_PATTERN
        re.compile(self.pattern)
        self.template = shlex.split(template) if isinstance(template, str) else template
        self._runs: dict[tuple[int, int | None], Run] = {}
        self._by_dataset: dict[str, Run] = {}

    # primitives (per host)

    async def _ps(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def _signal_wait(
        self, identity: RunIdentity, sig: str, wait_s: float, on_tick: TickCallback | None
    ) -> tuple[str, str]:
        """Check identity, signal, wait: ("refused"|"absent"|"gone"|"alive", detail)."""
        raise NotImplementedError

    async def _sizes(self, paths: Sequence[str]) -> list[dict[str, int | None]]:
        """Sizes of `paths`, sampled three times half a second apart."""
        raise NotImplementedError

    async def _spawn(
        self,
        argv: Sequence[str],
        log_path: str,
        cwd: str | None,
        output_dir: str,
        expect: int | None,
    ) -> int:
        """Start detached under `output_dir`'s start guard (`watcher.guarded_start`): the pid.

        Raises :class:`ResumeRefused` when a start came after the check `expect` was read in.
        """
        raise NotImplementedError

    async def _log_tail(self, log_path: str) -> str:
        raise NotImplementedError

    async def _open_watcher(self, args: list[str]) -> LineSource:
        raise NotImplementedError

    def _abs_output_dir(self) -> str:
        return self.output_dir

    # list

    def _runs_from_report(self, report: dict[str, Any]) -> list[Run]:
        locks: dict[str, dict[str, Any]] = report.get("locks", {})
        default_out = str(report.get("output_dir") or self._abs_output_dir())
        now = float(report.get("time") or time.time())
        runs = []
        for proc in report.get("procs", []):
            pid = int(proc["pid"])
            identity = RunIdentity(
                host=self.name,
                pid=pid,
                start_time=float(proc["start_time"]),
                boot_id=str(report.get("boot_id") or ""),
                cmdline=tuple(proc["cmdline"]),
                start_ticks=proc.get("start_ticks"),
            )
            args = proc.get("args") or {}
            names = list(args.get("datasets") or proc.get("prompt_names") or [])
            out_dir = proc.get("output_dir_abs") or default_out
            writing = []
            for folder, entries in locks.items():
                for dataset, info in entries.items():
                    if info.get("locked") and info.get("pid") == pid:
                        writing.append(dataset)
                        if folder != out_dir and not names:
                            out_dir = folder
            for dataset in writing:
                if dataset not in names:
                    names.append(dataset)
            state = proc.get("state", "")
            run = Run(
                identity=identity,
                datasets=tuple(names),
                state="paused" if state in ("T", "t") else ("writing" if writing else "running"),
                elapsed_s=max(0.0, now - identity.start_time),
                output_dir=out_dir,
                cwd=proc.get("cwd"),
                writing=tuple(writing),
                gen_tui=is_gen_tui(identity.cmdline),
            )
            runs.append(run)
            self._runs[(pid, identity.start_ticks)] = run
            if out_dir == default_out:  # B2 elsewhere on the machine is another dataset
                for dataset in names:
                    self._by_dataset[dataset] = run
        return runs

    async def list_runs(self, pattern: str | None = None) -> list[Run]:
        """Every process matching `pattern` (default: `run_inference` and `gen-tui run`)."""
        return (await self.survey(pattern)).runs

    async def survey(self, pattern: str | None = None) -> Survey:
        """The runs, and the dataset folders of the host's output directory, in one look."""
        report = await self._ps(pattern or self.pattern, self.output_dir)
        runs = sorted(self._runs_from_report(report), key=lambda run: run.identity.start_time)
        out_dir = str(report.get("output_dir") or self._abs_output_dir())
        folders = report.get("locks", {}).get(out_dir, {})
        return Survey(
            tuple(runs), out_dir, tuple(name for name in folders if isinstance(name, str))
        )

    def known_run(self, identity: RunIdentity) -> Run | None:
        run = self._runs.get((identity.pid, identity.start_ticks))
        return run if run is not None and run.identity.same_process(identity) else None

    # kill

    async def kill(
        self,
        identity: RunIdentity,
        grace_s: float = DEFAULT_GRACE_S,
        on_tick: TickCallback | None = None,
        files: Sequence[str] | None = None,
    ) -> KillOutcome:
        """SIGTERM the run's group, wait up to `grace_s` (ticking), then SIGKILL; verify.

        The identity is checked right before each signal. `files` are the record files to
        watch stop growing (default: those of the datasets the run list gave it).
        """
        if identity.host != self.name:
            raise RunError(f"run {identity.pid} belongs to host {identity.host}, not {self.name}")
        if files is None:
            run = self.known_run(identity)
            files = run.record_files() if run is not None else []
        verdict, detail = await self._signal_wait(identity, "TERM", grace_s, on_tick)
        if verdict == "refused":
            return KillOutcome(KillResult.REFUSED, detail)
        if verdict == "absent":
            return KillOutcome(KillResult.ALREADY_GONE, f"pid {identity.pid} had already exited")
        if verdict == "gone":
            result = KillResult.STOPPED
            detail = f"pid {identity.pid} exited after SIGTERM"
        else:
            verdict, detail = await self._signal_wait(identity, "KILL", KILL_WAIT_S, None)
            if verdict in ("absent", "refused"):
                # It went away by itself between the grace period's end and the check.
                result = KillResult.STOPPED
                detail = f"pid {identity.pid} exited after SIGTERM, at the end of the grace"
            elif verdict == "gone":
                result = KillResult.KILLED
                detail = (
                    f"pid {identity.pid} ignored SIGTERM for {grace_s:g} s and was killed (SIGKILL)"
                )
            else:
                return KillOutcome(
                    KillResult.STUCK,
                    f"pid {identity.pid} is still there {KILL_WAIT_S:g} s after SIGKILL "
                    "(uninterruptible I/O?)",
                )
        if not files:
            return KillOutcome(result, detail)
        try:
            samples = await self._sizes(files)
        except SSHError as exc:
            # The run is gone (the signal script saw it): say so, not the link's error.
            return KillOutcome(
                result, f"{detail}; its record files could not be checked ({describe(exc)})"
            )
        stable = len(samples) >= 2 and samples[-1] == samples[-2]
        if not stable:
            detail += "; its record files are STILL GROWING: another writer?"
        return KillOutcome(result, detail, stable, samples[-1] if samples else {})

    # start

    async def start(
        self,
        command_argv: Sequence[str],
        log_path: str,
        cwd: str | None = None,
        settle_s: float = START_SETTLE_S,
        *,
        output_dir: str | None = None,
        expect: int | None = None,
    ) -> RunIdentity:
        """Launch detached (own session, output to `log_path`); return the new identity.

        The launch happens under the output folder's start guard: `expect` is the folder's
        start count as read by the check for a live writer this start relies on, and a start
        that finds it moved (another start came after that check) is refused. Waits until the
        pid runs the command itself (not the env, setsid or nohup it begins with) and is still
        alive `settle_s` after the launch, so a command that dies at once (a typo, a missing
        file) is reported with the end of its log instead of being listed as a run.
        """
        argv = [str(word) for word in command_argv]
        if not argv:
            raise StartError("empty command")
        launched = time.monotonic()
        folder = output_dir or self._abs_output_dir()
        pid = await self._spawn(argv, log_path, cwd, folder, expect)
        try:
            return await self._started(argv, pid, log_path, launched, settle_s)
        except SSHError as exc:
            raise StartError(
                f"{self.name}: started pid {pid}, but the link was lost before it could be "
                f"checked ({describe(exc)}); it may be running: list the runs before starting "
                "again"
            ) from None

    async def _started(
        self,
        argv: list[str],
        pid: int,
        log_path: str,
        launched: float,
        settle_s: float,
    ) -> RunIdentity:
        """Wait until `pid` runs the command itself and is still alive `settle_s` after it."""
        identity: RunIdentity | None = None
        while True:
            report = await self._ps(self.pattern, None, pids=[pid])
            procs = report.get("procs", [])
            proc = procs[0] if procs else None
            if proc is None or proc.get("state") in ("Z", "X"):
                tail = await self._log_tail(log_path)
                raise StartError(
                    f"{shlex.join(argv)} exited at once; the end of {log_path}:\n{tail}"
                )
            if identity is None and _exec_done(proc["cmdline"]):
                identity = RunIdentity(
                    host=self.name,
                    pid=pid,
                    start_time=float(proc["start_time"]),
                    boot_id=str(report.get("boot_id") or ""),
                    cmdline=tuple(proc["cmdline"]),
                    start_ticks=proc.get("start_ticks"),
                )
            elapsed = time.monotonic() - launched
            if identity is not None:
                if elapsed >= settle_s:
                    return identity
                await asyncio.sleep(settle_s - elapsed)
                continue
            if elapsed > START_WAIT_S:
                raise StartError(f"pid {pid} did not exec {argv[0]} within {START_WAIT_S:g} s")
            await asyncio.sleep(0.05)

    # resume

    def _command_for(
        self, run: Run | None, holder: dict[str, Any], dataset: str
    ) -> tuple[list[str], str | None]:
        """The command line to resume with, and its working directory."""
        if run is not None:
            return list(run.identity.cmdline), run.cwd
        argv = holder.get("argv")
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            cwd = holder.get("cwd") if isinstance(holder.get("cwd"), str) else None
            executable = holder.get("executable")
            if argv[0].endswith(".py"):
                # `python -m gen_tui.app.cli` records the module's path as argv[0].
                argv = [executable, *argv] if isinstance(executable, str) else []
            relative = [
                word
                for flag in PATH_FLAGS
                if (word := watcher.flag_value(argv, flag)) and not posixpath.isabs(word)
            ]
            if argv and posixpath.isabs(argv[0]) and (cwd or not relative):
                return argv, cwd
        raise RunError(
            f"{dataset}: no command line to resume it with (no run seen writing it, and its "
            f"lock file names no usable one); resume it from the run list, or configure a "
            "run command template for this host"
        )

    async def resume(
        self,
        run_or_dataset: Run | str,
        new_max_tokens: int | None,
        *,
        max_samples: int | None = None,
        datasets: Sequence[str] | None = None,
        log_path: str | None = None,
    ) -> RunIdentity:
        """Start a stopped run's datasets again with a new budget; refuse a second writer.

        `run_or_dataset` is a :class:`Run` from the list (its datasets, or `datasets` of them)
        or a dataset name (then the last run seen writing it, or the host's template).
        """
        if isinstance(run_or_dataset, Run):
            run: Run | None = run_or_dataset
            targets = tuple(datasets if datasets is not None else run_or_dataset.datasets)
        else:
            targets = (run_or_dataset,) if datasets is None else tuple(datasets)
            run = self._by_dataset.get(check_dataset_name(run_or_dataset))
        for name in targets:
            check_dataset_name(name)
        if not targets:
            raise RunError("nothing to resume: the run writes no known dataset")
        _check_budget(new_max_tokens, "the token budget")
        _check_budget(max_samples, "the sample budget")
        out_dir = run.output_dir if run is not None else self._abs_output_dir()
        try:
            report = await self._ps(self.pattern, out_dir)
        except SSHError as exc:
            raise RunError(
                f"{', '.join(targets)}: cannot check for a live writer ({describe(exc)}); "
                "nothing was started"
            ) from None
        out_dir = str(report.get("output_dir") or out_dir)
        locks = report.get("locks", {}).get(out_dir, {})
        for name in targets:
            info = locks.get(name) or {}
            if info.get("locked"):
                holder = info.get("holder") or {}
                raise ResumeRefused(
                    f"{name}: a live writer holds its lock (pid {info.get('pid') or '?'} on "
                    f"{holder.get('host', self.name)}); stop that run first. Nothing was started"
                )
        live = self._runs_from_report(report)
        for other in live:
            if run is not None and other.identity.same_process(run.identity):
                raise ResumeRefused(
                    f"run {run.pid} is still running; stop it first. Nothing was started"
                )
            busy = sorted(set(targets) & set(other.datasets))
            if busy and other.output_dir == out_dir:
                command = shlex.join(other.identity.cmdline)[:80]
                raise ResumeRefused(
                    f"{', '.join(busy)}: run {other.pid} ({command}) is writing it; stop that "
                    "run first. Nothing was started"
                )
        if self.template is not None:
            argv = [
                *self.template,
                "--datasets",
                ",".join(targets),
                *(["--max-tokens-per-dataset", str(new_max_tokens)] if new_max_tokens else []),
                *(["--max-samples", str(max_samples)] if max_samples else []),
            ]
            cwd = None
        else:
            holder = (locks.get(targets[0]) or {}).get("holder") or {}
            argv, cwd = self._command_for(run, holder, targets[0])
            all_of_run = run is not None and tuple(targets) == tuple(run.datasets)
            has_flag = watcher.flag_value(argv, *DATASET_FLAGS) is not None
            argv = resume_argv(
                argv,
                targets if (has_flag or not all_of_run) else None,
                new_max_tokens,
                max_samples,
            )
        log = log_path or posixpath.join(out_dir, LOG_DIR, f"{targets[0]}-{_stamp()}.log")
        seq = report.get("start_seq")
        return await self.start(
            argv,
            log,
            cwd=cwd,
            output_dir=out_dir,
            expect=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        )

    # watch

    def watch(
        self,
        output_dir: str,
        datasets: Sequence[str],
        resume: Mapping[str, str] | None = None,
    ) -> Watch:
        """Live per-dataset totals of `datasets` under `output_dir` (names checked first).

        `resume` is an earlier Watch's `offsets()`, to carry on where it stopped.
        """
        return Watch(self._open_watcher, output_dir, datasets, resume=resume)

    async def close(self) -> None:
        return None


# -- this machine ------------------------------------------------------------------------


def _boot_id() -> str:
    return watcher.boot_id() or f"boot@{psutil.boot_time():.0f}"


def _local_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class _ProcessLines:
    """A local watcher subprocess as a line source."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def readline(self) -> str:
        assert self.process.stdout is not None
        return (await self.process.stdout.readline()).decode("utf-8", "replace")

    async def close(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        await self.process.wait()


class LocalHost(_HostBase):
    """This machine, through psutil: the same interface as :class:`SSHHost`."""

    def __init__(
        self,
        output_dir: str | Path,
        name: str = "local",
        pattern: str | None = None,
        template: Sequence[str] | str | None = None,
    ) -> None:
        super().__init__(name, str(Path(output_dir).expanduser().resolve()), pattern, template)
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def _reap(self) -> None:
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def _ps_sync(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None
    ) -> dict[str, Any]:
        self._reap()
        regex = re.compile(pattern)
        seq = watcher.start_seq(output_dir) if output_dir else None  # before the processes
        procs = []
        if pids is None:
            candidates = psutil.process_iter()
        else:
            candidates = []
            for pid in pids:
                with contextlib.suppress(psutil.Error):
                    candidates.append(psutil.Process(pid))
        me = os.getpid()
        for process in candidates:
            if process.pid == me:
                continue
            try:
                with process.oneshot():
                    cmdline = process.cmdline()
                    status = process.status()
                    start = process.create_time()
                    pgid = os.getpgid(process.pid)
                    ppid = process.ppid()
                    try:
                        cwd: str | None = process.cwd()
                    except psutil.AccessDenied:
                        cwd = None
            except (psutil.Error, OSError):
                continue
            zombie = status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
            if pids is None and (zombie or not watcher.is_candidate(cmdline, regex)):
                continue
            args = watcher.run_args(cmdline)
            prompts = watcher._resolve(args["prompts_dir"], cwd)
            procs.append(
                {
                    "pid": process.pid,
                    "ppid": ppid,
                    "pgid": pgid,
                    "state": "Z" if zombie else ("T" if status == psutil.STATUS_STOPPED else "R"),
                    "start_ticks": _local_ticks(process.pid),
                    "start_time": start,
                    "cmdline": cmdline,
                    "cwd": cwd,
                    "args": args,
                    "prompt_names": watcher.prompt_names(prompts) if prompts else [],
                    "output_dir_abs": watcher.output_dir_of(cmdline, cwd),
                }
            )
        dirs = {output_dir} if output_dir else set()
        dirs |= {p["output_dir_abs"] for p in procs if p["output_dir_abs"]}
        locks: dict[str, dict[str, Any]] = {}
        for folder in sorted(dirs):
            entries: dict[str, Any] = {}
            root = Path(folder)
            if root.is_dir():
                for lock in sorted(root.glob(f"*/{LOCK_FILE}")):
                    name = lock.parent.name
                    if not watcher._NAME.match(name):
                        continue
                    holder = read_holder(lock)
                    locked = is_locked(lock)
                    pid = (
                        holder.get("pid") if locked and isinstance(holder.get("pid"), int) else None
                    )
                    entries[name] = {"locked": locked, "pid": pid, "holder": holder}
            locks[folder] = entries
        return {
            "type": "ps",
            "boot_id": _boot_id(),
            "time": time.time(),
            "output_dir": self.output_dir,
            "start_seq": seq,
            "procs": procs,
            "locks": locks,
        }

    async def _ps(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None = None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self._ps_sync, pattern, output_dir, pids)

    def _check(self, identity: RunIdentity) -> tuple[str, str, psutil.Process | None]:
        """("alive" | "gone" | "changed", why, process) for `identity` right now."""
        if identity.boot_id and identity.boot_id != _boot_id():
            return "changed", "the machine rebooted since the run was listed", None
        try:
            process = psutil.Process(identity.pid)
            with process.oneshot():
                status = process.status()
                if status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    child = self._children.get(identity.pid)
                    if child is not None:
                        child.poll()
                    return "gone", "zombie", process
                start = process.create_time()
                cmdline = tuple(process.cmdline())
        except psutil.NoSuchProcess:
            return "gone", "absent", None
        except psutil.Error as exc:
            return "changed", f"cannot inspect pid {identity.pid}: {exc}", None
        current = RunIdentity(
            identity.host,
            identity.pid,
            start,
            identity.boot_id,
            cmdline,
            _local_ticks(identity.pid) if identity.start_ticks is not None else None,
        )
        if current.cmdline != identity.cmdline:
            return "changed", f"pid {identity.pid} now runs another command line", process
        if not current.same_process(identity):
            return "changed", f"pid {identity.pid} now belongs to another process", process
        return "alive", "", process

    async def _signal_wait(
        self, identity: RunIdentity, sig: str, wait_s: float, on_tick: TickCallback | None
    ) -> tuple[str, str]:
        verdict, why, _ = self._check(identity)
        if verdict == "gone":
            return "absent", why
        if verdict == "changed":
            return "refused", why
        signum = signal.Signals[f"SIG{sig}"]
        try:
            if os.getpgid(identity.pid) == identity.pid:
                os.killpg(identity.pid, signum)
            else:
                os.kill(identity.pid, signum)
        except ProcessLookupError:
            return "absent", "exited before the signal"
        started = time.monotonic()
        shown = 0
        while True:
            verdict, why, _ = self._check(identity)
            if verdict != "alive":
                return "gone", why
            elapsed = time.monotonic() - started
            if elapsed >= wait_s:
                return "alive", ""
            if on_tick is not None and int(elapsed) > shown:
                shown = int(elapsed)
                await _call(on_tick, max(0, round(wait_s - shown)))
            await asyncio.sleep(0.1)

    async def _sizes(self, paths: Sequence[str]) -> list[dict[str, int | None]]:
        samples = []
        for index in range(3):
            sample: dict[str, int | None] = {}
            for path in paths:
                try:
                    sample[path] = os.stat(path).st_size
                except OSError:
                    sample[path] = None
            samples.append(sample)
            if index < 2:
                await asyncio.sleep(0.5)
        return samples

    async def _spawn(
        self,
        argv: Sequence[str],
        log_path: str,
        cwd: str | None,
        output_dir: str,
        expect: int | None,
    ) -> int:
        try:
            child = await asyncio.to_thread(
                watcher.guarded_launch, output_dir, expect, list(argv), log_path, cwd
            )
        except watcher.StaleStart:
            raise ResumeRefused(_raced(self.name)) from None
        except watcher.StartFailed as exc:
            raise StartError(f"{self.name}: {exc}") from None
        self._children[child.pid] = child
        return child.pid

    async def _log_tail(self, log_path: str) -> str:
        try:
            data = Path(log_path).expanduser().read_bytes()[-2000:]
        except OSError as exc:
            return f"(cannot read it: {exc})"
        return data.decode("utf-8", "replace")

    async def _open_watcher(self, args: list[str]) -> LineSource:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert process.stdin is not None
        process.stdin.write(watcher.source().encode())
        await process.stdin.drain()
        process.stdin.close()
        return _ProcessLines(process)

    async def close(self) -> None:
        self._reap()


async def _call(callback: TickCallback, value: int) -> None:
    result = callback(value)
    if asyncio.iscoroutine(result):
        await result


# -- a host over SSH ---------------------------------------------------------------------


def rquote(path: str) -> str:
    """Quote a remote path for sh, keeping a leading `~/` meaning the remote home."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


# Check a process's identity, signal it (its group when it leads one), then wait for it to
# be gone, printing "tick N" every second. Every value is substituted already quoted.
_SIGNAL_SCRIPT = r"""
p={pid}; want={ticks}; boot={boot}; cmd={cmd}; sig={sig}; wait_cs={wait_cs}
probe() {{
  s=$(cat /proc/$p/stat 2>/dev/null) || {{ echo gone; return; }}
  r=${{s##*') '}}
  set -f; set -- $r; set +f
  case $1 in Z|X|x) echo gone; return;; esac
  if [ "$want" != "-" ] && [ "${{20}}" != "$want" ]; then echo changed; return; fi
  echo "alive $3"
}}
cs() {{ read u rest < /proc/uptime; echo "${{u%.*}}${{u#*.}}"; }}
if [ -n "$boot" ] && [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" != "$boot" ]; then
  echo "refused the machine rebooted since the run was listed"; exit 0
fi
st=$(probe)
case $st in
  gone) echo absent; exit 0;;
  changed) echo "refused pid $p now belongs to another process (other start time)"; exit 0;;
esac
c=$(od -An -v -tx1 /proc/$p/cmdline | tr -d ' \n')
c=${{c%00}}
if [ "$c" != "$cmd" ]; then echo "refused pid $p now runs another command line"; exit 0; fi
pg=${{st#alive }}
if [ "$pg" = "$p" ]; then kill -s $sig -- -$p 2>/dev/null; else kill -s $sig $p 2>/dev/null; fi ||
  {{ echo absent; exit 0; }}
echo sent
t0=$(cs); last=0
while :; do
  case $(probe) in alive*) ;; *) echo gone; exit 0;; esac
  now=$(cs)
  [ $((now - t0)) -ge $wait_cs ] && break
  el=$(( (now - t0) / 100 ))
  if [ $el -gt $last ]; then last=$el; echo "tick $el"; fi
  sleep 0.1
done
echo alive
"""

_SIZES_SCRIPT = r"""
k=0
while [ $k -lt 3 ]; do
  for f in {files}; do stat -c %s "$f" 2>/dev/null || echo -; done
  echo --
  k=$((k + 1))
  [ $k -lt 3 ] && sleep 0.5
done
exit 0
"""


class _SSHLines:
    """A remote watcher's channel as a line source; closing it ends the remote watcher."""

    def __init__(self, process: asyncssh.SSHClientProcess[str]) -> None:
        self.process = process

    async def readline(self) -> str:
        return await self.process.stdout.readline()

    async def close(self) -> None:
        self.process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.process.wait_closed(), 5)


class SSHHost(_HostBase):
    """A host reached over SSH; needs only `sh`, coreutils, `kill` and `python3` (3.8+)."""

    def __init__(
        self,
        name: str,
        target: str,
        output_dir: str,
        *,
        options: SSHOptions | None = None,
        pattern: str | None = None,
        template: Sequence[str] | str | None = None,
        python: str = "python3",
        connection: SSHConnection | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(name, output_dir.rstrip("/") or "/", pattern, template)
        self.python = python
        self.connection = connection or SSHConnection(target, options, on_state=on_state)
        self._expanded_output: str | None = None

    async def connect(self) -> None:
        """Connect now (raises :class:`SSHError` with a clear message); later drops heal."""
        await self.connection.start()

    def _abs_output_dir(self) -> str:
        return self._expanded_output or self.output_dir

    async def _sh(self, script: str, timeout: float = 60.0) -> asyncssh.SSHCompletedProcess:
        """Run a POSIX sh script whatever the login shell is (the script is quoted as one word)."""
        return await self.connection.run(f"sh -c {shlex.quote(script)}", timeout=timeout)

    async def _python(self, args: Sequence[str], timeout: float = 60.0) -> str:
        """Run the watcher source with `python3 - ARGS` and return its stdout."""
        command = " ".join([shlex.quote(self.python), "-", *(shlex.quote(a) for a in args)])
        result = await self.connection.run(command, input=watcher.source(), timeout=timeout)
        if result.exit_status != 0:
            refusal = _report(str(result.stdout or ""), "error")  # the watcher's own
            if refusal is not None:
                raise RunError(f"{self.name}: {refusal.get('message')}")
            stderr = str(result.stderr or "").strip().splitlines()
            why = stderr[-1] if stderr else f"exit status {result.exit_status}"
            raise RunError(
                f"{self.name}: {self.python} failed ({why}); the host needs Python 3.8 or newer "
                "as python3"
            )
        return str(result.stdout or "")

    async def _ps(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None = None
    ) -> dict[str, Any]:
        args = [f"--ps={pattern}"]
        if output_dir:
            args.append(f"--output-dir={output_dir}")
        if pids is not None:
            args.append("--pids=" + ",".join(str(int(p)) for p in pids))
        report = _report(await self._python(args), "ps")
        if report is None:
            raise RunError(f"{self.name}: the process listing printed nothing usable")
        if output_dir == self.output_dir and report.get("output_dir"):
            self._expanded_output = str(report["output_dir"])
        return report

    async def _signal_wait(
        self, identity: RunIdentity, sig: str, wait_s: float, on_tick: TickCallback | None
    ) -> tuple[str, str]:
        if sig not in ("TERM", "KILL"):
            raise RunError(f"unsupported signal {sig}")
        script = _SIGNAL_SCRIPT.format(
            pid=int(identity.pid),
            ticks=shlex.quote(str(identity.start_ticks) if identity.start_ticks else "-"),
            boot=shlex.quote(identity.boot_id),
            cmd=shlex.quote(identity.cmdline_hex()),
            sig=sig,
            wait_cs=max(0, round(wait_s * 100)),
        )
        try:
            process = await self.connection.open_process(f"sh -c {shlex.quote(script)}")
        except SSHError as exc:  # the script may or may not have reached the host
            raise RunError(
                f"{self.name}: link lost while stopping pid {identity.pid} ({describe(exc)}); "
                "list the runs again before retrying"
            ) from None
        try:
            process.stdin.write_eof()
            while True:
                try:
                    line = await within(process.stdout.readline(), wait_s + 30)
                except TimeoutError:
                    raise RunError(
                        f"{self.name}: no answer while stopping pid {identity.pid}"
                    ) from None
                except (OSError, asyncssh.Error) as exc:
                    raise RunError(
                        f"{self.name}: link lost while stopping pid {identity.pid} "
                        f"({describe(exc)}); list the runs again before retrying"
                    ) from None
                if not line:
                    raise RunError(
                        f"{self.name}: link lost while stopping pid {identity.pid}; "
                        "list the runs again before retrying"
                    )
                word, _, rest = line.strip().partition(" ")
                if word == "tick" and on_tick is not None:
                    await _call(on_tick, max(0, round(wait_s - int(rest))))
                elif word in ("refused", "absent", "gone", "alive"):
                    return word, rest
        finally:
            process.close()

    async def _sizes(self, paths: Sequence[str]) -> list[dict[str, int | None]]:
        script = _SIZES_SCRIPT.format(files=" ".join(rquote(p) for p in paths))
        result = await self._sh(script)
        samples: list[dict[str, int | None]] = []
        current: list[int | None] = []
        for line in str(result.stdout or "").splitlines():
            if line == "--":
                samples.append(dict(zip(paths, current, strict=False)))
                current = []
            else:
                current.append(int(line) if line.isdigit() else None)
        return samples

    async def _spawn(
        self,
        argv: Sequence[str],
        log_path: str,
        cwd: str | None,
        output_dir: str,
        expect: int | None,
    ) -> int:
        spec = {
            "output_dir": output_dir,
            "argv": list(argv),
            "log": log_path,
            "cwd": cwd,
            "expect": expect,
        }
        try:
            output = await self._python([f"--start={json.dumps(spec)}"], timeout=30)
        except SSHError as exc:
            raise StartError(
                f"{self.name}: link lost while starting ({describe(exc)}); list the runs "
                "before starting again, it may have started"
            ) from None
        report = _report(output, "start") or {}
        if "refused" in report:
            raise ResumeRefused(_raced(self.name))
        pid = report.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            why = report.get("error") or f"no pid in {output[-300:]!r}"
            raise StartError(f"{self.name}: {why}")
        return pid

    async def _log_tail(self, log_path: str) -> str:
        result = await self._sh(f"tail -c 2000 {rquote(log_path)} 2>&1")
        return str(result.stdout or "")

    async def _open_watcher(self, args: list[str]) -> LineSource:
        command = " ".join([shlex.quote(self.python), "-", *(shlex.quote(a) for a in args)])
        process = await self.connection.open_process(command, timeout=30)
        process.stdin.write(watcher.source())
        process.stdin.write_eof()
        return _SSHLines(process)

    async def close(self) -> None:
        await self.connection.close()


def open_host(
    target: str | None,
    output_dir: str,
    *,
    name: str | None = None,
    options: SSHOptions | None = None,
    pattern: str | None = None,
    template: Sequence[str] | str | None = None,
) -> LocalHost | SSHHost:
    """`None`/"local" -> :class:`LocalHost`; anything else is an SSH target (alias or user@host)."""
    if target in (None, "", "local", "localhost"):
        return LocalHost(output_dir, name=name or "local", pattern=pattern, template=template)
    assert target is not None
    return SSHHost(
        name or target, target, output_dir, options=options, pattern=pattern, template=template
    )
