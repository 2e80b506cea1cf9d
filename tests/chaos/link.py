"""What really happens on a link under chaos, seen from outside gen-tui: the processes and
lock holders in /proc (`Truth`), and the faults dealt to the sshd session serving a
connection (`Faults`).

Shared by the link chaos scenario, its pinned cut-offs and the control panel's abuse test;
none of it uses backends code to decide what is true.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path

import psutil

from gen_tui.backends.hosts.connection import SSHConnection
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.watcher import PYTHON_FLAGS as WATCHER
from tests.support.polling import wait_until
from tests.support.sshd import Sshd

from .checker import flock_holders
from .procs import processes_with, writers_of

KEEPALIVE = {"keepalive_interval_s": 1, "keepalive_count_max": 2}
HEAL_TIMEOUT_S = 60.0
RAW = "raw_responses.jsonl"
LOCK = "run.lock"


def flag(cmdline: list[str], name: str) -> str | None:
    for index, word in enumerate(cmdline[:-1]):
        if word == name:
            return cmdline[index + 1]
    return None


class Truth(threading.Thread):
    """What really runs, sampled every 0.1 s from /proc, independently of gen-tui.

    For each dataset: the live `gen-tui run` processes writing it (our output folder, its
    name after `--datasets`), which of them hold its record file open for writing, and who
    holds its `run.lock`. Two live runs of one dataset, two writers, or a writer that does
    not hold the lock, seen twice 50 ms apart, is a violation.
    """

    def __init__(self, out: Path, datasets: tuple[str, ...]) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.datasets = datasets
        self.seen: dict[str, dict[tuple[int, float], float]] = {name: {} for name in datasets}
        self.violations: list[str] = []
        self.samples = 0
        self.sampled_from = 0.0
        """When the last finished sample began (monotonic): what it saw ran by then."""
        self.max_helpers = 0
        self._halt = threading.Event()

    def scan(self) -> list[tuple[int, float, list[str]]]:
        """Our processes: those naming our output folder (runs, watchers, listings) and the
        signal scripts, which name it in hex (the command line they check)."""
        return processes_with(str(self.out), str(self.out).encode().hex())

    def runs_of(
        self, name: str, procs: list[tuple[int, float, list[str]]] | None = None
    ) -> list[tuple[int, float]]:
        """(pid, start time) of the live gen-tui runs of `name` now."""
        return [
            (pid, started)
            for pid, started, cmdline in (self.scan() if procs is None else procs)
            if "gen_tui.app.cli" in cmdline[1:3]
            and "run" in cmdline
            and flag(cmdline, "--output-dir") == str(self.out)
            and flag(cmdline, "--datasets") == name
        ]

    def helpers(self, procs: list[tuple[int, float, list[str]]] | None = None) -> list[int]:
        """Remote watchers and listings (`python3 -I - ...`) and signal scripts (`sh -c ...`)."""
        return [
            pid
            for pid, _, cmdline in (self.scan() if procs is None else procs)
            if cmdline[1 : 2 + len(WATCHER)] == [*WATCHER, "-"] or cmdline[:2] == ["sh", "-c"]
        ]

    def _problems(self, name: str, procs: list[tuple[int, float, list[str]]]) -> list[str]:
        live = self.runs_of(name, procs)
        now = time.monotonic()
        for key in live:
            self.seen[name].setdefault(key, now)
        problems = []
        if len(live) > 1:
            problems.append(f"{name}: {len(live)} live gen-tui runs {[p for p, _ in live]}")
        folder = self.out / name
        writers = writers_of(folder / RAW, [pid for pid, _ in live])
        if len(writers) > 1:
            problems.append(f"{name}: {len(writers)} processes write {RAW}: {sorted(writers)}")
        holders = flock_holders(folder / LOCK)
        if writers and not writers <= holders:
            problems.append(f"{name}: writer(s) {sorted(writers)}, {LOCK} held by {holders}")
        return problems

    def sample(self) -> None:
        self.samples += 1
        began = time.monotonic()
        procs = self.scan()
        for name in self.datasets:
            if self._problems(name, procs):
                time.sleep(0.05)  # a process between its exit and its reaping: look again
                self.violations.extend(self._problems(name, self.scan()))
        self.max_helpers = max(self.max_helpers, len(self.helpers(procs)))
        self.sampled_from = began

    async def sampled_since(self, since: float, what: str) -> None:
        """Wait for a sample begun after `since`: it has seen every process started by then.
        (A scan of /proc beside a second test suite's processes can take longer than the
        0.1 s between samples: a fixed wait read a resumed run as not started.)"""
        await wait_until(lambda: self.sampled_from > since, 15, f"{what}: a /proc sample")

    def run(self) -> None:
        while not self._halt.wait(0.1):
            try:
                self.sample()
            except Exception as exc:  # keep sampling; say what went wrong
                self.violations.append(f"sampler: {type(exc).__name__}: {exc}")

    def halt(self) -> None:
        self._halt.set()
        self.join(timeout=10)

    def started_since(self, name: str, since: float) -> list[tuple[int, float]]:
        return [key for key, first in self.seen[name].items() if first >= since]


def alive(key: tuple[int, float]) -> bool:
    """Whether the process (pid, start time) still exists (a zombie counts as gone)."""
    pid, started = key
    try:
        process = psutil.Process(pid)
        return (
            abs(process.create_time() - started) < 0.01 and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.NoSuchProcess:
        return False


def serving(server: Sshd, local_port: int) -> list[psutil.Process]:
    """The sshd session process(es) whose socket is connected to our client port."""
    found = []
    for process in server.sessions():
        try:
            sockets = process.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(s.raddr and s.raddr.port == local_port for s in sockets):
            found.append(process)
    return found


class Faults:
    """SIGKILL or SIGSTOP/SIGCONT the sshd process serving our connection, and count them."""

    def __init__(self, server: Sshd, connection: SSHConnection) -> None:
        self.server = server
        self.connection = connection
        self.frozen: set[int] = set()
        self.counts: Counter[str] = Counter()
        self.freeze_s: list[float] = []
        self.last_end = 0.0  # wall clock of the last fault's end (a kill, or the SIGCONT)

    async def victims(self) -> list[psutil.Process]:
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(SSHError):
                conn = await self.connection.ready(HEAL_TIMEOUT_S)
                sockname = conn.get_extra_info("sockname")
                if sockname:
                    found = serving(self.server, int(sockname[1]))
                    if found:
                        return found
            await asyncio.sleep(0.05)
        raise AssertionError("no sshd session serves our connection")

    async def strike(self, kind: str, freeze_s: float) -> None:
        victims = await self.victims()
        if kind == "kill":
            for process in victims:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.send_signal(signal.SIGKILL)
        else:
            for process in victims:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.send_signal(signal.SIGSTOP)
                    self.frozen.add(process.pid)
            try:
                await asyncio.sleep(freeze_s)
            finally:
                self.thaw()
            self.freeze_s.append(freeze_s)
        self.counts[kind] += 1
        self.last_end = time.time()

    def thaw(self) -> None:
        for pid in list(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.frozen.discard(pid)


def shape(message: str) -> str:
    """An error message with its numbers, paths and addresses blurred, to count its kinds."""
    message = re.sub(r"/\S+", "PATH", message)
    return re.sub(r"\d+", "N", message)


async def later(delay: float, action: Awaitable[None]) -> None:
    """`action` after `delay` s: a fault that lands partway into what a step does."""
    await asyncio.sleep(delay)
    await action
