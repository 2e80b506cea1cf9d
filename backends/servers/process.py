"""The process launcher: a server as a detached process, on this machine or over SSH.

It starts through the same guarded path as `r` (`Host.start`: a session of its own, output
to the log file, every word quoted for the remote shell, the code folders and owners
checked on the host right before the launch), with the recipe's environment and a marker
(`GEN_TUI_SERVER=<name>` in it), and records the launch in the state file, so a later
gen-tui adopts the same pid instead of starting a second copy. Before any signal the pid's
identity (start time, boot, command line) is checked again: pids are reused.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.drain_notice import (
    NOTICE_FOLDER,
    notice_name,
    notice_text,
    remove_notice,
    write_notice,
)
from gen_tui.backends.hosts import Host, LocalHost, RunIdentity, StartError
from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.servers.launcher import Exit, Launched, Launcher, LaunchError
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.untrusted import one_line, without_colours

MARKER = "GEN_TUI_SERVER"
"""In the environment of every server gen-tui starts: its recipe's name."""
KIND = "process"
REMOTE_FOLDER = ".local/state/gen-tui/servers"
"""The servers' logs and start guard on a `[[hosts]]` machine: relative to the login
folder (where every command over SSH starts), so no `~` has to be expanded there."""
LINE_CHARS = 300


_PROBED = (
    r"/(?:health|health_generate|get_model_info|get_server_info|model_info|server_info"
    r"|v1/models|metrics)"
)
PROBE_LINE = re.compile(
    # uvicorn's access line of a probe (SGLang: `INFO:     127.0.0.1:5 - "GET /health
    # HTTP/1.1" 200 OK`): the router's and the supervisor's health checks, the router's
    # model and server info, the panel's /metrics
    rf'"(?:GET|POST|HEAD) {_PROBED}(?:[?/][^"]*)? HTTP/[0-9.]+" [0-9]{{3}}'
    # sglang-router's own line of one (`http_request{method=GET uri=/health ...}`)
    rf"|\bhttp_request\{{method=[A-Z]+ uri={_PROBED}[ ?/}}]"
    # the router's HTTP/2 (gRPC) probe of a worker, refused: uvicorn's line, the sim's
    r"|Invalid HTTP request received\.|refused a request that is not HTTP/1\.1 "
)
"""A log line about a probe, not about the server: the router probes its workers every few
seconds, so such a line was a routed server's "last line" almost always (the panel shows
it, and an exit's reason quotes it)."""


def last_of(lines: list[str]) -> str:
    """The last line of `lines` that says something of the server, one line, bounded: not
    blank, not a probe (PROBE_LINE); "" for none."""
    for line in reversed(lines):
        if line.strip() and PROBE_LINE.search(line) is None:
            return one_line(without_colours(line).strip(), LINE_CHARS)
    return ""


def same_start(now: RunIdentity | None, then: RunIdentity) -> bool:
    """Whether `now` is the process started as `then`: the same pid, boot and start time.
    Not the command line: servers retitle themselves (SGLang and its router use
    setproctitle), and a server that did is still the one gen-tui started."""
    if now is None or now.pid != then.pid:
        return False
    if now.boot_id and then.boot_id and now.boot_id != then.boot_id:
        return False
    if now.start_ticks is not None and then.start_ticks is not None:
        return now.start_ticks == then.start_ticks
    return abs(now.start_time - then.start_time) < 0.05


def status_of(text: str) -> int | None:
    """The status the exit wrapper wrote (watcher/starts.py's EXIT_WRAPPER: a Popen return
    code, minus the signal when killed by one); None when the text is no status."""
    try:
        status = int(text.strip())
    except ValueError:
        return None
    return status if -64 <= status <= 255 else None


UNKNOWN_EXIT = "is gone (its exit status is unknown: not started by this gen-tui)"


def exit_words(code: int | None, unknown: str = UNKNOWN_EXIT) -> tuple[int | None, int | None, str]:
    """(code, signal, words) of a Popen return code (minus the signal when killed by one);
    `unknown` says why there is none."""
    if code is None:
        return None, None, unknown
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return None, -code, f"was killed by {name}"
    return code, None, f"exited with code {code}"


