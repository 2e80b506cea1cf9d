"""Starting a run, the algorithm: a detached launch under the output folder's start guard,
then the wait until the pid runs the command itself and is still alive a moment later, so a
command that dies at once (a typo, a missing file) is reported with the end of its log
instead of being listed as a run. It runs over a host's primitives (:class:`HostPrimitives`),
the same for every host, as :mod:`stop` does for stopping.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Sequence

from gen_tui.backends.hosts.argv import exec_done
from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.errors import StartError
from gen_tui.backends.hosts.primitives import HostPrimitives, StartSpec
from gen_tui.backends.hosts.ps import RunIdentity
from gen_tui.backends.hosts.ssh_target import SSHError

START_WAIT_S = 10.0
"""How long a launched pid may take to exec the command itself (past env, setsid, nohup)."""
START_SETTLE_S = 0.5
"""How long a started run must stay alive to count as started."""


async def start_run(
    host: HostPrimitives,
    command_argv: Sequence[str],
    log_path: str,
    cwd: str | None,
    settle_s: float,
    output_dir: str | None,
    expect: int | None,
    env: dict[str, str] | None = None,
    exit_file: str | None = None,
) -> RunIdentity:
    """As :meth:`Host.start`."""
    argv = [str(word) for word in command_argv]
    if not argv:
        raise StartError("empty command")
    launched = time.monotonic()
    folder = output_dir or host._abs_output_dir()
    pid = await host._spawn(StartSpec(argv, log_path, cwd, folder, expect, env, exit_file))
    try:
        return await _started(host, argv, pid, log_path, launched, settle_s)
    except SSHError as exc:
        raise StartError(
            f"{host.name}: started pid {pid}, but the link was lost before it could be "
            f"checked ({describe(exc)}); it may be running: list the runs before starting "
            "again"
        ) from None


async def _started(
    host: HostPrimitives, argv: list[str], pid: int, log_path: str, launched: float, settle_s: float
) -> RunIdentity:
    """Wait until `pid` runs the command itself and is still alive `settle_s` after it."""
    identity: RunIdentity | None = None
    while True:
        report = await host._ps(host.pattern, None, pids=[pid])
        proc = report.procs[0] if report.procs else None
        if proc is None or proc.gone:
            tail = await host._log_tail(log_path)
            raise StartError(f"{shlex.join(argv)} exited at once; the end of {log_path}:\n{tail}")
        if identity is None and exec_done(proc.cmdline):
            identity = proc.identity(host.name, report.boot_id)
        elapsed = time.monotonic() - launched
        if identity is not None:
            if elapsed >= settle_s:
                return identity
            await asyncio.sleep(settle_s - elapsed)
            continue
        if elapsed > START_WAIT_S:
            raise StartError(f"pid {pid} did not exec {argv[0]} within {START_WAIT_S:g} s")
        await asyncio.sleep(0.05)
