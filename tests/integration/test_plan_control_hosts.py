"""The panel's write of a plan control file (issue 34, `T` on a headless run), on this
machine and over the real sshd: into each of the run's dataset folders, whose path needs
quoting for the shell (a quote, a space, a command substitution), atomically (no temporary
file left), with content the run accepts; a target the run would refuse is refused here,
in one line, before anything reaches the shell."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gen_tui.backends.hosts import RunIdentity, RunProcess
from gen_tui.backends.hosts.local import LocalHost
from gen_tui.backends.hosts.ssh import SSHHost
from gen_tui.backends.plan.control import CONTROL_FILE, ControlError, PlanTarget, read_target

AnyHost = LocalHost | SSHHost


def writer(out: Path, datasets: tuple[str, ...]) -> RunProcess:
    """A run as a survey finds it (only its datasets and output folder matter here)."""
    identity = RunIdentity("box", 4242, time.time(), "boot", ("gen-tui", "run"))
    return RunProcess(identity, datasets, "writing", 1.0, str(out), None, datasets, True)


async def test_the_control_file_lands_quoted_and_whole(host: AnyHost, tmp_path: Path) -> None:
    out = tmp_path / "o'ut $(touch pwned) dir"
    for name in ("A", "B-2"):
        (out / name).mkdir(parents=True)
    target = PlanTarget("07:30", 60.0, time.time())
    path = await host.write_plan_target(writer(out, ("A", "B-2")), target)
    assert path == str(out / "A" / CONTROL_FILE)
    for name in ("A", "B-2"):
        assert read_target(out / name / CONTROL_FILE) == target
        assert sorted(p.name for p in (out / name).iterdir()) == [CONTROL_FILE]  # no temp left
    assert not list(tmp_path.rglob("pwned")) and not Path("pwned").exists()
    # Written again (a second T): replaced, not appended to.
    later = PlanTarget(None, None, time.time())
    await host.write_plan_target(writer(out, ("A",)), later)
    assert read_target(out / "A" / CONTROL_FILE) == later
    assert json.loads((out / "A" / CONTROL_FILE).read_text())["deadline"] == "none"


async def test_a_target_the_run_would_refuse_never_reaches_the_shell(
    host: AnyHost, tmp_path: Path
) -> None:
    out = tmp_path / "out2"
    (out / "A").mkdir(parents=True)
    with pytest.raises(ControlError, match="cap"):
        await host.write_plan_target(writer(out, ("A",)), PlanTarget("8h", float("nan"), 1.0))
    with pytest.raises(ControlError, match="deadline"):
        await host.write_plan_target(writer(out, ("A",)), PlanTarget("soon';id'", 5.0, 1.0))
    assert not (out / "A" / CONTROL_FILE).exists()
