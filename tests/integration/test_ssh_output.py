"""A hostile remote's output over a real sshd: what one command may make the client hold.

The audit saw a survey grow the client by 2.4 GB from a remote that printed without end.
`SSHConnection.run` must stop a command past its output bound and fail naming it, in
bounded memory (tracemalloc's peak); `open_process` lines are bounded by the channel's
window; well-behaved commands still get their whole output and exit status.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator

import pytest

from gen_tui.backends.hosts.connection import MAX_LINE_BYTES, OutputTooLarge, SSHConnection
from tests.support.sshd import Sshd

BOUND = 1 << 20
FLOOD = "head -c 40000000 /dev/zero | tr '\\0' a"
"""40 MB without a newline: far past BOUND, yet a run without the bound ends."""


@pytest.fixture
async def connection(sshd: Sshd) -> AsyncIterator[SSHConnection]:
    conn = SSHConnection(sshd.target, sshd.options())
    await conn.start()
    yield conn
    await conn.close()


@pytest.mark.parametrize("where", ["stdout", "stderr"])
async def test_endless_output_stops_the_command_in_bounded_memory(
    connection: SSHConnection, where: str
) -> None:
    command = FLOOD if where == "stdout" else f"{FLOOD} >&2"
    tracemalloc.start()
    try:
        with pytest.raises(OutputTooLarge, match=f"printed over {BOUND:,} characters"):
            await connection.run(command, max_output=BOUND, timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * BOUND, f"peak {peak:,} bytes for a {BOUND:,} bound"
    result = await connection.run("echo still here; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_status) == ("still here\n", "err\n", 3)


async def test_a_command_with_input_and_much_output_within_the_bound(
    connection: SSHConnection,
) -> None:
    result = await connection.run("cat; head -c 3000000 /dev/zero | tr '\\0' b", input="in\n")
    assert result.stdout == "in\n" + "b" * 3_000_000 and result.exit_status == 0


async def test_a_line_without_end_comes_in_pieces_of_at_most_the_window(
    connection: SSHConnection,
) -> None:
    process = await connection.open_process(f"{FLOOD}; echo; echo done")
    try:
        longest = 0
        tracemalloc.start()
        try:
            while (line := await process.stdout.readline()) != "done\n":
                assert line, "the stream ended before its last line"
                longest = max(longest, len(line))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        process.close()
    assert longest <= MAX_LINE_BYTES + (64 << 10)
    assert peak < 8 * MAX_LINE_BYTES, f"peak {peak:,} bytes"


async def test_output_that_is_not_utf8_is_read_with_its_bad_bytes_replaced(
    connection: SSHConnection,
) -> None:
    # A log tail or a process name in latin-1: one bad byte must not fail the command.
    result = await connection.run("printf 'caf\\351 ok\\n'; printf '\\377err\\n' >&2")
    assert result.exit_status == 0
    assert result.stdout == "caf\ufffd ok\n" and result.stderr == "\ufffderr\n"
    process = await connection.open_process("printf 'na\\351me\\nnext\\n'")
    try:
        assert await process.stdout.readline() == "na\ufffdme\n"
        assert await process.stdout.readline() == "next\n"
    finally:
        process.close()
