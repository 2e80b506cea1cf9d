"""A host reached over SSH: the watcher's source sent to `python3 -`, scripts to `sh -s`.

Both travel on stdin, so the command line the remote login shell parses is one line of
quoted words whatever that shell is (csh and tcsh included); a word that cannot be one is
refused (`scripts.check_remote_word`). It needs only `sh`, coreutils, `kill` and `python3`
(3.8+) on the remote box. Over SSH the signal is sent by a `kill` command, because sshd
refuses channel signals for root.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import posixpath
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import asyncssh

from gen_tui.backends import watcher
from gen_tui.backends.aio import stop, within
from gen_tui.backends.drain_notice import LINK_LEASE_S, LINK_RENEW_S
from gen_tui.backends.hosts.base import Host
from gen_tui.backends.hosts.connection import SSHConnection, describe
from gen_tui.backends.hosts.errors import ResumeRefused, RunError, StartError
from gen_tui.backends.hosts.primitives import StartSpec
from gen_tui.backends.hosts.scripts import check_remote_word, remote_quote, sh_command
from gen_tui.backends.hosts.ssh_target import SSHError, SSHOptions
from gen_tui.backends.hosts.watch import LineSource, Watch

NOTICE_RENEW_S = 10.0
"""How long writing one drain notice again after a reconnect may take."""


class SSHLines:
    """A remote process's channel as a line source; closing it ends the remote process.

    `linger_s` is how long closing waits for the channel to close.
    """

    def __init__(self, process: asyncssh.SSHClientProcess[str], linger_s: float = 5.0) -> None:
        self.process = process
        self.linger_s = linger_s

    async def readline(self) -> str:
        return await self.process.stdout.readline()

    async def close(self) -> None:
        self.process.close()
        if self.linger_s > 0:
            with contextlib.suppress(Exception):
                await within(self.process.wait_closed(), self.linger_s)


def _report(output: str, kind: str) -> dict[str, Any] | None:
    """The first JSON line of type `kind` the watcher printed, if any."""
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            report = json.loads(line)
            if isinstance(report, dict) and report.get("type") == kind:
                return report
    return None


class SSHHost(Host):
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
        self._notices: dict[tuple[str, str], str] = {}
        """The drain notices this link wrote and the panel has not ended yet ((folder,
        name): the notice as the panel wrote it): written again after each reconnect."""
        self._notice_lock = asyncio.Lock()
        self._renewer: asyncio.Task[None] | None = None
        self.connection.on_reconnect(self._renew_notices)

    async def connect(self) -> None:
        """Connect now (raises :class:`SSHError` with a clear message); later drops heal."""
        await self.connection.start()

    def _python_command(self, args: Sequence[str]) -> str:
        """`python3 -I - ARGS`, quoted: the watcher's source goes to its stdin.

        Raises :class:`RunError` naming a word with a line break or NUL (see
        `scripts.check_remote_word`) before anything reaches the host.
        """
        words = [remote_quote(arg, "the value") for arg in args]
        python = remote_quote(self.python, "the remote python")
        return " ".join([python, *watcher.PYTHON_FLAGS, "-", *words])

    async def _python(self, args: Sequence[str], timeout: float = 60.0) -> str:
        """Run the watcher source with `python3 - ARGS` and return its stdout."""
        result = await self.connection.run(
            self._python_command(args), input=watcher.source(), timeout=timeout
        )
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

    async def _ps_raw(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None
    ) -> Mapping[str, Any]:
        args = [f"--ps={pattern}"]
        if output_dir:
            args.append(f"--output-dir={output_dir}")
        if pids is not None:
            args.append("--pids=" + ",".join(str(int(p)) for p in pids))
        report = _report(await self._python(args), "ps")
        if report is None:
            raise RunError(f"{self.name}: the process listing printed nothing usable")
        return report

    async def _tail_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return _report(await self._python([f"--tail={json.dumps(spec)}"], timeout=30), "tail")

    async def _heads_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # 256 MiB of prompts parsed by the box's json module: seconds, not minutes.
        return _report(await self._python([f"--heads={json.dumps(spec)}"], timeout=35), "heads")

    async def put_drain_notice(self, folder: str, name: str, text: str) -> str:
        """As :meth:`Host.put_drain_notice`, by the watcher's `--notice` there: the notice
        names as its writer the SSH session process that carries this link on that host
        (backends/watcher/notices.py), so the runs there see it gone once this panel's link
        ends, and drop it after a hold for a reconnect (drain_notice.LINK_HOLD_S; the
        panel's own pid means nothing on their machine). A host whose python
        fails gets the notice as written (its runs then bound it by the wait it says).
        Kept until :meth:`remove_drain_notice`: a link that drops and heals ends the
        session process it named, so it is written again then (:meth:`_renew_notices`);
        while the link lives its lease is renewed (:meth:`_keep_leases`)."""
        async with self._notice_lock:
            path = await self._write_notice(folder, name, text, timeout=30)
            self._notices[(folder, name)] = text
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._keep_leases())
        return path

    async def _keep_leases(self) -> None:
        """Renew each standing notice's lease (drain_notice.LINK_LEASE_S: its file's time)
        every LINK_RENEW_S while the link lives; ends when no notice stands. A `touch`, not
        the watcher again: its source is 140 KB. One that fails is renewed at the next turn,
        or written anew on the reconnect (:meth:`_renew_notices`)."""
        while self._notices:
            await asyncio.sleep(LINK_RENEW_S)
            await self._each_notice(
                lambda folder, name, _text: self.touch_file(
                    posixpath.join(folder, name), LINK_RENEW_S
                )
            )

    async def remove_drain_notice(self, folder: str, name: str) -> None:
        """As :meth:`Host.remove_drain_notice`; it is no longer written again on a
        reconnect (forgotten first: a removal that fails never brings it back)."""
        self._notices.pop((folder, name), None)
        async with self._notice_lock:  # after a renewal in flight, never before it
            await self.remove_file(posixpath.join(folder, name))

    async def _renew_notices(self) -> None:
        """After a reconnect: each drain notice still wanted is written again, naming the
        new link's session process, as the panel wrote it (its `since`, `wait_s` and
        `grace_s`: the same end, the time left, not a fresh wait). One the panel ended
        meanwhile is not; one that fails waits for the next reconnect."""
        await self._each_notice(
            lambda folder, name, text: self._write_notice(
                folder, name, text, timeout=NOTICE_RENEW_S
            )
        )

    async def _each_notice(self, step: Callable[[str, str, str], Awaitable[object]]) -> None:
        """`step(folder, name, text)` for each drain notice still wanted, one at a time under
        the notice lock: never for one the panel ended meanwhile (`remove_drain_notice`
        forgets it first), so neither a renewal nor a lease's touch brings it back. One
        that fails is left to the next turn or reconnect."""
        for key in list(self._notices):
            async with self._notice_lock:
                text = self._notices.get(key)
                if text is None:
                    continue  # ended while another was handled
                with contextlib.suppress(SSHError, RunError, TimeoutError):
                    await step(*key, text)

    async def _write_notice(self, folder: str, name: str, text: str, timeout: float) -> str:
        notice = dict(json.loads(text), lease_s=LINK_LEASE_S)  # renewed: _keep_leases
        spec = {"folder": folder, "name": name, "notice": notice}
        try:
            output = await self._python([f"--notice={json.dumps(spec)}"], timeout=timeout)
        except RunError:
            return await self.put_small_file(folder, name, text)
        report = _report(output, "notice")
        path = report.get("path") if report is not None else None
        if not isinstance(path, str):
            raise SSHError(f"{self.name}: the drain notice was not written ({output[-200:]!r})")
        return path

    async def _open_sh(self, script: str) -> LineSource:
        process = await self.connection.open_process(sh_command())
        process.stdin.write(script)
        process.stdin.write_eof()
        return SSHLines(process, linger_s=0)

    async def _sh(self, script: str, timeout: float = 60.0) -> str:
        result = await self.connection.run(sh_command(), input=script, timeout=timeout)
        return str(result.stdout or "")

    async def _spawn(self, spec: StartSpec) -> int:
        try:
            output = await self._python([f"--start={json.dumps(asdict(spec))}"], timeout=30)
        except SSHError as exc:
            raise StartError(
                f"{self.name}: link lost while starting ({describe(exc)}); list the runs "
                "before starting again, it may have started"
            ) from None
        report = _report(output, "start") or {}
        if "refused" in report:
            raise ResumeRefused.raced(self.name)
        pid = report.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            why = report.get("error") or f"no pid in {output[-300:]!r}"
            raise StartError(f"{self.name}: {why}")
        return pid

    async def _open_watcher(self, args: list[str]) -> LineSource:
        process = await self.connection.open_process(self._python_command(args), timeout=30)
        process.stdin.write(watcher.source())
        process.stdin.write_eof()
        return SSHLines(process)

    def watch(
        self,
        output_dir: str,
        datasets: Sequence[str],
        resume: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
    ) -> Watch:
        """As :meth:`Host.watch`; an output folder that cannot go on the remote command line
        is refused here, once, rather than by every reconnect of the stream."""
        check_remote_word(output_dir, "the output folder")
        for url in metrics_urls:
            check_remote_word(url, "the server URL")
        return super().watch(output_dir, datasets, resume, metrics_urls)

    async def close(self) -> None:
        await stop(self._renewer)
        await self.connection.close()
