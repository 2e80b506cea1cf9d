"""Another user's links in a dataset folder: nothing outside the folder is read or written.

Why: on a shared GPU box the scratch folders are world-writable. Another user who can create
names in a dataset folder used to plant `raw_responses.jsonl.torn.<ms>` (the milliseconds are
guessable), `run.lock` or `.progress.json.<pid>.tmp` as links to a file of ours: the engine
then copied a secret token into a 0644 side file they could read, then overwrote it. Now the
engine refuses such a folder in one line (`check_dataset_folder`), and underneath, every file
is opened without following links, new names with O_EXCL, side files 0600.

A real second Unix user plants the links (we are root in CI; elsewhere these tests skip).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.backends import watcher
from gen_tui.backends.store.lock import DatasetLock
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.records import (
    ERRORS_FILE,
    LOCK_FILE,
    PROGRESS_FILE,
    RAW_FILE,
    BadFile,
    RecordFileError,
    RecordWriter,
    check_dataset_folder,
    open_private,
    prepare_dataset_folder,
    quarantine_torn_tail,
    scan_records,
    write_json_atomic,
)
from tests.support.users import ensure_user

OTHER = "gentui-other2"
SECRET = b'{"sample_id": 1, "completion_tokens": 5, "token": "hf_SECRET_TOKEN"}\n'
TORN = b'{"sample_id": 2, "completion_tokens": 3, "text": "cut he'


@pytest.fixture(scope="module")
def other_uid() -> int:
    """A second Unix user, made once (idempotent)."""
    return ensure_user(OTHER).pw_uid


@pytest.fixture
def shared() -> Iterator[Path]:
    """A scratch folder both users reach and write in (pytest's tmp folder is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="gen-tui-shared-", dir="/tmp"))
    base.chmod(0o1777)  # a world-writable scratch folder, as on a shared box
    yield base
    shutil.rmtree(base, ignore_errors=True)


def as_other(script: str, *args: str) -> None:
    """Run a Python snippet as the other user (the attacker), with a system interpreter
    (ours may sit in root's home, which the other user cannot enter)."""
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 the second user can run")
    subprocess.run([python, "-c", script, *args], user=OTHER, check=True, timeout=60, cwd="/")


@pytest.fixture
def victim(shared: Path) -> Path:
    """A secret of ours (root, 0600 in a 0700 folder): what the links point at."""
    folder = shared / "home"
    folder.mkdir(mode=0o700)
    path = folder / "token"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def untouched(path: Path, before: os.stat_result) -> bool:
    after = path.stat()
    return path.read_bytes() == SECRET and (after.st_mtime_ns, after.st_size, after.st_mode) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_mode,
    )


def test_a_folder_others_can_write_in_is_refused_in_one_line(other_uid: int, shared: Path) -> None:
    theirs = shared / "theirs"
    as_other("import os, sys; os.mkdir(sys.argv[1], 0o755)", str(theirs))
    cases = {theirs: f"owned by uid {other_uid}"}
    for mode, word in ((0o777, "others"), (0o1777, "others"), (0o775, "its group")):
        folder = shared / f"mode{mode:o}"
        folder.mkdir()
        folder.chmod(mode)
        cases[folder] = f"writable by {word}"
    mine = shared / "mine"
    mine.mkdir(mode=0o755)
    link = shared / "link"
    as_other("import os, sys; os.symlink(sys.argv[1], sys.argv[2])", str(mine), str(link))
    cases[link] = f"symlink made by uid {other_uid}"
    for folder, why in cases.items():
        with pytest.raises(BadFile) as refused:
            check_dataset_folder(folder)
        message = str(refused.value)
        assert why in message and str(folder) in message and "\n" not in message, message
    check_dataset_folder(mine)  # ours, 0755: fine


def test_a_start_log_folder_made_by_another_user_is_refused(
    other_uid: int, shared: Path, victim: Path
) -> None:
    """The start count, start lock and relaunch logs live in `.gen-tui-logs`: made by another
    user (with links to our file waiting), it is refused before anything is opened."""
    out = shared / "out"
    out.mkdir()
    out.chmod(0o1777)
    before = victim.stat()
    plant = (
        "import os, sys\n"
        "logs = os.path.join(sys.argv[1], '.gen-tui-logs')\n"
        "os.mkdir(logs); os.chmod(logs, 0o777)\n"
        "for name in ('start.lock', 'start.seq', '.start.seq.%d' % int(sys.argv[3])):\n"
        "    os.symlink(sys.argv[2], os.path.join(logs, name))\n"
    )
    as_other(plant, str(out), str(victim), str(os.getpid()))
    launched = []
    with pytest.raises(watcher.StartFailed) as refused:
        watcher.guarded_start(str(out), None, lambda: launched.append(1))
    assert "owned by uid" in str(refused.value) and "\n" not in str(refused.value)
    assert not launched and untouched(victim, before)


