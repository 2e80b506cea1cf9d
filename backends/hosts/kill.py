"""Stopping a run: what `kill` reports, and reading the signal script's answer.

Stopping is the engine's own protocol: SIGTERM to the process group (the engine stops
dispatching and drains in-flight requests, so no completed response is lost), a grace
period counted down for the panel, then SIGKILL. "Gone" means absent or a zombie, and the
run's record files must have stopped growing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import asyncssh

from gen_tui.backends.aio import within
from gen_tui.backends.hosts.argv import own_grace
from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.ps import RunIdentity, owner_text
from gen_tui.backends.hosts.scripts import VERDICTS, signal_script
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.hosts.watch import LineSource

KILL_WAIT_S = 10.0
DRAIN_MARGIN_S = 5.0
"""Beyond a gen-tui run's own grace: when its grace ends it aborts what is still in flight,
closes its files and exits, which takes a moment; SIGKILL must not land in the middle."""

TickCallback = Callable[[int], object]
"""Called with the seconds of grace left, once a second, while a run is given time to stop."""


class KillResult(StrEnum):
    STOPPED = "stopped"
    KILLED = "killed"
    ALREADY_GONE = "already gone"
    REFUSED = "identity changed: refused"
    NOT_YOURS = "another user's run: refused"
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


def kill_wait(cmdline: Sequence[str], grace_s: float) -> float:
    """Seconds between SIGTERM and SIGKILL: at least `grace_s` (the panel's), and for a
    gen-tui run at least its own drain plus a margin, so `k` never cuts a drain short that
    the run was promised (and never blames the run for draining)."""
    own = own_grace(cmdline)
    return grace_s if own is None else max(grace_s, own + DRAIN_MARGIN_S)


def drain_said(cmdline: Sequence[str], grace_s: float) -> str:
    """What `k` promises, in the words and figures the outcome uses (`stopped_detail`,
    `killed_detail`): a gen-tui run drains for its own grace, the figure the event log
    later names; the kill's margin is said as such. The confirmation said "SIGKILL ...
    after 35 s" and the log "drained for its whole grace (30 s)" (issue 31)."""
    own = own_grace(cmdline)
    wait = kill_wait(cmdline, grace_s)
    if own is None:
        return f"it drains in-flight requests; SIGKILL if it is still there after {wait:g} s"
    return (
        f"it drains in-flight requests for up to its grace, {own:g} s; SIGKILL if it is "
        f"still there {wait - own:g} s after that"
    )


def _answers(count: int | None) -> str:
    if count is None:
        return ""
    return f"; {count} answer{'s' if count != 1 else ''} written while it drained"


def stopped_detail(
    pid: int, cmdline: Sequence[str], drained: int | None, elapsed: float = 0.0
) -> str:
    """What a run that exited after SIGTERM did. A gen-tui run that took its whole grace
    (`elapsed` seconds from SIGTERM to gone) exited because the grace ran out, not because
    the drain finished: what it still had in flight was dropped, and that is said."""
    own = own_grace(cmdline)
    if own is None:
        return f"pid {pid} exited after SIGTERM{_answers(drained)}"
    if elapsed < own:
        return f"pid {pid} drained and exited after SIGTERM{_answers(drained)}"
    return (
        f"pid {pid} drained for its whole grace ({own:g} s) and exited{_answers(drained)}; "
        "answers it still had in flight are sent again on resume"
    )


def killed_detail(pid: int, cmdline: Sequence[str], waited: float, drained: int | None) -> str:
    """What a run that needed SIGKILL did: a gen-tui run was still draining (what it had
    in flight is sent again on resume); a foreign script ignored SIGTERM."""
    own = own_grace(cmdline)
    if own is None:
        return f"pid {pid} ignored SIGTERM for {waited:g} s and was killed (SIGKILL)"
    return (
        f"pid {pid} was still draining {waited:g} s after SIGTERM (its own grace: {own:g} s) "
        f"and was killed (SIGKILL){_answers(drained)}; answers it still had in flight are "
        "sent again on resume"
    )


async def call_tick(callback: TickCallback, value: int) -> None:
    """Call an on-tick callback, awaiting it when it is a coroutine function."""
    result = callback(value)
    if asyncio.iscoroutine(result):
        await result


async def signal_and_wait(
    open_sh: Callable[[str], Awaitable[LineSource]],
    host: str,
    identity: RunIdentity,
    sig: str,
    wait_s: float,
    on_tick: TickCallback | None,
) -> tuple[str, str]:
    """Check identity, signal, wait, with the signal script started by `open_sh`:
    ("refused"|"absent"|"gone"|"alive", detail)."""
    try:
        source = await open_sh(signal_script(identity, sig, wait_s))
    except (SSHError, OSError) as exc:  # the script may or may not have reached the host
        raise RunError(
            f"{host}: link lost while stopping pid {identity.pid} ({describe(exc)}); "
            "list the runs again before retrying"
        ) from None
    try:
        return await _read_verdict(source, host, identity.pid, wait_s, on_tick)
    finally:
        await source.close()


async def _read_verdict(
    source: LineSource, host: str, pid: int, wait_s: float, on_tick: TickCallback | None
) -> tuple[str, str]:
    """Follow the signal script's output: ticks to `on_tick`, then (verdict, detail).

    A link that drops or goes quiet raises :class:`RunError`: the signal may or may not have
    been sent, so the person must look at the run list again.
    """
    lost = f"{host}: link lost while stopping pid {pid}"
    while True:
        try:
            line = await within(source.readline(), wait_s + 30)
        except TimeoutError:
            raise RunError(f"{host}: no answer while stopping pid {pid}") from None
        except (OSError, asyncssh.Error) as exc:
            raise RunError(
                f"{lost} ({describe(exc)}); list the runs again before retrying"
            ) from None
        if not line:
            raise RunError(f"{lost}; list the runs again before retrying")
        word, _, rest = line.strip().partition(" ")
        if word == "tick" and on_tick is not None:
            await call_tick(on_tick, max(0, round(wait_s - int(rest))))
        elif word in VERDICTS:
            return word, rest


def not_yours(pid: int, uid: int | None, user: str | None) -> KillOutcome:
    """A kill refused because the run is another user's (said before any signal)."""
    return KillOutcome(
        KillResult.NOT_YOURS,
        f"pid {pid} belongs to {owner_text(uid, user)}: gen-tui never stops another user's run",
    )
