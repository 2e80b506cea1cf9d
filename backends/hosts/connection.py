"""SSH connections to the GPU box: honest about trust, quick to notice a dead link, self-healing.

Why these choices:

- Targets are what people type: an `~/.ssh/config` alias or `user@host[:port]`. asyncssh
  reads `~/.ssh/config` (HostName, Port, User, IdentityFile, ProxyJump, UserKnownHostsFile),
  the agent and `~/.ssh/known_hosts` by default, so gen-tui connects wherever `ssh` does.
- Host keys are always verified. There is no accept-new and never `known_hosts=None`, not
  even where `~/.ssh/config` says `UserKnownHostsFile none` (asyncssh would then verify
  nothing; gen-tui checks against `~/.ssh/known_hosts`). An unknown or changed key refuses
  with a message that names the real host and port behind an alias, shows the fingerprint
  the server presented (and, when changed, the one on file) and the exact command to trust
  it after checking that fingerprint.
- Keepalive every 2 s, 3 misses: a dead link (a pulled cable, a frozen box) is noticed within
  about 8 s instead of the TCP timeout's minutes; the panel can say "disconnected" promptly.
- asyncssh has no reconnect, so :class:`SSHConnection` watches the connection close and
  reconnects with capped exponential backoff, catching `(OSError, asyncssh.Error)`. Its
  `state` is a short sentence for the UI: "connected", "disconnected: REASON",
  "reconnecting in 4s". Commands wait for the link to come back for a bounded time; one
  cut off by a drop raises :class:`Disconnected` (asyncssh would hand back its partial
  output with no exit status, which callers took for a failed command or a result).
- The far side is untrusted: a hostile or broken remote may print without end. `run` reads
  a command's output as it comes and stops it past MAX_OUTPUT_BYTES (asyncssh's own `run`
  held all of it: 2.4 GB from one survey); `open_process` gives its reader a receive
  window of MAX_LINE_BYTES, so one `readline` never holds more than that (asyncssh hands
  back a longer line in pieces of at most the window, which a JSON reader skips).
- Nothing here ever sends channel signals: sshd refuses them for root ("session signalling
  requires privilege separation"); processes are stopped with a `kill` command (see
  hosts/scripts.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence

import asyncssh

from gen_tui.backends.aio import stop, within
from gen_tui.backends.hosts.host_keys import (
    checked_known_hosts,
    host_key_message,
    known_hosts_problem,
    resolve,
)
from gen_tui.backends.hosts.ssh_target import SSHError, SSHOptions, Target

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
MAX_OUTPUT_BYTES = 64 << 20
"""The most output (stdout and stderr together) one `run` keeps: a survey of thousands of
processes and runs is a few MB; past this the command is stopped and the call fails."""
MAX_LINE_BYTES = 1 << 20
"""The most one `readline` of an `open_process` stream returns (the channel's window)."""
READ_BYTES = 1 << 16

StateCallback = Callable[[str], None]
ReconnectHook = Callable[[], Awaitable[None]]


class HostKeyError(SSHError):
    """The server's host key is unknown or changed: nothing was trusted."""


class AuthError(SSHError):
    """The server refused every key we offered."""


class Disconnected(SSHError):
    """A command could not run because the link is down and did not come back in time."""


class OutputTooLarge(SSHError):
    """A command printed more than it was allowed to; it was stopped."""


async def connect(
    target: str | Target,
    options: SSHOptions | None = None,
    client_factory: Callable[[], asyncssh.SSHClient] | None = None,
) -> asyncssh.SSHClientConnection:
    """Open one verified connection, or raise :class:`SSHError` with a message for a person."""
    if isinstance(target, str):
        target = Target.parse(target)
    options = options or SSHOptions()
    kwargs = options.connect_kwargs(target)
    if options.known_hosts is None:
        resolved = await asyncio.to_thread(resolve, target, options)
        if resolved.unchecked_in_config or resolved.unread:
            kwargs["known_hosts"] = checked_known_hosts()
    if client_factory is not None:
        kwargs["client_factory"] = client_factory
    try:
        return await asyncssh.connect(**kwargs)
    except asyncssh.HostKeyNotVerifiable:
        raise HostKeyError(await host_key_message(target, options)) from None
    except asyncssh.PermissionDenied as exc:
        resolved = await asyncio.to_thread(resolve, target, options)
        raise AuthError(
            f"{resolved.user}@{resolved.host}:{resolved.port} refused every key offered "
            f"({exc.reason}); check IdentityFile in ~/.ssh/config, `ssh-add -l`, and the "
            "server's authorized_keys"
        ) from None
    except TimeoutError:
        raise SSHError(
            f"cannot reach {target}: no answer within {options.connect_timeout_s:g} s"
        ) from None
    except ConnectionRefusedError:
        # asyncio says "Connect call failed ('10.0.0.7', 2222)": the word that tells the
        # user what to check is "refused" (nothing listens there, or a firewall says no).
        raise SSHError(
            f"cannot reach {target}: connection refused (is sshd listening on that port?)"
        ) from None
    except OSError as exc:
        # A known_hosts file that is missing or a folder fails here too, after the server
        # answered: said as what it is, not as a network fault.
        problem = await asyncio.to_thread(known_hosts_problem, target, options)
        if problem is not None:
            raise HostKeyError(problem) from None
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise SSHError(f"cannot reach {target}: {reason}") from None
    except asyncssh.Error as exc:
        raise SSHError(f"{target}: {exc.reason or type(exc).__name__}") from None


class _Client(asyncssh.SSHClient):
    """Remembers why the connection ended, for the "disconnected: REASON" state."""

    def __init__(self) -> None:
        self.lost_reason: str | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self.lost_reason = "closed"
        elif isinstance(exc, asyncssh.Error):
            self.lost_reason = exc.reason or type(exc).__name__
        else:
            self.lost_reason = str(exc) or type(exc).__name__


class _CutOff(Exception):
    """The link went while a started command's output was being read."""


async def _run_bounded(
    conn: asyncssh.SSHClientConnection, command: str, input: str | None, max_output: int
) -> asyncssh.SSHCompletedProcess:
    """`conn.run(command, input=input)`, its output read in pieces and counted: past
    `max_output` the channel is closed (the remote's next write fails) and
    :class:`OutputTooLarge` raised."""
    # errors="replace": a remote file or process name need not be UTF-8, and a strict
    # decoder would turn one bad byte in a log tail into a failed command.
    process = await conn.create_process(command, input=input, errors="replace")
    parts: dict[str, list[str]] = {"stdout": [], "stderr": []}
    size = 0

    async def drain(name: str, stream: asyncssh.SSHReader[str]) -> None:
        nonlocal size
        while piece := await stream.read(READ_BYTES):
            parts[name].append(piece)
            size += len(piece)
            if size > max_output:
                raise OutputTooLarge(f"the command printed over {max_output:,} characters")

    # Both at once: they share the channel's window, so a full stderr stalls stdout too.
    readers = [
        asyncio.ensure_future(drain("stdout", process.stdout)),
        asyncio.ensure_future(drain("stderr", process.stderr)),
    ]
    try:
        await asyncio.gather(*readers)
        await process.wait_closed()
    except (OSError, asyncssh.Error) as exc:
        raise _CutOff(describe(exc)) from None
    finally:
        for reader in readers:
            reader.cancel()
        process.close()
        await asyncio.gather(*readers, return_exceptions=True)
    return asyncssh.SSHCompletedProcess(
        env=process.env,
        command=process.command,
        subsystem=process.subsystem,
        exit_status=process.exit_status,
        exit_signal=process.exit_signal,
        returncode=process.returncode,
        stdout="".join(parts["stdout"]),
        stderr="".join(parts["stderr"]),
    )


def describe(exc: BaseException) -> str:
    """A one-line reason for a failed connect or a lost link."""
    if isinstance(exc, SSHError):
        return str(exc)
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


class SSHConnection:
    """A connection that comes back by itself: reconnect with backoff, state for the UI.

    `start()` makes the first connection and raises :class:`SSHError` if it fails (a wrong
    alias or an untrusted key should be seen at once, not retried forever). After that a
    lost link is reconnected in the background; `ready()` waits for it and `run()` waits
    a bounded time before it gives up with :class:`Disconnected`.
    """

    def __init__(
        self,
        target: str | Target,
        options: SSHOptions | None = None,
        on_state: StateCallback | None = None,
        backoff_s: Sequence[float] = BACKOFF_S,
    ) -> None:
        self.target = Target.parse(target) if isinstance(target, str) else target
        self.options = options or SSHOptions()
        self.on_state = on_state
        self.backoff_s = tuple(backoff_s)
        self.state = "not connected"
        self.last_error: str | None = None
        self.generation = 0
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: _Client | None = None
        self._up = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._closed = False
        self._hooks: list[ReconnectHook] = []
        self._after: asyncio.Task[None] | None = None

    def on_reconnect(self, hook: ReconnectHook) -> None:
        """Run `hook` (a coroutine function) after each reconnect, in a task of its own:
        what the old link carried on the far side (its session process, on which a drain
        notice names its writer) ended with it. A hook's error ends that hook only."""
        self._hooks.append(hook)

    async def _reconnected(self) -> None:
        for hook in list(self._hooks):
            with contextlib.suppress(Exception):
                await hook()

    @property
    def connected(self) -> bool:
        return self._up.is_set()

    def _set_state(self, state: str) -> None:
        self.state = state
        if self.on_state is not None:
            self.on_state(state)

    async def _open(self) -> None:
        client = _Client()
        self._set_state("connecting")
        conn = await connect(self.target, self.options, client_factory=lambda: client)
        self._conn, self._client = conn, client
        self.generation += 1
        self.last_error = None
        self._up.set()
        self._set_state("connected")

    async def start(self) -> None:
        """Connect for the first time (raises :class:`SSHError`), then keep the link up."""
        if self._supervisor is not None:
            return
        try:
            await self._open()
        except SSHError as exc:
            self.last_error = str(exc)
            self._set_state(f"disconnected: {exc}")
            raise
        self._supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        while not self._closed:
            conn, client = self._conn, self._client
            assert conn is not None and client is not None
            await conn.wait_closed()
            self._up.clear()
            if self._closed:
                return
            reason = client.lost_reason or "connection closed"
            self.last_error = reason
            self._set_state(f"disconnected: {reason}")
            attempt = 0
            while not self._closed:
                delay = self.backoff_s[min(attempt, len(self.backoff_s) - 1)]
                delay *= random.uniform(0.8, 1.2)
                await self._countdown(delay)
                try:
                    await self._open()
                    if self._hooks:
                        await stop(self._after)  # the last link's, if still running
                        self._after = asyncio.create_task(self._reconnected())
                    break
                except (OSError, asyncssh.Error, SSHError) as exc:
                    self.last_error = describe(exc)
                    self._set_state(f"disconnected: {self.last_error}")
                    attempt += 1

    async def _countdown(self, delay: float) -> None:
        remaining = delay
        while remaining > 0:
            self._set_state(f"reconnecting in {max(1, round(remaining))}s")
            step = min(1.0, remaining)
            await asyncio.sleep(step)
            remaining -= step

    async def ready(self, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        """The live connection, waiting up to `timeout` s for a reconnect."""
        if self._closed:
            raise Disconnected(f"{self.target}: connection closed")
        if self._supervisor is None:
            await self.start()
        try:
            await within(self._up.wait(), timeout)
        except TimeoutError:
            raise Disconnected(f"{self.target}: {self.state}") from None
        assert self._conn is not None
        return self._conn

    async def run(
        self,
        command: str,
        *,
        input: str | None = None,
        timeout: float = 60.0,
        max_output: int = MAX_OUTPUT_BYTES,
    ) -> asyncssh.SSHCompletedProcess:
        """Run one command (never retried: a retry could start something twice).

        A link lost mid-command raises :class:`Disconnected`: asyncssh then returns whatever
        output arrived with no exit status, which must never pass for a result. Output past
        `max_output` characters (stdout and stderr together) stops the command and raises
        :class:`OutputTooLarge`: what the remote prints is never held whole on trust.
        """
        conn = await self.ready(timeout)
        client = self._client
        try:
            result = await within(_run_bounded(conn, command, input, max_output), timeout)
        except OutputTooLarge as exc:
            raise OutputTooLarge(f"{self.target}: {exc}") from None
        except _CutOff as exc:
            reason = (client.lost_reason if client is not None else None) or str(exc)
            raise Disconnected(
                f"{self.target}: link lost before the command finished ({reason})"
            ) from None
        except TimeoutError:
            raise SSHError(f"{self.target}: command did not finish within {timeout:g} s") from None
        except (OSError, asyncssh.Error) as exc:
            raise Disconnected(f"{self.target}: {describe(exc)}") from None
        if result.exit_status is None:
            reason = (client.lost_reason if client is not None else None) or "connection lost"
            raise Disconnected(f"{self.target}: link lost before the command finished ({reason})")
        return result

    async def open_process(
        self, command: str, *, timeout: float = 60.0
    ) -> asyncssh.SSHClientProcess[str]:
        """Start a long-running command whose stdout the caller reads line by line."""
        conn = await self.ready(timeout)
        try:
            return await conn.create_process(command, window=MAX_LINE_BYTES, errors="replace")
        except (OSError, asyncssh.Error) as exc:
            raise Disconnected(f"{self.target}: {describe(exc)}") from None

    async def close(self) -> None:
        self._closed = True
        self._up.clear()
        await stop(self._supervisor)
        await stop(self._after)
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
        self._set_state("closed")
