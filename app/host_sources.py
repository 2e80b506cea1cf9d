"""Where a host link's host comes from: `gen-tui --host`, a `[[hosts]]` entry, the demo.

A :class:`HostSource` says how to open the host (in the link's own thread and loop) and
what the app may do with its runs; the functions below build them from the command line
and the config file. Nothing here connects: psutil and asyncssh load in the link's worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from gen_tui.backends.settings import DEFAULT_GRACE_S
from gen_tui.backends.untrusted import one_line

if TYPE_CHECKING:  # psutil and asyncssh load in the worker, not at startup
    from gen_tui.backends.config.file import HostEntry
    from gen_tui.backends.hosts import Host
    from gen_tui.backends.hosts.ssh_target import SSHOptions


class HostSource:
    """Where a link's host comes from: `gen-tui --host`, a `[[hosts]]` entry, the demo.

    `open` runs in the link's own loop; whatever it enters on `stack` (a simulator, say)
    lives as long as the link. `owns_runs`: the runs it starts are the app's own, stopped
    when the app exits (the demo); a real host's runs outlive the app.
    """

    owns_runs = False
    remote = False
    """Reached over SSH: its connection state is worth a place in the header."""
    has_template = False
    """A run command template is configured: a dataset can start without a past run."""
    servers: tuple[str, ...] = ()
    """Servers whose /metrics are read on the host besides those its runs name ([[hosts]])."""

    def __init__(
        self,
        make: Callable[[], Host] | None = None,
        datasets: Sequence[str] = (),
        *,
        discover: bool = True,
        grace_s: float = DEFAULT_GRACE_S,
        label: str = "",
    ) -> None:
        self.make = make
        self.datasets = tuple(datasets)
        self.discover = discover
        self.grace_s = grace_s
        self.label = label

    async def open(self, stack: AsyncExitStack) -> Host:
        if self.make is None:
            raise NotImplementedError
        return self.make()


def ssh_options(
    config_file: str | None = None,
    known_hosts: str | None = None,
    identity: str | None = None,
) -> SSHOptions | None:
    """SSH client settings from the command line; None means what `ssh` itself would use."""
    if config_file is None and known_hosts is None and identity is None:
        return None
    from gen_tui.backends.hosts.ssh_target import SSHOptions

    return SSHOptions(
        config_files=(config_file,) if config_file else None,
        known_hosts=known_hosts,
        client_keys=(identity,) if identity else None,
    )


def folder_name_problem(folder: str) -> str | None:
    """Why `folder` cannot be the output folder of a watched host, in one line (None: it can).

    Why check the name first: a line break or another control character in it (a paste
    gone wrong, `$'...\\n'`) is never a real output folder, and the checks further down,
    which quote the path in every line they say, answered with a two-line refusal about
    who could swap the folder; a terminal escape in it would be drawn raw.
    """
    if any(ord(char) < 32 or 0x7F <= ord(char) <= 0x9F for char in folder):
        shown = one_line(repr(folder), 200)
        return f"{shown} holds a line break or a control character; give the path on one line"
    if not folder.strip():
        return "it is empty; give the run's --output-dir on that host"
    return None


def host_source(
    target: str | None,
    output_dir: str,
    *,
    name: str | None = None,
    pattern: str | None = None,
    command: Sequence[str] | None = None,
    options: SSHOptions | None = None,
    datasets: Sequence[str] = (),
    discover: bool = True,
    grace_s: float = DEFAULT_GRACE_S,
    servers: Sequence[str] = (),
) -> HostSource:
    """A host to watch and control: an SSH target (alias or user@host[:port]) or "local".

    Raises ValueError (one line) for an output folder no one can name on one line."""
    problem = folder_name_problem(output_dir)
    if problem is not None:
        raise ValueError(f"output folder of host {name or target or 'local'}: {problem}")

    def make() -> Host:
        from gen_tui.backends.hosts import open_host

        return open_host(
            target, output_dir, name=name, options=options, pattern=pattern, template=command
        )

    remote = target not in (None, "", "local", "localhost")
    source = HostSource(
        make, datasets, discover=discover, grace_s=grace_s, label=name or (target or "local")
    )
    source.remote = remote
    source.has_template = bool(command)
    source.servers = tuple(servers)
    return source


def sources_from_config(
    entries: Sequence[HostEntry],
    options: SSHOptions | None = None,
    grace_s: float = DEFAULT_GRACE_S,
) -> list[HostSource]:
    return [
        host_source(
            entry.target,
            entry.output_dir,
            name=entry.name,
            pattern=entry.pattern,
            command=entry.command,
            options=options,
            grace_s=grace_s,
            servers=entry.servers,
        )
        for entry in entries
    ]