class ProcessLauncher(Launcher):
    """Servers as detached processes on the hosts named in `hosts` ("local" and the
    `[[hosts]]` entries), their logs and start guard under `folder` on each host."""

    tells_exit_code: ClassVar[bool] = True  # for those this process started

    def __init__(
        self,
        hosts: Mapping[str, Host],
        folder: str,
        state: StateFile,
        settle_s: float = 0.5,
        remote_folder: str = REMOTE_FOLDER,
    ) -> None:
        """`folder` is this machine's ("local"); every other host's is `remote_folder`."""
        self.hosts = hosts
        self.local_folder = folder.rstrip("/")
        self.remote_folder = remote_folder.rstrip("/")
        self.state = state
        self.settle_s = settle_s

    async def tell_drain(self, launched: Launched, url: str, wait_s: float, grace_s: float) -> bool:
        """The notice in its host's servers' folder (`draining/PORT.json`): here, written
        from a thread; over SSH, by the watcher there, naming the link's process on that
        machine as its writer (the runs on that machine read their own state folder,
        `remote_folder` by default)."""
        host = self._host(launched.host)
        folder = posixpath.join(self.folder(launched.host), NOTICE_FOLDER)
        if isinstance(host, LocalHost):
            await asyncio.to_thread(write_notice, Path(folder), launched.port, url, wait_s, grace_s)
        else:
            text = notice_text(launched.port, url, wait_s, grace_s)
            await host.put_drain_notice(folder, notice_name(launched.port), text)
        return True

    async def end_drain(self, launched: Launched) -> None:
        host = self._host(launched.host)
        folder = posixpath.join(self.folder(launched.host), NOTICE_FOLDER)
        if isinstance(host, LocalHost):
            await asyncio.to_thread(remove_notice, Path(folder), launched.port)
        else:
            await host.remove_drain_notice(folder, notice_name(launched.port))

    def folder(self, host: str) -> str:
        return (
            self.local_folder
            if isinstance(self.hosts.get(host), LocalHost)
            else (self.remote_folder)
        )

    def _host(self, name: str) -> Host:
        host = self.hosts.get(name)
        if host is None:
            raise LaunchError(f"no host {name!r} to run the server on")
        return host

    def exit_path(self, host: str, name: str) -> str:
        """Where a server on a `[[hosts]]` machine has its exit status written (in the
        servers' own folder, checked by the start guard: never in a shared log folder)."""
        return f"{self.folder(host)}/{name}.exit"

    def log_path(self, recipe: ServerRecipe) -> str:
        return recipe.log or f"{self.folder(recipe.host)}/{recipe.name}.log"

    async def log_of(self, recipe: ServerRecipe) -> str:
        return self.log_path(recipe)

    async def start(self, recipe: ServerRecipe) -> Launched:
        host = self._host(recipe.host)
        log = self.log_path(recipe)
        env = {**recipe.environment, MARKER: recipe.name}
        started = time.time()
        try:
            await host.make_folder(self.folder(recipe.host))
            identity = await host.start(
                list(recipe.argv),
                log,
                cwd=recipe.cwd,
                settle_s=self.settle_s,
                output_dir=self.folder(recipe.host),
                env=env,
                # Over SSH no process is ours to wait for: a shell there writes the status.
                exit_file=None
                if isinstance(host, LocalHost)
                else self.exit_path(recipe.host, recipe.name),
            )
        except StartError as exc:
            said = str(exc).splitlines()
            if said and "exited at once" in said[0]:
                lines = await self._lines(host, log)
                raise LaunchError(
                    f"server {recipe.name}: {recipe.argv[0]} exited at once; its log's last "
                    f"line: {last_of(lines) or '(empty)'}"
                ) from None
            raise LaunchError(f"server {recipe.name}: {one_line(str(exc), 500)}") from None
        except SSHError as exc:
            raise LaunchError(
                f"server {recipe.name}: {recipe.host}: the link failed before the start "
                f"({describe(exc)}); nothing was started"
            ) from None
        launched = Launched(
            recipe.name, str(identity.pid), recipe.host, recipe.port, started, log, identity
        )
        self.state.note_launch(KIND, launched)
        return launched

    async def _remote_status(self, host: Host, launched: Launched) -> int | None:
        """The exit status its wrapper wrote on the host (None: not written, unreadable)."""
        try:
            lines = await host.log_lines(self.exit_path(launched.host, launched.name), 1)
        except Exception:  # unknown then, as for a server not started by this gen-tui
            return None
        return status_of(lines[-1]) if lines else None

    async def _lines(self, host: Host, log: str) -> list[str]:
        try:
            return await host.log_lines(log, 20)
        except Exception as exc:  # the log is a courtesy: a lost link must not hide the error
            return [f"(its log could not be read: {type(exc).__name__})"]

    async def exit_of(self, launched: Launched) -> Exit | None:
        host = self._host(launched.host)
        assert launched.identity is not None
        try:
            now = await host.identify(launched.identity.pid)
        except SSHError:  # the link is down, not the server: asked again at the next check
            return None
        if same_start(now, launched.identity):
            return None
        unknown = UNKNOWN_EXIT
        if isinstance(host, LocalHost):
            try:
                status = await host.ended_status(launched.identity.pid)
            except TimeoutError as exc:
                status, unknown = None, f"is gone (its exit status is unknown: {exc})"
        else:
            status = await self._remote_status(host, launched)
        code, sig, words = exit_words(status, unknown)
        last = last_of(await self._lines(host, launched.log))
        return Exit(code, sig, f"pid {launched.ref} {words}; its log's last line: {last or '-'}")

    async def stop(self, launched: Launched, grace_s: float) -> str:
        host = self._host(launched.host)
        assert launched.identity is not None
        now = await host.identify(launched.identity.pid)
        if not same_start(now, launched.identity):
            return f"pid {launched.ref} had already exited"
        assert now is not None  # as it is now: the signal script checks its command line
        outcome = await host.kill(now, grace_s, files=[])
        return outcome.detail

    async def adopt(self) -> list[Launched]:
        found: list[Launched] = []
        for name, entry in self.state.read().items():
            launched = entry.launched
            if entry.launcher != KIND or launched is None or launched.identity is None:
                continue
            host = self.hosts.get(launched.host)
            if host is None:
                continue
            now = await host.identify(launched.identity.pid)
            if same_start(now, launched.identity) and name == launched.name:
                found.append(launched)
        return found

    async def last_line(self, launched: Launched) -> str:
        return last_of(await self._lines(self._host(launched.host), launched.log))

    async def log_size(self, launched: Launched) -> int | None:
        try:
            return await self._host(launched.host).file_size(launched.log)
        except Exception:  # unknown: the deadline is then not stretched
            return None
