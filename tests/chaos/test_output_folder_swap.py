"""The folder above a dataset folder: whoever can rename in it can swap our dataset for a link.

The attack, found by an attacker's pass on a fresh clone (issue 16): the run's output folder
belongs to another user (`/scratch/alice/out`), or is writable by all without the sticky
bit. The dataset folder itself is ours and 0755, so it passed the folder check; once the
run had started, the other user renamed it away and put a link to a folder of ours in its
place. Every file a run opens by path from then on followed the link: progress.json
replaced a `progress.json` of ours there (its contents gone), history.jsonl was appended
to it. Now the folders above a dataset folder are checked as well, before anything is made
in them: each owned by us or root, and none writable by others unless sticky (as /tmp).

A real second Unix user performs the swap against a real `gen-tui run` (we are root in CI;
elsewhere these tests skip, saying why).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.store.records import BadFile, prepare_dataset_folder
from tests.support.runs import finish, run_args, spawn
from tests.support.users import OTHER_USER, ensure_user, folder_of

SWAP = r"""
import os, sys, time
out, victim, deadline = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
folder = os.path.join(out, "B1")
while time.time() < deadline:
    if os.path.exists(os.path.join(folder, "progress.json")):
        os.rename(folder, folder + ".moved")
        os.symlink(victim, folder)
        print("swapped", flush=True)
        break
    time.sleep(0.005)
"""
IMPORTANT = b"a progress.json of ours, in a folder of ours\n"


def system_python() -> str:
    """A Python the other user can run (ours may sit in root's home)."""
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 the second user can run")
    return python


@pytest.fixture
def victim() -> Iterator[Path]:
    """A folder of ours (root, 0755) that holds a progress.json the attacker wants replaced."""
    folder = Path(tempfile.mkdtemp(prefix="gen-tui-victim-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "progress.json").write_bytes(IMPORTANT)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def test_an_output_folder_of_another_user_cannot_redirect_a_run(
    victim: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any
) -> None:
    user = ensure_user(OTHER_USER)
    prompts = prompts_dir(B1=400)
    server = await sim(tokens_per_s=400.0)
    with folder_of(user, "gen-tui-theirs-") as out:
        attacker = subprocess.Popen(
            [system_python(), "-c", SWAP, str(out), str(victim), "40"],
            user=user.pw_uid,
            group=user.pw_gid,
            cwd="/",
            stdout=subprocess.PIPE,
        )
        try:
            args = run_args(tokenizer_dir, prompts, out, server.url, "--concurrency", "4")
            process = await spawn(*args, "--max-tokens-per-dataset", "3000")
            code, stdout, stderr = await finish(process)
        finally:
            attacker.kill()
            swapped, _ = attacker.communicate()
        assert (victim / "progress.json").read_bytes() == IMPORTANT, "the run wrote through"
        assert sorted(p.name for p in victim.iterdir()) == ["progress.json"]
        assert code == 1 and not swapped, (code, swapped, stderr)
        assert stderr.count("\n") == 1, stderr
        assert f"{out} is owned by uid {user.pw_uid}" in stderr, stderr
        assert not (out / "B1").exists()  # refused before anything was made in their folder
        assert server.stats.requests == 0, stdout


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_an_output_folder_others_can_rename_in_is_refused(tmp_path: Path, mode: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(mode)
    word = "others" if mode & 0o002 else "its group"
    with pytest.raises(BadFile) as refused:
        prepare_dataset_folder(out / "B1")
    message = str(refused.value)
    assert f"{out} is writable by {word} without the sticky bit" in message, message
    assert "\n" not in message and not (out / "B1").exists()


def test_a_sticky_shared_folder_is_fine_and_the_swap_fails_there(tmp_path: Path) -> None:
    """/tmp-like (1777, root's): others may create names but not rename ours."""
    user = ensure_user(OTHER_USER)
    out = Path(tempfile.mkdtemp(prefix="gen-tui-sticky-", dir="/tmp"))
    try:
        out.chmod(0o1777)
        prepare_dataset_folder(out / "B1")  # accepted
        tried = subprocess.run(
            [system_python(), "-c", "import os, sys; os.rename(sys.argv[1], sys.argv[1] + '.x')",
             str(out / "B1")],
            user=user.pw_uid, group=user.pw_gid, cwd="/", capture_output=True, text=True,
        )  # fmt: skip
        assert tried.returncode != 0 and "PermissionError" in tried.stderr
        assert (out / "B1").is_dir()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_a_link_of_another_user_above_the_output_folder_is_refused(tmp_path: Path) -> None:
    """A link in the path that someone else made can be re-pointed mid-run: refused, even
    when it points at a folder of ours today."""
    user = ensure_user(OTHER_USER)
    mine = tmp_path / "mine"
    (mine / "out").mkdir(parents=True)
    shared = Path(tempfile.mkdtemp(prefix="gen-tui-links-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        link = shared / "out-link"
        subprocess.run(
            [system_python(), "-c", "import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
             str(mine), str(link)],
            user=user.pw_uid, group=user.pw_gid, cwd="/", check=True,
        )  # fmt: skip
        with pytest.raises(BadFile) as refused:
            prepare_dataset_folder(link / "out" / "B1")
        assert f"{link} is a symlink made by uid {user.pw_uid}" in str(refused.value)
        assert not (mine / "out" / "B1").exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_new_output_folder_is_made_safe_whatever_the_umask(tmp_path: Path) -> None:
    """The folders a run makes above its dataset folder pass the new check themselves."""
    old = os.umask(0o002)
    try:
        prepare_dataset_folder(tmp_path / "a" / "b" / "B1")
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "B1"):
        assert folder.stat().st_mode & 0o777 == 0o755, folder


def test_a_start_in_an_output_folder_of_another_user_is_refused() -> None:
    from gen_tui.backends import watcher

    user = ensure_user(OTHER_USER)
    with folder_of(user, "gen-tui-theirs-") as out:
        launched: list[int] = []
        with pytest.raises(watcher.StartFailed, match=f"owned by uid {user.pw_uid}"):
            watcher.guarded_start(str(out), None, lambda: launched.append(1))
        assert not launched
        assert not (Path(out) / watcher.LOG_DIR).exists()  # nothing made in their folder
