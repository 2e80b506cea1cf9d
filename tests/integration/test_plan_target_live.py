"""A headless run's deadline and cap changed while it goes (issue 34, "on the panel"): a real
`gen-tui run` over two `gen-tui sim` lanes (a slow free box, a fast priced API), its plan in
progress.json, and a new target written as the panel writes it (the host's shell, every
value quoted, into an output folder whose name needs quoting). The run re-plans at once,
says why, buys API tokens it did not need before, and publishes the new plan; an earlier
run's control file is ignored, and a bad one is said in one line and changes nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from bench.common import simulator
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts.local import LocalHost
from gen_tui.backends.plan.control import CONTROL_FILE, PlanTarget, stamped, target_text
from gen_tui.backends.progress.plan_view import PlanView
from gen_tui.backends.store.progress_file import ProgressFile
from tests.support.run_output import ENV, GEN_TUI

pytestmark = pytest.mark.timeout(180)

BOX = ("--slots", "4", "--tokens-per-s", "50")  # 200 tok/s, free
API = ("--slots", "32", "--tokens-per-s", "200", "--cost", "0,10")  # fast, $10 per M out
LENGTHS = ("--default-mean", "50", "--default-cv", "0.3")
BUDGET = 8_000  # 40 s on the box alone


def until(lines: list[str], run: subprocess.Popen[str], needle: str) -> str:
    """Read the run's output until a line holds `needle` (kept in `lines`); that line."""
    assert run.stdout is not None
    for line in run.stdout:
        lines.append(line)
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} never said:\n{''.join(lines)}")


def test_a_new_deadline_reaches_a_headless_run_and_it_replans_at_once(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    out = tmp_path / "out dir's $(x)"
    folder = out / "A"
    folder.mkdir(parents=True)
    stale = folder / CONTROL_FILE  # an earlier run's: "no cap" would let it spend freely
    stale.write_text(target_text(stamped("none", None)))
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    write_prompts(tmp_path / "prompts" / "A.jsonl", BUDGET // 20)
    vocab = ("--vocab-size", str(vocab_size), *LENGTHS)
    with simulator(*vocab, *BOX) as box, simulator(*vocab, *API) as api:
        args = [
            "run", "--plain", "--prompts-dir", str(tmp_path / "prompts"),
            "--tokenizer", str(tokenizer_dir), "--output-dir", str(out),
            "--lane", f"box={box}", "--lane", f"api={api},api=openai,concurrency=16,price=0/10",
            "--concurrency", "4", "--max-tokens-per-dataset", str(BUDGET),
            "--max-new-tokens", "200", "--deadline", "30m", "--max-cost", "0.5",
            "--plan-every", "30", "--model", "sim-model",
        ]  # fmt: skip
        run = subprocess.Popen(
            [*GEN_TUI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV, text=True
        )
        lines: list[str] = []
        try:
            first = until(lines, run, "info: plan: ")
            assert "api" not in first.split("(")[0], first  # the box alone meets 30 minutes
            plan = _progress_plan(folder)
            assert plan is not None and plan.max_cost == 0.5
            assert {lane.name: lane.tokens for lane in plan.lanes}["api"] == 0
            assert plan.deadline_at is not None and plan.deadline_at > time.time() + 25 * 60
            # A bad one: said in one line, nothing changes.
            (folder / CONTROL_FILE).write_text('{"deadline": "soon", "written_at": 1}')
            bad = until(lines, run, "ignored")
            assert "deadline 'soon': expected a time of day" in bad, bad
            # The panel's write, through the host's shell, into a folder that needs quoting.
            host = LocalHost(out)
            asked = time.time()
            path = asyncio.run(_write(host, run.pid, stamped("12s", 0.4)))
            assert path == str(folder.resolve() / CONTROL_FILE)
            said = until(lines, run, "plan changed: ")
            assert "deadline 12s, cap $0.400, set by" in said and " moved to api" in said, said
            assert time.time() - asked < 5  # at once, not at the next --plan-every (30 s)
            plan = _wait_plan(folder, lambda p: p.max_cost == 0.4)
            tokens = {lane.name: lane.tokens for lane in plan.lanes}
            assert tokens["api"] > 0, plan
            # 12 s from when the run took it (within a poll or two of the write).
            assert plan.deadline_at is not None and asked + 12 <= plan.deadline_at < asked + 15
            rest, _ = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
    output = "".join(lines) + rest
    assert run.returncode == 0, output
    assert output.count("plan target: ") == 1, output  # the stale file was never applied
    raw = (folder / "raw_responses.jsonl").read_bytes()
    made = [orjson.loads(line) for line in raw.splitlines()]
    assert any(record["lane"] == "api" for record in made), output
    assert sum(record["cost"] for record in made) <= 0.4
    assert not list(folder.glob(f".{CONTROL_FILE}.*"))  # no temporary file left behind


async def _write(host: LocalHost, pid: int, target: PlanTarget) -> str:
    """As the panel's host link does: the writer found in a survey, then its folders."""
    survey = await host.survey()
    (writer,) = [run for run in survey.runs if run.pid == pid]  # other tests' runs run too
    assert "A" in writer.datasets
    return await host.write_plan_target(writer, target)


def _progress_plan(folder: Path) -> PlanView:
    return _wait_plan(folder, lambda plan: True)


def _wait_plan(folder: Path, ok: Callable[[PlanView], bool]) -> PlanView:
    for _ in range(100):
        progress = ProgressFile.read(folder / "progress.json")
        if progress is not None and progress.plan is not None and ok(progress.plan):
            return progress.plan
        time.sleep(0.1)
    raise AssertionError("the new plan never reached progress.json")
