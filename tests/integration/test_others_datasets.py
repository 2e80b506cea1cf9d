"""Another user's dataset in a shared output folder joins nothing of ours (issue 30, point 3).

The attack: in a sticky, world-writable output folder, a second Unix user makes `B9` and
fills it with records. `gen-tui export`, run as root, wrote them into root's training file
without a word; `verify` and `report` took the folder in too. Now each leaves it out, says
so in one line naming the folder, its owner and the flag, and `--include-folder B9` takes
it in. Real `gen-tui` processes, a real second account.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.users import OTHER_USER, ensure_user, give, shared_folder

GEN_TUI = str(Path(sys.executable).with_name("gen-tui"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def gen_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GEN_TUI, *args], capture_output=True, text=True, env=ENV, timeout=120, check=False
    )


@pytest.fixture
def shared_out(finished_run: tuple[Path, Path]) -> Iterator[tuple[Path, int]]:
    """(a 1777 output folder holding our A and B and the other user's B9, B9's records)."""
    user = ensure_user(OTHER_USER)
    with shared_folder("gentui-shared-out-") as out:
        for name in ("A", "B"):
            shutil.copytree(finished_run[0] / name, out / name)
        shutil.copytree(finished_run[0] / "B", out / "B9")
        give(out / "B9", user)
        records = (out / "B9" / "raw_responses.jsonl").read_bytes().count(b"\n")
        yield out, records


def test_export_leaves_another_users_folder_out_and_says_so(
    shared_out: tuple[Path, int], tmp_path: Path
) -> None:
    out, records = shared_out
    uid = ensure_user(OTHER_USER).pw_uid
    done = gen_tui("export", "--output-dir", str(out), "--format", "text", "--to", "-")
    assert done.returncode == 0, done.stderr
    left = [line for line in done.stderr.splitlines() if "left out" in line]
    assert left == [
        f"gen-tui: left out 1 folder of {out} that another user could have written: B9 "
        f"(owned by uid {uid} ({OTHER_USER})); `--include-folder NAME` takes one in"
    ]
    assert "B9:" not in done.stderr
    ours = sum((out / n / "raw_responses.jsonl").read_bytes().count(b"\n") for n in "AB")
    assert f"all: {ours} records" in done.stderr
    taken = gen_tui(
        "export", "--output-dir", str(out), "--format", "text", "--to", "-",
        "--include-folder", "B9",
    )  # fmt: skip
    assert taken.returncode == 0, taken.stderr
    assert "left out" not in taken.stderr
    assert f"B9: {records} records" in taken.stderr
    assert f"all: {ours + records} records" in taken.stderr


def test_verify_and_report_leave_it_out_too(shared_out: tuple[Path, int]) -> None:
    out, _ = shared_out
    verify = gen_tui("verify", "--output-dir", str(out))
    assert verify.returncode == 0, verify.stderr
    assert [line.split(":")[0] for line in verify.stderr.splitlines() if " records, " in line] == [
        "A",
        "B",
    ]
    assert sum("left out 1 folder" in line and "B9 (owned by uid" in line
               for line in verify.stderr.splitlines()) == 1  # fmt: skip
    report = gen_tui("report", "--output-dir", str(out))
    assert report.returncode == 0, report.stderr
    assert "B9" not in report.stdout
    assert "left out 1 folder" in report.stderr and "B9 (owned by uid" in report.stderr
    taken = gen_tui("report", "--output-dir", str(out), "--include-folder", "B9")
    assert "B9" in taken.stdout and "left out" not in taken.stderr
    named = gen_tui("verify", "--output-dir", str(out), "--datasets", "B9")
    assert named.returncode == 1
    assert "left out 1 folder" in named.stderr
    assert named.stderr.strip().splitlines()[-1] == f"gen-tui: error: {out} holds no dataset folder"
