"""The launcher seam: how a server is started, found ended, stopped and found again.

The supervisor (`supervisor.py`) keeps a server alive the same way wherever it runs; what
differs is how it is started and followed: a detached process on this machine or over SSH
(`process.py`), or a Slurm batch job (`slurm_launcher.py`, over `slurm.py`). Each says
what it can tell through its ability flags, so the supervisor and the views never guess (a
Slurm job's exit has no signal of the server's own; a process started by an earlier gen-tui
has no exit code).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.hosts import RunIdentity


class LaunchError(Exception):
    """A start that failed: one line naming the recipe and the server's own last log line."""


@dataclass(frozen=True)
class Launched:
    """A server as started (or adopted): enough to follow, stop and adopt it again."""

    name: str
    """The recipe's name."""
    ref: str
    """The pid, or the batch job's id."""
    host: str
    port: int
    started_at: float
    """Wall-clock time of the start (time.time()), for the uptime."""
    log: str
    """Its log file on its host."""
    identity: RunIdentity | None = None
    """A process's identity (pid, start time, boot, command line), checked before a signal."""
    node: str | None = None
    """Where a batch job runs, once known."""


@dataclass(frozen=True)
class Exit:
    """How a server ended: a code, a signal, or neither when nobody could tell."""

    code: int | None = None
    signal: int | None = None
    reason: str = ""
    """One line: how it ended and its log's last line."""
    state: str | None = None
    """A batch job's final state as Slurm says it (FAILED, CANCELLED, TIMEOUT...)."""
    final: bool = False
    """It ended as asked (a batch job at its time limit): not restarted, said as such."""


class Launcher(ABC):
    """Start, follow, stop and adopt servers of one kind (a process, a batch job)."""

    tells_exit_code: ClassVar[bool] = False
    """Whether :meth:`exit_of` can give the code or signal (a child of this process)."""
    adopts: ClassVar[bool] = True
    """Whether servers it started outlive gen-tui and are found again by :meth:`adopt`."""
    ref_word: ClassVar[str] = "pid"
    """What :attr:`Launched.ref` is, as a line says it ("pid 8123", "job 41")."""
    queues: ClassVar[bool] = False
    """Whether a start may wait in a queue before it runs (Slurm): the startup deadline
    then counts from when it runs."""

    @abstractmethod
    async def start(self, recipe: ServerRecipe) -> Launched:
        """Start `recipe`'s server detached; raise :class:`LaunchError` when it cannot."""

    @abstractmethod
    async def exit_of(self, launched: Launched) -> Exit | None:
        """None while `launched` runs; how it ended once it has."""

    @abstractmethod
    async def stop(self, launched: Launched, grace_s: float) -> str:
        """Stop it (SIGTERM, then SIGKILL after `grace_s`; or cancel the job): one line.
        The state file is the caller's: a stop on purpose is noted there (not adopted, not
        restarted), a stop before a restart is not."""

    @abstractmethod
    async def adopt(self) -> list[Launched]:
        """The servers this launcher started earlier (another gen-tui) that still run."""

    @abstractmethod
    async def log_of(self, recipe: ServerRecipe) -> str:
        """Where `recipe`'s server writes its log on its host (running or not: `L` on a
        stopped server reads what its last run wrote)."""

    @abstractmethod
    async def last_line(self, launched: Launched) -> str:
        """Its log's last line ("" when there is none)."""

    async def tell_drain(self, launched: Launched, url: str, wait_s: float, grace_s: float) -> bool:
        """Write the drain notice the runs on `launched`'s machine read
        (backends/drain_notice.py): it drains `wait_s` at most, then stops within
        `grace_s`. False when this launcher cannot (a batch job: its runs are not told).
        Raises OSError (or the link's error) when the write fails."""
        return False

    async def end_drain(self, launched: Launched) -> None:
        """`launched` serves again: its drain notice (if any) goes."""
        return None  # a launcher that writes none has none to remove

    @abstractmethod
    async def log_size(self, launched: Launched) -> int | None:
        """Its log's size now: a log that grows means a server still loading."""
