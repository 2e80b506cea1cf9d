"""This machine as a host: the watcher's code called in-process, scripts run with `sh -c`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.aio import kill_child, within
from gen_tui.backends.hosts.base import Host
from gen_tui.backends.hosts.errors import ResumeRefused, StartError
from gen_tui.backends.hosts.primitives import StartSpec
from gen_tui.backends.hosts.watch import LineSource, Watch
from gen_tui.backends.telemetry.nvml import read_gpus


class ProcessLines:
    """A local subprocess's stdout as a line source; closing it ends the process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def readline(self) -> str:
        assert self.process.stdout is not None
        return (await self.process.stdout.readline()).decode("utf-8", "replace")

    async def close(self) -> None:
        kill_child(self.process)  # not process.kill(): see aio.py
        await self.process.wait()


async def _start_sh(script: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        script,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )


REAP_WAIT_S = 10.0
"""How long a child /proc shows gone may take to be reaped (see `ended_status`)."""


class LocalHost(Host):
    """This machine: the same interface as `SSHHost`, the same watcher and scripts."""

    def __init__(
        self,
        output_dir: str | Path,
        name: str = "local",
        pattern: str | None = None,
        template: Sequence[str] | str | None = None,
    ) -> None:
        super().__init__(name, str(Path(output_dir).expanduser().resolve()), pattern, template)
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._exits: dict[int, int] = {}
        self.watcher_path: list[str] = []
        """Folders put before PATH for the watcher (the demo's simulated nvidia-smi)."""

    def _reap(self) -> None:
        """Collect the exit status of runs this host started and that have ended since."""
        for pid, child in list(self._children.items()):
            code = child.poll()
            if code is not None:
                del self._children[pid]
                self._exits[pid] = code

    async def ended_status(self, pid: int, wait_s: float = REAP_WAIT_S) -> int | None:
        """How a process this host started and /proc shows gone has ended: its exit code,
        or minus the signal that ended it (as Popen says); None when it was not started
        here (a detached process elsewhere is no child of anyone who could tell).

        Waits up to `wait_s` for it to be reaped. A killed process's first thread is a
        zombie in /proc as soon as it ends, but waitpid reports the process only once
        every other thread has ended too, which for a server with dozens of threads and
        gigabytes to unmap (SGLang after `kill -9`) took long enough on a loaded machine
        that the status read as unknown. Raises TimeoutError when it is still not reaped then."""
        self._reap()
        child = self._children.get(pid)
        if child is not None:
            try:
                await asyncio.to_thread(child.wait, wait_s)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"pid {pid} was not reaped within {wait_s:g} s") from None
            self._reap()
        return self._exits.get(pid)

    async def _ps_raw(
        self, pattern: str, output_dir: str | None, pids: Sequence[int] | None
    ) -> Mapping[str, Any]:
        self._reap()
        return await asyncio.to_thread(
            watcher.ps, pattern, output_dir, list(pids) if pids is not None else None
        )

    async def _tail_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return await asyncio.to_thread(watcher.tail_request, dict(spec))

    async def _heads_raw(self, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return await asyncio.to_thread(watcher.heads_request, dict(spec))

    async def _open_sh(self, script: str) -> LineSource:
        return ProcessLines(await _start_sh(script))

    async def _sh(self, script: str, timeout: float = 60.0) -> str:
        process = await _start_sh(script)
        try:
            stdout, _ = await within(process.communicate(), timeout)
        finally:
            kill_child(process)
            await process.wait()
        return stdout.decode("utf-8", "replace")

    async def _spawn(self, spec: StartSpec) -> int:
        try:
            child = await asyncio.to_thread(
                watcher.guarded_launch,
                spec.output_dir,
                spec.expect,
                spec.argv,
                spec.log,
                spec.cwd,
                spec.env,
                spec.exit_file,
            )
        except watcher.StaleStart:
            raise ResumeRefused.raced(self.name) from None
        except watcher.StartFailed as exc:
            raise StartError(f"{self.name}: {exc}") from None
        self._children[child.pid] = child
        return child.pid

    def watch(
        self,
        output_dir: str,
        datasets: Sequence[str],
        resume: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
    ) -> Watch:
        """As :meth:`Host.watch`; this machine's GPUs come from NVML when it is here (not
        when the demo puts its simulated nvidia-smi on the watcher's PATH)."""
        watch = super().watch(output_dir, datasets, resume, metrics_urls)
        if not self.watcher_path:
            watch.local_gpus = read_gpus
        return watch

    def _watcher_env(self) -> dict[str, str] | None:
        if not self.watcher_path:
            return None
        path = os.pathsep.join([*self.watcher_path, os.environ.get("PATH", os.defpath)])
        return {**os.environ, "PATH": path}

    async def _open_watcher(self, args: list[str]) -> LineSource:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *watcher.PYTHON_FLAGS,
            "-",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self._watcher_env(),
        )
        assert process.stdin is not None
        process.stdin.write(watcher.source().encode())
        await process.stdin.drain()
        process.stdin.close()
        return ProcessLines(process)

    async def close(self) -> None:
        self._reap()
