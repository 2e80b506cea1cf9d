"""A server's last log line in the servers view outlives a tail of probes (issue 32): once
the router's probes fill the whole tail the launcher reads (its last 20 lines), there is
no line of the server's own left to show, and the view keeps the one it showed before
(`app/served.py`, `_row`) rather than going blank. A real `gen-tui sim` started from a
recipe by the panel, and real probes: the HTTP/2 preface sglang-router sends a worker to
learn its protocol, refused and logged by the sim as one line each."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import pytest

from gen_tui.backends.servers.process import PROBE_LINE
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.servers_view import cell, open_view, panel, sim_config, until_state

pytestmark = pytest.mark.timeout(180)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What sglang-router opens a worker with (HTTP/2's connection preface)."""
TAIL = 20
"""The lines of a server's log the launcher reads for its last line (process._lines)."""


def _probe(port: int) -> None:
    """One HTTP/2 probe of the server on `port`, as the router's (refused: HTTP/1.1 only)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(PREFACE)
        sock.settimeout(5)
        with contextlib.suppress(TimeoutError, ConnectionError):
            sock.recv(4096)  # its 400, then the close


def _tail(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.strip()][-TAIL:]


async def test_a_tail_of_probes_keeps_the_line_shown_before(tmp_path: Path, state: Path) -> None:
    port = free_port()
    app = panel(sim_config(tmp_path / "gen-tui.toml", {"a": port}))
    async with app.run_test(size=(160, 40)) as pilot:
        await open_view(app, pilot)
        await until_state(app, pilot, "a", "healthy")
        own = f"listening on http://127.0.0.1:{port}"
        await wait_until(lambda: own in cell(app, "a", "last log line"), 30, "its own line",
                         pause=pilot.pause)  # fmt: skip
        log = state / "a.log"
        for _ in range(TAIL + 5):
            await asyncio.to_thread(_probe, port)

        def only_probes() -> bool:
            tail = _tail(log)
            return len(tail) == TAIL and all(PROBE_LINE.search(line) for line in tail)

        await wait_until(only_probes, 30, "a tail of probes only", pause=pilot.pause,
                         detail=lambda: repr(_tail(log)[-3:]))  # fmt: skip
        # The rows are taken again once a second: three takes past the probes.
        for _ in range(30):
            await pilot.pause(0.1)
            shown = cell(app, "a", "last log line")
            assert own in shown, (shown, _tail(log)[-3:])
        print(f"shown after {TAIL + 5} probes: {shown!r}")
