"""A Slurm command that prints past the output limit ends at once (issue 32): slurm.py's
`local_runner` stops reading at MAX_OUTPUT_BYTES, kills the command and says so in one
line, whichever stream passed it, and even when a child of the command still holds the
other stream open. Before, the reader of the other stream waited for its end, which came
only with the runner's timeout (60 s by default): a squeue gone wild held the supervisor
for a minute and then was reported as "no answer"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from gen_tui.backends.servers.slurm import MAX_OUTPUT_BYTES, local_runner

TIMEOUT_S = 30.0
"""The runner's timeout: the command must end long before it."""
FLOOD = "import sys\nline = b'x' * 65535 + b'\\n'\nwhile True:\n    sys.{}.buffer.write(line)\n"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_a_command_past_the_limit_ends_at_once_in_one_line(
    stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    began = time.monotonic()
    code, out, err = await asyncio.wait_for(
        local_runner(timeout=TIMEOUT_S)([sys.executable, "-c", FLOOD.format(stream)]), 60
    )
    took = time.monotonic() - began
    assert code == 1 and out == "", (code, out[:200])
    assert err == f"{sys.executable}: printed more than {MAX_OUTPUT_BYTES:,} bytes: stopped"
    assert took < 5.0, f"{took:.1f} s (the timeout is {TIMEOUT_S:g} s)"
    assert "Unknown child process" not in caplog.text, caplog.text
    print(f"{stream}: ended in {took:.2f} s: {err}")


async def test_a_child_holding_the_other_stream_does_not_hold_the_runner(
    tmp_path: Path,
) -> None:
    """`sh` prints past the limit while a child of its own (sleep) keeps stderr open."""
    pid_file = tmp_path / "sleep.pid"
    script = f'sleep 120 & echo $! > "$1"; exec {shlex.quote(sys.executable)} -c "$0"'
    began = time.monotonic()
    try:
        code, _out, err = await asyncio.wait_for(
            local_runner(timeout=TIMEOUT_S)(
                ["sh", "-c", script, FLOOD.format("stdout"), str(pid_file)]
            ),
            60,
        )
        took = time.monotonic() - began
    finally:
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the sleep: ours to end
    assert code == 1 and "printed more than" in err, (code, err)
    assert took < 5.0, f"{took:.1f} s (the timeout is {TIMEOUT_S:g} s)"
    print(f"ended in {took:.2f} s with a child holding stderr: {err}")
