"""`r` in a working folder others can write in: their file would run as us.

The attack, found by an attacker's pass on a fresh clone (issue 16): a run of ours was
started from a shared folder (/tmp-like, 1777) as `python3 run_inference.py ...`. Python
puts the script's folder first on sys.path (and `python -m` the working folder), so a
`json.py` another user plants there after seeing the run in `ps` is imported by the relaunch
`r` makes, with our rights, environment and API key. The command line and the folder are
ours; what runs is not. A relaunch must refuse a working folder that anyone else can write
in, naming it, as the dataset folder check does.

The folders are read on the host (owner and mode, by a sh script, locally and over SSH)
before the start; a refusal names the folder and why, and nothing starts.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.backends.hosts import LocalHost, RunError, RunProcess, SSHHost
from tests.support.polling import wait_until
from tests.support.runs import STANDIN
from tests.support.users import OTHER_USER, ensure_user, shared_folder

AnyHost = LocalHost | SSHHost
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else None
PLANT = (
    "import os, sys\n"
    "open(os.path.join(sys.argv[1], 'json.py'), 'w').write(\n"
    "    'import os\\n'\n"
    '    \'if os.getuid() == 0: open(%r, "w").write("ran as root")\\n\'\n'
    "    'from importlib import import_module as _i\\n'\n"
    '    \'import sys as _s; _s.path.pop(0); _s.modules.pop("json"); _j = _i("json")\\n\'\n'
    "    'dumps = _j.dumps; dump = _j.dump\\n' % sys.argv[2])\n"
)


@pytest.fixture
def shared_cwd() -> Iterator[Path]:
    """A working folder like /tmp: root's, 1777, anyone may create names in it."""
    with shared_folder("gen-tui-cwd-") as folder:
        yield folder


async def listed(host: AnyHost, process: subprocess.Popen, cwd: Path) -> RunProcess:
    """Our stand-in run as `host` lists it (once its command line and folder are read)."""
    for _ in range(100):
        run = next((r for r in await host.list_runs() if r.pid == process.pid), None)
        if run is not None and run.identity.cmdline[:1] == (PYTHON,) and run.cwd == str(cwd):
            assert run.mine
            return run
        await asyncio.sleep(0.2)
    raise AssertionError("our run was never listed")


async def test_r_never_relaunches_in_a_folder_others_can_plant_modules_in(
    host: AnyHost, shared_cwd: Path, tmp_path: Path
) -> None:
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 the second user can run")
    user = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-planted-module-ran-as-root"
    (shared_cwd / "run_inference.py").write_text(STANDIN)
    argv = [PYTHON, "run_inference.py", "--datasets", "B1", "--output-dir", host.output_dir]
    ours = subprocess.Popen(argv, cwd=shared_cwd, stdout=subprocess.DEVNULL)
    try:
        run = await listed(host, ours, shared_cwd)
        await wait_until(lambda: (Path(host.output_dir) / "B1" / "argv.json").exists(), 20)
    finally:
        ours.terminate()
        ours.wait()
    subprocess.run(
        [PYTHON, "-c", PLANT, str(shared_cwd), str(marker)],
        user=user.pw_uid, group=user.pw_gid, cwd="/", check=True,
    )  # fmt: skip
    try:
        with pytest.raises(RunError) as refused:
            identity = await host.resume(run, 1000)
            await asyncio.sleep(2)
            await host.kill(identity, grace_s=2)
    finally:
        await asyncio.sleep(0.5)
        assert not marker.exists(), "a module another user planted ran as root"
    assert str(refused.value).startswith(
        f"refusing to relaunch from {shared_cwd}: it is writable by others (mode 1777), so a "
        "module planted there"
    ), refused.value
    assert "\n" not in str(refused.value)


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
        argv = [PYTHON, "run_inference.py", "--datasets", "B1", "--output-dir", host.output_dir]
        ours = subprocess.Popen(argv, cwd=code, stdout=subprocess.DEVNULL)
        try:
            run = await listed(host, ours, code)
        finally:
            ours.terminate()
            ours.wait()
        with pytest.raises(RunError) as refused:
            identity = await host.resume(run, 1000)
            await host.kill(identity, grace_s=2)
        assert str(refused.value).startswith(
            f"refusing to relaunch: {shared}, above the code it would run, it is writable by "
            "others without the sticky bit (mode 0777), so the code folder could be renamed"
        ), refused.value
        assert "\n" not in str(refused.value)
