"""`gen-tui sim`'s command line, as the simulator's CLI tests drive it: served as a process of
its own until SIGTERM, or refusing bad flags in one line.

Both ends are the same for every such test, so they live here once: a served simulator
must stop on SIGTERM with exit 0 and no traceback, and a refused flag must say one line
beginning `gen-tui sim: error:` on stderr and exit 2.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import pytest

from gen_tui.backends.sim import main

START_S = 15.0
"""How long the process may take to say where it listens (Python and aiohttp start)."""


@asynccontextmanager
async def sim_process(*argv: str, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
    """The simulator's CLI with `argv` (`--port 0` is added) in a process of its own; yields
    its URL once it prints it. On leaving normally it is sent SIGTERM and must end with 0 and
    no traceback; on a failure it is killed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from gen_tui.backends.sim import main; raise SystemExit(main())",
        *("--port", "0", *argv),
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), START_S)
        assert line.startswith(b"listening on http://127.0.0.1:"), line
        yield line.decode().split()[-1]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10.0) == 0
        assert b"Traceback" not in await proc.stderr.read()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def assert_refused_in_one_line(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`gen-tui sim ARGV` exits 2 with one line on stderr naming the error, nothing on stdout."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gen-tui sim: error: ")
    assert captured.err.count("\n") == 1
