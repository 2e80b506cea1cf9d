"""What a host is made of: the primitives each kind of host supplies (run the watcher, a
shell script, a guarded detached start) and what is read through them once (the process
listing, signals, file sizes, the runs seen).

Why apart from `base.py`'s :class:`Host`: the start and stop algorithms (`start.py`,
`stop.py`) run over these primitives alone, and `Host` calls them; with the primitives here,
neither imports the other's module back.
"""

from __future__ import annotations

import re
import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.hosts.kill import TickCallback, signal_and_wait
from gen_tui.backends.hosts.ps import PsReport, RunIdentity, RunProcess, runs_in
from gen_tui.backends.hosts.scripts import parse_sizes, sizes_script
from gen_tui.backends.hosts.watch import LineSource
from gen_tui.backends.store.tails import Tail

DEFAULT_PATTERN = watcher.DEFAULT_PATTERN


@dataclass(frozen=True)
class StartSpec:
    """One detached start: the watcher's `--start` request, or its in-process call."""

    argv: list[str]
    log: str
    cwd: str | None
    output_dir: str
    expect: int | None
    """The folder's start count the check for a live writer read (None: start regardless)."""
    env: dict[str, str] | None = None
    """Added to the host's environment for the command (a server recipe's `env`)."""
    exit_file: str | None = None
    """Where a shell wrapping the command writes its exit status (a server over SSH:
    watcher/starts.py's EXIT_WRAPPER); None: the command runs as started."""


class HostPrimitives(ABC):
    """A machine's primitives: a subclass (through :class:`Host`) says how to run the
    watcher, a shell script and a detached start there; the rest is read through them."""

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
        self._runs: dict[tuple[int, int | None], RunProcess] = {}
        self._by_dataset: dict[str, RunProcess] = {}
        self._expanded_output: str | None = None

    # primitives (per host)

    @abstractmethod
    async def _ps_raw(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None
    ) -> Mapping[str, Any]:
        """The watcher's `ps` report (`watcher.ps`) as run on the host."""

    @abstractmethod
    async def _open_sh(self, script: str) -> LineSource:
        """Start a POSIX sh script on the host; its output line by line."""

    @abstractmethod
    async def _sh(self, script: str, timeout: float = 60.0) -> str:
        """Run a POSIX sh script on the host to its end: its stdout."""

    @abstractmethod
    async def _spawn(self, spec: StartSpec) -> int:
        """Start detached under the output folder's start guard (`watcher.guarded_start`):
        the pid. Raises :class:`ResumeRefused` when a start came after the check that
        `spec.expect` was read in."""

    @abstractmethod
    async def _open_watcher(self, args: list[str]) -> LineSource:
        """Start the watcher on the host with `args`; its JSON lines."""

    @abstractmethod
    async def _tail_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The watcher's `--tail` report (`watcher.tail_request`) as run on the host."""

    @abstractmethod
    async def _heads_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The watcher's `--heads` report (`watcher.heads_request`) as run on the host."""

    async def close(self) -> None:
        return None

    # what the primitives give, read once

    def _abs_output_dir(self) -> str:
        return self._expanded_output or self.output_dir

    async def _ps(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None = None
    ) -> PsReport:
        report = PsReport.parse(await self._ps_raw(pattern, output_dir, pids), self.name)
        if output_dir == self.output_dir and report.output_dir:
            self._expanded_output = report.output_dir
        return report

    async def _signal_wait(
        self, identity: RunIdentity, sig: str, wait_s: float, on_tick: TickCallback | None
    ) -> tuple[str, str]:
        return await signal_and_wait(self._open_sh, self.name, identity, sig, wait_s, on_tick)

    async def _sizes(self, paths: Sequence[str], samples: int = 3) -> list[dict[str, int | None]]:
        """Sizes of `paths`, sampled `samples` times half a second apart."""
        return parse_sizes(await self._sh(sizes_script(paths, samples)), paths)

    async def _log_tail(self, log_path: str) -> str:
        report = Tail.parse(await self._tail_raw({"path": log_path, "max_bytes": 2000}), 20)
        return report.error or "\n".join(report.lines)

    # the runs seen

    def _runs_from_report(self, report: PsReport) -> list[RunProcess]:
        default_out = report.output_dir or self._abs_output_dir()
        runs = runs_in(report, self.name, default_out, report.time or time.time())
        for run in runs:
            self._runs[(run.pid, run.identity.start_ticks)] = run
            if run.output_dir == default_out:  # B2 elsewhere on the machine is another dataset
                # What `r` on a dataset resumes: a run that wrote it, or ours naming it;
                # never another user's that only names it (their command line is no writer).
                for dataset in run.datasets if run.mine else run.writing:
                    self._by_dataset[dataset] = run
        return runs

    def known_run(self, identity: RunIdentity) -> RunProcess | None:
        run = self._runs.get((identity.pid, identity.start_ticks))
        return run if run is not None and run.identity.same_process(identity) else None
