"""`k` on a gen-tui run waits for the drain the run promised itself, and says what the drain
did: the panel's grace and the run's agree, and the process is never blamed for draining."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.hosts import KillResult, LocalHost
from gen_tui.backends.hosts.argv import own_grace
from gen_tui.backends.hosts.kill import DRAIN_MARGIN_S, kill_wait, killed_detail, stopped_detail
from gen_tui.backends.hosts.scripts import appended_script, parse_appended
from gen_tui.backends.settings import DEFAULT_GRACE_S
from gen_tui.backends.sim import LengthProfile
from tests.support.polling import wait_until
from tests.support.records import recount

RUN = (sys.executable, "-m", "gen_tui.app.cli", "run")


@pytest.mark.parametrize(
    ("argv", "own"),
    [
        ((*RUN, "--grace", "12"), 12.0),
        ((*RUN, "--grace=3.5"), 3.5),
        (RUN, DEFAULT_GRACE_S),
        ((*RUN, "--grace", "soon"), DEFAULT_GRACE_S),
        (("python", "run_inference.py", "--grace", "12"), None),
    ],
)
def test_own_grace_is_read_from_a_gen_tui_command_line_only(
    argv: tuple[str, ...], own: float | None
) -> None:
    assert own_grace(argv) == own


def test_the_kill_waits_for_the_longer_of_the_panel_grace_and_the_run_drain() -> None:
    assert kill_wait((*RUN, "--grace", "30"), 10) == 30 + DRAIN_MARGIN_S
    assert kill_wait((*RUN, "--grace", "1"), 10) == 10
    assert kill_wait(("python", "run_inference.py"), 10) == 10


def test_the_outcome_says_what_happened_not_that_a_draining_run_ignored_sigterm() -> None:
    gen_tui = (*RUN, "--grace", "30")
    killed = killed_detail(7, gen_tui, 35, 3)
    assert "ignored" not in killed and "still draining 35 s after SIGTERM" in killed
    assert "its own grace: 30 s" in killed and "3 answers written while it drained" in killed
    assert "ignored SIGTERM for 10 s" in killed_detail(7, ("python", "x.py"), 10, None)
    assert stopped_detail(7, gen_tui, 1) == (
        "pid 7 drained and exited after SIGTERM; 1 answer written while it drained"
    )
    assert stopped_detail(7, ("python", "x.py"), None) == "pid 7 exited after SIGTERM"
    ran_out = stopped_detail(7, gen_tui, 0, elapsed=30.4)
    assert ran_out.startswith("pid 7 drained for its whole grace (30 s) and exited")
    assert "in flight are sent again on resume" in ran_out
    assert "whole grace" not in stopped_detail(7, gen_tui, 0, elapsed=29.0)


def test_appended_lines_are_counted_past_the_offset_whatever_the_path(tmp_path: Path) -> None:
    odd = tmp_path / "a b'$(touch PWNED)\";:x"
    odd.mkdir()
    first, second = odd / "raw.jsonl", tmp_path / "two.jsonl"
    first.write_bytes(b"old\n" * 5 + b"new\n" * 3 + b"torn")
    second.write_bytes(b"x\n")
    script = appended_script({str(first): 20, str(second): 0})
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert parse_appended(done.stdout) == 4  # three new lines past byte 20, one in the other
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    gone = appended_script({str(tmp_path / "missing"): 0})
    missing = subprocess.run(["sh", "-c", gone], capture_output=True, text=True, timeout=10)
    assert parse_appended(missing.stdout) is None


async def test_k_with_a_short_panel_grace_lets_the_run_finish_its_drain(
    sim: Any, tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    # About 4 s an answer: a 1 s panel grace would have SIGKILLed the run mid-drain.
    server = await sim(tokens_per_s=40, slots=16, profiles={"B2": LengthProfile(mean=160)})
    out = tmp_path / "out"
    out.mkdir()
    host = LocalHost(out)
    argv = [
        *RUN,
        *("--prompts-dir", str(prompts_dir(B2=200)), "--tokenizer", str(tokenizer_dir)),
        *("--output-dir", str(out), "--server-url", server.url, "--plain"),
        *("--concurrency", "8", "--max-new-tokens", "400", "--grace", "25"),
    ]
    identity = await host.start(argv, str(tmp_path / "run.log"))
    try:
        await wait_until(lambda: server.stats.in_flight >= 8, 60, "eight requests in flight")
        assert identity.pid in [run.pid for run in (await host.survey()).runs]  # as the panel has
        outcome = await host.kill(identity, grace_s=1)
    finally:
        await host.close()
    assert outcome.result is KillResult.STOPPED, outcome
    said = re.search(r"drained and exited after SIGTERM; (\d+) answers?", outcome.detail)
    assert said, outcome.detail
    _, records = recount(out / "B2")
    assert records == server.stats.completed, "a completed response was not written"
    assert 1 <= int(said.group(1)) <= records
