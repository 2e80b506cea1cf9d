"""Another user's `gen-tui run --config FILE` with a relative FILE (issue 31, tried as a new
user: "folder unknown" in `l`). The watcher resolves FILE against the run's working folder,
read from /proc/PID/cwd: a watcher that may read it (root) names the run's output folder; a
login that is not the run's owner may not (the kernel refuses /proc/PID/cwd, EACCES), and
there "folder unknown", with why, is the truth. Real processes of real second accounts."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.users import CSH_USER, OTHER_USER, ensure_user, folder_of, give, processes_of
from tests.support.watcher_ps import ps_report

ARGV = ["perl", "-e", "sleep 120", "gen-tui", "run", "--config", "gen-tui.toml"]


@pytest.fixture
def their_run() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Another user's run started in their project folder, its config named relative."""
    other = ensure_user(OTHER_USER)
    with folder_of(other, "gentui-project-") as project:
        give(project, other)
        config = project / "gen-tui.toml"
        config.write_text('[run]\noutput_dir = "their-out"\n')
        give(config, other)
        with processes_of(other, [ARGV], cwd=str(project)) as procs:
            yield procs[0], str(project)


def listed(report: str, pid: int) -> dict[str, Any]:
    procs = json.loads(report)["procs"]
    return next(info for info in procs if info["pid"] == pid)


@pytest.mark.timeout(120)
def test_a_watcher_that_may_read_its_cwd_names_the_folder(
    their_run: tuple[subprocess.Popen[bytes], str],
) -> None:
    process, project = their_run
    info = listed(ps_report()[0], process.pid)  # root: /proc/PID/cwd is readable
    assert info["cwd"] == project
    assert info["output_dir_abs"] == f"{project}/their-out", info
    assert info["output_dir_unknown"] is None


@pytest.mark.timeout(120)
def test_a_login_that_may_not_read_its_cwd_says_the_folder_is_unknown_and_why(
    their_run: tuple[subprocess.Popen[bytes], str],
) -> None:
    process, _project = their_run
    info = listed(ps_report(ensure_user(CSH_USER))[0], process.pid)
    assert info["cwd"] is None  # EACCES: another user's process
    assert info["output_dir_abs"] is None
    assert "relative to a working folder that cannot be read" in info["output_dir_unknown"]