def test_links_planted_in_a_dataset_folder_are_never_followed(
    other_uid: int, shared: Path, victim: Path
) -> None:
    """The layer under the folder check: even in a folder the check refuses (sticky, 1777,
    as /tmp is), no file function follows a link; what they create is ours and 0600."""
    folder = shared / "B1"
    folder.mkdir()
    folder.chmod(0o1777)
    (folder / RAW_FILE).write_bytes(b'{"sample_id": 0, "completion_tokens": 4}\n' + TORN)
    before = victim.stat()
    now_ms = int(time.time() * 1000)
    plant = (
        "import os, sys, json\n"
        "folder, target, now, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]\n"
        "for ms in range(now - 1000, now + 20000):\n"
        "    os.symlink(target, os.path.join(folder, 'raw_responses.jsonl.torn.%d' % ms))\n"
        "for name in ('run.lock', 'errors.jsonl', '.progress.json.%s.tmp' % pid):\n"
        "    os.symlink(target, os.path.join(folder, name))\n"
    )
    as_other(plant, str(folder), str(victim), str(now_ms), str(os.getpid()))

    # The engine's order: check the folder, lock, scan and repair, write, note errors.
    with pytest.raises(BadFile, match="writable by others"):
        check_dataset_folder(folder)
    with pytest.raises(BadFile, match="symlink"):
        DatasetLock(folder / LOCK_FILE).acquire()
    scan = scan_records(folder / RAW_FILE)
    assert (scan.tokens, scan.records, scan.torn_tail) == (4, 1, TORN)
    side = quarantine_torn_tail(folder / RAW_FILE, scan)
    assert side is not None and side.read_bytes() == TORN
    side_stat = side.lstat()
    assert not side.is_symlink() and side_stat.st_uid == 0 and side_stat.st_mode & 0o777 == 0o600
    assert (folder / RAW_FILE).read_bytes() == b'{"sample_id": 0, "completion_tokens": 4}\n'
    write_json_atomic(folder / PROGRESS_FILE, {"pid": os.getpid()})
    progress = folder / PROGRESS_FILE
    assert not progress.is_symlink() and progress.stat().st_mode & 0o777 == 0o600
    assert json.loads(progress.read_bytes()) == {"pid": os.getpid()}
    with pytest.raises(BadFile, match="symlink"):
        open_private(folder / ERRORS_FILE)
    assert untouched(victim, before)

    # A record file, lock or progress file that is a link: refused, never read.
    (folder / RAW_FILE).unlink()
    progress.unlink()
    as_other(
        "import os, sys\nfor name in sys.argv[2:]:\n    os.symlink(sys.argv[1], name)\n",
        str(victim),
        str(folder / RAW_FILE),
        str(folder / PROGRESS_FILE),
    )
    with pytest.raises(RecordFileError, match="symlink"):
        scan_records(folder / RAW_FILE)
    with pytest.raises(RecordFileError, match="symlink"):
        RecordWriter(folder / RAW_FILE)
    assert ProgressFile.read(folder / PROGRESS_FILE) is None
    tail = watcher.DatasetTail(str(shared), "B1")
    tail.poll()
    tail.poll_meta(watcher.read_lock_table())
    assert (tail.total_tokens, tail.total_samples, tail.progress) == (0, 0, None)
    assert tail.problem is not None and "symlink" in tail.problem
    assert watcher.read_holder(str(folder / LOCK_FILE)) == {}
    assert untouched(victim, before)


def test_temporary_and_side_files_are_new_and_private(tmp_path: Path) -> None:
    """Without a second user: a name taken in advance is passed over, never reused."""
    path = tmp_path / PROGRESS_FILE
    (tmp_path / f".{PROGRESS_FILE}.{os.getpid()}.tmp").write_bytes(b"someone else's")
    write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_bytes()) == {"a": 1} and path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / f".{PROGRESS_FILE}.{os.getpid()}.tmp").read_bytes() == b"someone else's"
    with open_private(tmp_path / ERRORS_FILE) as handle:
        handle.write(b"x\n")
    assert (tmp_path / ERRORS_FILE).stat().st_mode & 0o777 == 0o600
    fd = watcher.open_log(str(tmp_path / "relaunch.log"))
    os.close(fd)
    assert (tmp_path / "relaunch.log").stat().st_mode & 0o777 == 0o600


def test_a_new_dataset_folder_is_safe_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        prepare_dataset_folder(tmp_path / "out" / "B1")
    finally:
        os.umask(old)
    assert (tmp_path / "out" / "B1").stat().st_mode & 0o777 == 0o755
    (tmp_path / "out" / "B2").mkdir()
    (tmp_path / "out" / "B2").chmod(0o775)
    with pytest.raises(BadFile, match="writable by its group"):
        prepare_dataset_folder(tmp_path / "out" / "B2")
