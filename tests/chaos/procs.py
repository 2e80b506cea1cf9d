"""Real processes for the chaos suite: `gen-tui sim` and `gen-tui run`, started and killed by pid.

Why subprocesses and not the in-process simulator: a kill must hit a real process at a real
moment (mid-write, mid-drain, mid-import), and the simulator must outlive the engine it
serves, or be killed under it. Output goes to files, not pipes, so a chatty process never
blocks on a full pipe while the test is busy elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.ports import free_port
from tests.support.runs import GEN_TUI


def child_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.update(extra)
    return env


class SimProcess:
    """`gen-tui sim` as a child process on a fixed loopback port (so it can come back there)."""

    def __init__(self, folder: Path, args: Sequence[str], port: int | None = None) -> None:
        self.folder = folder
        self.args = list(args)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 30.0) -> SimProcess:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = self.folder / f"sim-{self.starts}.log"
        with open(log, "wb") as handle:
            self.process = subprocess.Popen(
                [*GEN_TUI, "sim", "--port", str(self.port), *self.args],
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=child_env(),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while b"listening on" not in log.read_bytes():
            if self.process.poll() is not None:
                raise RuntimeError(f"gen-tui sim exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"gen-tui sim did not listen within {timeout:g} s")
            time.sleep(0.05)
        return self

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        return self.get("/_sim/stats")

    def configure(self, patch: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + "/_sim/config",
            data=json.dumps(patch).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Signal our child by pid and reap it; SIGKILL if it outstays `timeout`."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            return process.wait(timeout=10)


class RunProcess:
    """One `gen-tui run` child with its stdout and stderr in files."""

    def __init__(
        self, folder: Path, name: str, args: Sequence[str], env: dict[str, str] | None = None
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.stdout_path = folder / f"{name}.out"
        self.stderr_path = folder / f"{name}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [*GEN_TUI, "run", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env or child_env(),
                start_new_session=True,
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            raise AssertionError(
                f"gen-tui run (pid {self.pid}) did not exit within {timeout:g} s; "
                f"stdout tail: {self.stdout()[-1500:]}"
            ) from None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def record_lines(folder: Path) -> int:
    path = folder / "raw_responses.jsonl"
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def processes_with(*needles: str) -> list[tuple[int, float, list[str]]]:
    """(pid, start time, command line) of every live process whose raw /proc/PID/cmdline
    holds any of `needles` (zombies excluded). One cheap pass over /proc: fit for sampling."""
    import psutil

    wanted = [needle.encode() for needle in needles]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        if not any(needle in raw for needle in wanted):
            continue
        try:
            process = psutil.Process(int(entry))
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            started = process.create_time()
        except psutil.Error:
            continue
        words = raw.rstrip(b"\0").split(b"\0")
        found.append((int(entry), started, [w.decode("utf-8", "replace") for w in words]))
    return found


def writers_of(path: Path, pids: Sequence[int]) -> set[int]:
    """Those of `pids` that hold `path` open for writing (from /proc/PID/fd and fdinfo)."""
    target = os.path.realpath(path)
    writers = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != target:
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as handle:
                    flags = next(
                        int(line.split()[1], 8) for line in handle if line.startswith("flags:")
                    )
            except (OSError, StopIteration, ValueError):
                continue
            if flags & (os.O_WRONLY | os.O_RDWR):
                writers.add(pid)
    return writers


@contextlib.asynccontextmanager
async def openai_stub(
    chat: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[str]:
    """A loopback OpenAI-compatible server answering chat completions with `chat` (and an
    empty `/v1/models`); yields its URL."""

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
