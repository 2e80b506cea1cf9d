"""A start that dies at once is reported with the end of its log, not listed as a run.

Why: a resume with a typo in its template, or a missing prompt file, exits within a second;
the user must see why there and then (over SSH too), not find an empty run list later.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gen_tui.backends.hosts import StartError
from tests.support.runs import AnyHost


async def test_a_command_that_dies_at_once_is_refused_with_its_log(host: AnyHost) -> None:
    log = str(Path(host.output_dir) / "start.log")
    script = "import sys; print('no such prompt file: B9.jsonl', file=sys.stderr); sys.exit(3)"
    with pytest.raises(StartError) as raised:
        await host.start(["python3", "-c", script], log, settle_s=2.0)
    message = str(raised.value)
    assert "exited at once" in message and log in message
    assert "no such prompt file: B9.jsonl" in message


async def test_a_command_that_lives_is_started_and_named(host: AnyHost) -> None:
    log = str(Path(host.output_dir) / "start.log")
    python = "python3" if host.name != "local" else sys.executable
    identity = await host.start([python, "-c", "import time; time.sleep(30)"], log)
    try:
        assert identity.pid > 0 and identity.host == host.name
        assert "time.sleep(30)" in " ".join(identity.cmdline)
    finally:
        await host.kill(identity, grace_s=1.0)
