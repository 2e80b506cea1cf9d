"""Hosts: see, stop, start and resume generation processes, here or on a GPU box over SSH.

Where things live:

- `base.py`: :class:`Host`, every algorithm (list, kill, start, resume, watch) over a few
  primitives; `local.py` (:class:`LocalHost`) and `ssh.py` (:class:`SSHHost`) supply them.
- `ps.py`: the watcher's process listing as typed records; :class:`RunIdentity` and
  :class:`RunProcess` (a process seen on a host).
- `kill.py`: what a kill reports; `resume.py`: refusing a second writer and the command
  line to resume with; `argv.py`: editing command lines; `scripts.py`: the sh scripts that
  check identity, signal and sample file sizes; `watch.py`: the live totals stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from gen_tui.backends.hosts import quiet_ssh  # noqa: F401 (first: before asyncssh loads)
from gen_tui.backends.hosts.argv import (
    DATASET_FLAGS,
    PATH_FLAGS,
    SAMPLE_FLAGS,
    TOKEN_FLAGS,
    is_gen_tui,
    resume_argv,
    server_urls,
    set_flag,
)
from gen_tui.backends.hosts.base import Host
from gen_tui.backends.hosts.errors import ResumeRefused, RunError, StartError
from gen_tui.backends.hosts.kill import (
    KILL_WAIT_S,
    KillOutcome,
    KillResult,
    TickCallback,
    kill_wait,
)
from gen_tui.backends.hosts.local import LocalHost
from gen_tui.backends.hosts.primitives import DEFAULT_PATTERN
from gen_tui.backends.hosts.ps import PsReport, RunIdentity, RunProcess, Survey
from gen_tui.backends.hosts.scripts import rquote
from gen_tui.backends.hosts.ssh import SSHHost
from gen_tui.backends.hosts.ssh_target import SSHOptions
from gen_tui.backends.hosts.start import START_SETTLE_S
from gen_tui.backends.hosts.watch import (
    DatasetTotals,
    GpuSample,
    ServerLoad,
    Watch,
    WatchItem,
    WatchStatus,
)
from gen_tui.backends.settings import DEFAULT_GRACE_S
from gen_tui.backends.watcher import LOG_DIR

__all__ = [
    "DATASET_FLAGS",
    "DEFAULT_GRACE_S",
    "DEFAULT_PATTERN",
    "KILL_WAIT_S",
    "LOG_DIR",
    "PATH_FLAGS",
    "SAMPLE_FLAGS",
    "START_SETTLE_S",
    "TOKEN_FLAGS",
    "DatasetTotals",
    "GpuSample",
    "Host",
    "KillOutcome",
    "KillResult",
    "LocalHost",
    "PsReport",
    "ResumeRefused",
    "RunError",
    "RunIdentity",
    "RunProcess",
    "SSHHost",
    "ServerLoad",
    "StartError",
    "Survey",
    "TickCallback",
    "Watch",
    "WatchItem",
    "WatchStatus",
    "is_gen_tui",
    "kill_wait",
    "open_host",
    "resume_argv",
    "rquote",
    "server_urls",
    "set_flag",
]


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
