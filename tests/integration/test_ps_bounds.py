"""A large process table of another user blinds no host (issue 30, point 4).

The attack, as reproduced on main: 40 processes of a second Unix user whose command lines
name `run_inference.py` with 19 arguments of 100,000 characters. The watcher's ps report
carried every command line whole (76 MB), past the SSH output bound (64 MiB): the host
showed "disconnected", nothing listed, `k` and `r` unusable. Now another user's command line
is cut to `watcher.CMDLINE_SHOWN` bytes (its identity keeps the whole one's SHA-256), so the
report's size follows the number of processes shown, not what others write. Real processes
of a real second account, locally and over the real sshd.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts import RunProcess
from tests.support.runs import AnyHost
from tests.support.users import OTHER_USER, ensure_user, folder_of, processes_of
from tests.support.watcher_ps import ps_report

PROCESSES = 40
ARGS = 19
ARG_CHARS = 100_000


def argv_of(index: int, out: Path) -> list[str]:
    """A `perl` that sleeps, its command line naming a run of `out` and 1.9 MB of arguments.
    (A run naming no folder would count as one of every folder surveyed on this machine,
    the other tests' running beside this one under xdist included.)"""
    words = [chr(ord("a") + (index + k) % 26) * ARG_CHARS for k in range(ARGS)]
    run = ["run_inference.py", "--datasets", "B1", "--output-dir", str(out)]
    return ["perl", "-e", "sleep 120", *run, *words]


@pytest.fixture
def big_table(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The 40 processes, each naming `tmp_path / "out"`: the `host` fixture's folder."""
    argvs = [argv_of(i, tmp_path / "out") for i in range(PROCESSES)]
    with processes_of(ensure_user(OTHER_USER), argvs) as procs:
        yield procs


def their_runs(
    runs: tuple[RunProcess, ...], procs: list[subprocess.Popen[bytes]]
) -> list[RunProcess]:
    pids = {process.pid for process in procs}
    return [run for run in runs if run.pid in pids]


@pytest.mark.timeout(120)
async def test_another_users_long_command_lines_are_cut_and_the_host_stays_listed(
    host: AnyHost, big_table: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    deadline = time.monotonic() + 30
    while len(found := their_runs((await host.survey()).runs, big_table)) < PROCESSES:
        assert time.monotonic() < deadline, f"{len(found)} of {PROCESSES} listed"
    by_pid = {run.pid: run for run in found}
    for index, process in enumerate(big_table):
        identity = by_pid[process.pid].identity
        whole = b"\0".join(word.encode() for word in argv_of(index, tmp_path / "out"))
        shown = b"\0".join(word.encode() for word in identity.cmdline)
        assert len(shown) <= watcher.CMDLINE_SHOWN
        assert identity.cmdline[:8] == tuple(argv_of(index, tmp_path / "out")[:8])
        assert identity.cmdline_bytes == len(whole)
        assert identity.cmdline_sha256 == hashlib.sha256(whole).hexdigest()
        assert identity.command.endswith(f"(cut: {len(whole):,} bytes in all)")
        assert by_pid[process.pid].datasets == ("B1",) and not by_pid[process.pid].mine
    # Two runs whose shown start is alike are still two processes.
    first = by_pid[big_table[0].pid].identity
    assert first.same_process(first)


@pytest.mark.timeout(120)
def test_the_ps_report_is_bounded_by_the_processes_it_shows(
    big_table: list[subprocess.Popen[bytes]],
) -> None:
    """The report as the watcher prints it on a GPU box: well under a MiB for 40 runs."""
    time.sleep(0.5)  # every perl has exec'd
    stdout, took = ps_report()
    report = json.loads(stdout)
    pids = {process.pid for process in big_table}
    assert len([proc for proc in report["procs"] if proc["pid"] in pids]) == PROCESSES
    assert len(stdout) < PROCESSES * 2 * watcher.CMDLINE_SHOWN + (256 << 10), len(stdout)
    assert took < 20, took


LOCK_FOLDERS = 2000


@pytest.mark.timeout(120)
def test_a_folder_of_lock_files_another_user_names_stays_out_of_the_report() -> None:
    """Their process names a folder of theirs with 2,000 dataset folders, each with a 16 KiB
    run.lock: the report keeps only the locks listed processes hold (33 MB on main)."""
    other = ensure_user(OTHER_USER)
    holder = json.dumps({"pid": 1, "argv": ["x" * (15 << 10)]})
    with folder_of(other, "gen-tui-locks-") as theirs:
        for index in range(LOCK_FOLDERS):
            folder: Path = theirs / f"D{index}"
            folder.mkdir()
            (folder / watcher.LOCK_FILE).write_text(holder)
        subprocess.run(["chown", "-R", f"{other.pw_uid}:{other.pw_gid}", str(theirs)], check=True)
        argv = ["perl", "-e", "sleep 120", "run_inference.py", "--output-dir", str(theirs)]
        with processes_of(other, [argv]) as (process,):
            time.sleep(0.5)  # perl has exec'd
            stdout, took = ps_report()
    report = json.loads(stdout)
    assert [proc["pid"] for proc in report["procs"] if proc["pid"] == process.pid]
    assert report["locks"].get(str(theirs), {}) == {}
    assert len(stdout) < 1 << 20, len(stdout)
    assert took < 20, took


@pytest.mark.timeout(120)
def test_another_users_many_long_record_paths_stay_out_of_the_report() -> None:
    """Their process holds 200 record files open for writing, each at the end of a 4 KB
    path: the report lists a few of them, not 800 KB of paths per process."""
    other = ensure_user(OTHER_USER)
    with folder_of(other, "gen-tui-paths-") as theirs:
        deep = theirs
        for level in range(15):
            deep = deep / (f"{level:02d}" + "p" * 250)
        fds: list[int] = []
        argv = ["perl", "-e", "sleep 120", "run_inference.py", "--datasets", "D0"]
        try:
            for index in range(200):
                folder = deep / f"D{index}"
                folder.mkdir(parents=True)
                fds.append(os.open(folder / watcher.RAW_FILE, os.O_WRONLY | os.O_CREAT, 0o644))
            with processes_of(other, [argv], pass_fds=fds) as (process,):
                time.sleep(0.5)  # perl has exec'd
                stdout, _ = ps_report()
        finally:
            for fd in fds:
                os.close(fd)
    proc = next(p for p in json.loads(stdout)["procs"] if p["pid"] == process.pid)
    # their process's entry, not the whole report: the report also lists this user's own
    # runs, and a second suite beside this one (same user) adds tens of KB of its own
    assert len(json.dumps(proc)) < 64 << 10, len(json.dumps(proc))
    assert 0 < len(proc["writes"]) <= watcher.OTHERS_WRITES
