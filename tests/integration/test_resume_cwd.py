"""`r` in a working folder others can write in: their file would run as us.

The attack, found by an attacker's pass on a fresh clone (issue 16): a run of ours was
started from a shared folder (/tmp-like, 1777) as `python3 run_inference.py ...`. Python
puts the script's folder first on sys.path (and `python -m` the working folder), so a
`json.py` another user plants there after seeing the run in `ps` is imported by the relaunch
`r` makes, with our rights, environment and API key. The command line and the folder are
ours; what runs is not. A relaunch must refuse a working folder that anyone else can write
in, naming it, as the dataset folder check does.

The folders are checked on the host right before the launch (the watcher's `--start`, or
in-process locally): every folder code is taken from (the working folder, each script's, the
program's, PYTHONPATH entries) and every folder above them. A refusal names the folder, its
owner and mode, and nothing starts.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.hosts import LocalHost, RunError, RunProcess, SSHHost
from tests.support.runs import STANDIN
from tests.support.users import OTHER_USER, ensure_user, plant_module, shared_folder

AnyHost = LocalHost | SSHHost
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else None


@pytest.fixture
def shared_cwd() -> Iterator[Path]:
    """A working folder like /tmp: root's, 1777, anyone may create names in it."""
    with shared_folder("gen-tui-cwd-") as folder:
        yield folder


async def listed(host: AnyHost, process: subprocess.Popen, cwd: Path) -> RunProcess:
    """Our stand-in run as `host` lists it (once its command line and folder are read)."""
    for _ in range(100):
        run = next((r for r in (await host.survey()).runs if r.pid == process.pid), None)
        if run is not None and run.identity.cmdline[:1] == (PYTHON,) and run.cwd == str(cwd):
            assert run.mine
            return run
        await asyncio.sleep(0.2)
    raise AssertionError("our run was never listed")


async def stopped_run(host: AnyHost, argv: list[str], cwd: Path) -> RunProcess:
    """Our stand-in run of `argv` in `cwd`, as `host` lists it, stopped once listed."""
    process = subprocess.Popen(
        [*argv, "--output-dir", host.output_dir], cwd=cwd, stdout=subprocess.DEVNULL
    )
    try:
        return await listed(host, process, cwd)
    finally:
        process.terminate()
        process.wait()


async def refusal(host: AnyHost, run: RunProcess, marker: Path) -> str:
    """`r` on `run`: the one line it is refused with; had it started, `marker` shows it."""
    try:
        with pytest.raises(RunError) as refused:
            identity = await host.resume(run, 1000)
            await asyncio.sleep(2)
            await host.kill(identity, grace_s=2)
    finally:
        await asyncio.sleep(0.5)
        assert not marker.exists(), "code another user planted or pointed us at ran as root"
    assert "\n" not in str(refused.value)
    return str(refused.value)


async def test_r_never_relaunches_in_a_folder_others_can_plant_modules_in(
    host: AnyHost, shared_cwd: Path, tmp_path: Path
) -> None:
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 the second user can run")
    user = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-planted-module-ran-as-root"
    (shared_cwd / "run_inference.py").write_text(STANDIN)
    run = await stopped_run(host, [PYTHON, "run_inference.py", "--datasets", "B1"], shared_cwd)
    plant_module(user, shared_cwd, marker)
    assert await refusal(host, run, marker) == (
        f"{host.name}: refusing to start: {shared_cwd} holds code the command would run, and "
        f"{shared_cwd} is writable by others (mode 1777, owner uid 0), so another user could "
        "plant a module there or put their folder in its place, and it would run as you; "
        "start it from a folder of your own"
    )


async def test_r_never_relaunches_code_under_a_folder_others_can_rename_in(
    host: AnyHost, tmp_path: Path
) -> None:
    """Our own code folder (root's, 0755) in a folder anyone may write in without the sticky
    bit: another user can rename ours away between the check and the start and put theirs,
    with a planted module, at its path. The relaunch refuses it, naming the folder above."""
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 to run the stand-in with")
    with shared_folder("gen-tui-above-", 0o777) as shared:
        code = shared / "code"
        code.mkdir(mode=0o755)
        (code / "run_inference.py").write_text(STANDIN)
        run = await stopped_run(host, [PYTHON, "run_inference.py", "--datasets", "B1"], code)
        assert (await refusal(host, run, tmp_path / "none")).startswith(
            f"{host.name}: refusing to start: {code} holds code the command would run, and "
            f"{shared} is writable by others without the sticky bit (mode 0777, owner uid 0)"
        )


async def test_r_never_follows_a_link_another_user_can_repoint(
    host: AnyHost, tmp_path: Path
) -> None:
    """Our run started as `python3 /tmp-like/link/run_inference.py`, the link made by
    another user (to our code, at first) in a sticky folder: they own it, so they re-point
    it at their own folder once the run is listed, and the relaunch would run their script
    as root. Before: the link was followed (`stat -L`), our folder passed, and it ran."""
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 the second user can run")
    user = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-their-script-ran-as-root"
    with (
        shared_folder("gen-tui-link-") as shared,
        shared_folder("gen-tui-theirs-", 0o755) as theirs,
    ):
        ours = tmp_path / "code"
        ours.mkdir()
        (ours / "run_inference.py").write_text(STANDIN)
        (theirs / "run_inference.py").write_text(
            f"open({str(marker)!r}, 'w').write('ran as root')\n" + STANDIN
        )
        as_them = {"user": user.pw_uid, "group": user.pw_gid, "cwd": "/", "check": True}
        link = shared / "code"
        subprocess.run(["ln", "-s", str(ours), str(link)], **as_them)
        argv = [PYTHON, f"{link}/run_inference.py", "--datasets", "B1"]
        run = await stopped_run(host, argv, ours)
        subprocess.run(["ln", "-sfn", str(theirs), str(link)], **as_them)
        why = await refusal(host, run, marker)
    assert f"and {link} is a symlink made by uid {user.pw_uid}, not by you" in why, why


async def test_r_checks_pythonpath_entries_relative_to_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our PYTHONPATH names `lib`, relative: in the relaunch's working folder (ours), `lib`
    is a folder anyone may write in, where another user plants `json.py`. Before: only the
    working folder and the script's were checked, and the planted module ran as root."""
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 the second user can run")
    user = ensure_user(OTHER_USER)
    host = LocalHost(tmp_path / "out")
    (tmp_path / "out").mkdir()
    marker = tmp_path / "PWNED-planted-module-ran-as-root"
    with shared_folder("gen-tui-pythonpath-", 0o755) as ours:  # root's, 0755: they reach lib
        await _pythonpath_attack(host, ours / "code", marker, user, monkeypatch)


async def _pythonpath_attack(
    host: LocalHost, code: Path, marker: Path, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    code.mkdir()
    (code / "run_inference.py").write_text(STANDIN)
    (code / "lib").mkdir()
    (code / "lib").chmod(0o1777)
    monkeypatch.setenv("PYTHONPATH", "lib")
    run = await stopped_run(host, [PYTHON, "run_inference.py", "--datasets", "B1"], code)
    plant_module(user, code / "lib", marker)
    why = await refusal(host, run, marker)
    assert f"refusing to start: {code / 'lib'} holds code" in why, why
