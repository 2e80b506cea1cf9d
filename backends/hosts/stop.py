"""Stopping a run, the algorithm: identity checked before each signal, SIGTERM to its
group, the drain waited for (ticking), SIGKILL only past it, then the record files watched
to stop growing. It runs over a :class:`Host`'s primitives, the same for every host; the
wording of each outcome is :mod:`kill`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.kill import (
    KILL_WAIT_S,
    KillOutcome,
    KillResult,
    TickCallback,
    kill_wait,
    killed_detail,
    not_yours,
    stopped_detail,
)
from gen_tui.backends.hosts.primitives import HostPrimitives
from gen_tui.backends.hosts.ps import RunIdentity
from gen_tui.backends.hosts.scripts import appended_script, parse_appended
from gen_tui.backends.hosts.ssh_target import SSHError


async def stop_run(
    host: HostPrimitives,
    identity: RunIdentity,
    grace_s: float,
    on_tick: TickCallback | None,
    files: Sequence[str] | None,
) -> KillOutcome:
    """See :meth:`Host.kill`."""
    pid = identity.pid
    run = host.known_run(identity)
    if run is not None and not run.mine:
        return not_yours(pid, run.uid, run.user)
    if files is None:
        files = run.record_files() if run is not None else []
    wait_s = kill_wait(identity.cmdline, grace_s)
    offsets = await _offsets(host, files)
    started = time.monotonic()
    verdict, detail = await host._signal_wait(identity, "TERM", wait_s, on_tick)
    elapsed = time.monotonic() - started
    if verdict == "refused":
        return KillOutcome(KillResult.REFUSED, detail)
    if verdict == "denied":
        uid = int(detail) if detail.isdigit() else None
        return not_yours(pid, uid, run.user if run and run.uid == uid else None)
    if verdict == "absent":
        return KillOutcome(KillResult.ALREADY_GONE, f"pid {pid} had already exited")
    if verdict == "gone":
        result = KillResult.STOPPED
        drained = await _drained(host, offsets)
        detail = stopped_detail(pid, identity.cmdline, drained, elapsed)
    else:
        verdict, detail = await host._signal_wait(identity, "KILL", KILL_WAIT_S, None)
        if verdict == "denied":  # it became another user's (a set-uid exec) meanwhile
            return not_yours(pid, int(detail) if detail.isdigit() else None, None)
        if verdict in ("absent", "refused"):
            # It went away by itself between the grace period's end and the check.
            result = KillResult.STOPPED
            detail = f"pid {pid} exited after SIGTERM, at the end of the grace"
        elif verdict == "gone":
            result = KillResult.KILLED
            drained = await _drained(host, offsets)
            detail = killed_detail(pid, identity.cmdline, wait_s, drained)
        else:
            return KillOutcome(
                KillResult.STUCK,
                f"pid {pid} is still there {KILL_WAIT_S:g} s after SIGKILL (uninterruptible I/O?)",
            )
    return await _settled(host, files, result, detail)


async def _settled(
    host: HostPrimitives, files: Sequence[str], result: KillResult, detail: str
) -> KillOutcome:
    """The outcome, once the run's record files are seen to stop growing."""
    if not files:
        return KillOutcome(result, detail)
    try:
        samples = await host._sizes(files)
    except SSHError as exc:
        # The run is gone (the signal script saw it): say so, not the link's error.
        return KillOutcome(
            result, f"{detail}; its record files could not be checked ({describe(exc)})"
        )
    stable = len(samples) >= 2 and samples[-1] == samples[-2]
    if not stable:
        detail += "; its record files are STILL GROWING: another writer?"
    return KillOutcome(result, detail, stable, samples[-1] if samples else {})


async def _offsets(host: HostPrimitives, paths: Sequence[str]) -> dict[str, int]:
    """The record files' sizes before a stop, to count what the drain writes after it
    (empty when unknown: the count is then left out, the stop goes ahead)."""
    if not paths:
        return {}
    try:
        sizes = (await host._sizes(paths, samples=1))[-1]
    except (SSHError, OSError, IndexError):
        return {}
    return {path: size for path, size in sizes.items() if size is not None}


async def _drained(host: HostPrimitives, offsets: Mapping[str, int]) -> int | None:
    """Records appended past `offsets` (None: unknown)."""
    if not offsets:
        return None
    try:
        return parse_appended(await host._sh(appended_script(offsets)))
    except (SSHError, OSError):
        return None
