"""The demo on a shared machine: it offers only its own runs, and its folder always goes.

Real processes: a stand-in for someone else's `gen-tui run` (its command line matches the
default run pattern), the demo's own stale run, and `gen-tui --demo` itself in a terminal
(tmux) that is closed or signalled while `q` drains it.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gen_tui.app.cli.launch import demo_app, mark_owner, reap_demo_folders
from gen_tui.app.demo_tui import STALE
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_links import Kill
from gen_tui.backends.hosts import RunIdentity
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until, wait_until_sync
from tests.support.surveys import SurveyClock
from tests.support.tui import end_started_runs, panel

# ---- point 14: the demo's `l` and `k` offer only what the demo started -----------------


def impostor(output_dir: Path) -> subprocess.Popen[bytes]:
    """Someone else's job, as the survey sees it: `... gen-tui run --output-dir DIR ...`."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)", "gen-tui", "run"]
    argv += ["--output-dir", str(output_dir), "--datasets", STALE]
    process = subprocess.Popen(argv, start_new_session=True)
    # exec'd: its command line is the one above
    wait_until_sync(
        lambda: "gen-tui" in psutil.Process(process.pid).cmdline(), 30, "the stand-in's start"
    )
    return process


def identity_of(process: subprocess.Popen[bytes]) -> RunIdentity:
    proc = psutil.Process(process.pid)
    return RunIdentity("local", proc.pid, proc.create_time(), "", tuple(proc.cmdline()))


async def test_the_demo_lists_and_kills_only_the_runs_it_started(tmp_path: Path) -> None:
    elsewhere = impostor(tmp_path / "someone-else")  # before the demo, anywhere on the box
    root = tmp_path / "demo"
    root.mkdir()
    app = demo_app(root, autostart=False)  # the engine's panels are not what this is about
    link = app.links[0]
    others = [elsewhere]
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            monitor = await wait_until(lambda: link.monitor, 60, pause=pilot.pause)
            surveyed = SurveyClock(monitor)
            own = await wait_until(lambda: link.started and link.started[0], 120, pause=pilot.pause)
            await wait_until(
                lambda: own.pid in [r.pid for r in monitor.runs], 60, pause=pilot.pause
            )
            # A second stand-in names the demo's own folder and dataset: still not the demo's.
            others.append(impostor(root / "output"))
            since = time.time()
            await wait_until(lambda: surveyed.at > since + 0.1, 30, pause=pilot.pause)
            await wait_until(lambda: surveyed.at > since + 2.1, 30, pause=pilot.pause)
            listed = {run.pid for run in (*monitor.runs, *monitor.ended)}
            assert listed == {own.pid}, f"the demo lists {listed}, it started only {own.pid}"

            await pilot.press("l")
            runs = await wait_until(
                lambda: isinstance(app.screen, RunsScreen) and app.screen, pause=pilot.pause
            )
            await pilot.pause(0.2)
            assert [row.pid for row in runs.rows()] == [own.pid]
            assert runs.query_one(RunTable).row_count == 1
            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {own.pid}" in body
            assert not any(f"pid {other.pid}" in body for other in others), body
            await pilot.press("n")
            await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, RunsScreen), pause=pilot.pause)

            # `k` on the stale dataset's panel names the demo's run, not the stand-in.
            panel(app, STALE).focus()
            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {own.pid}" in body and f"pid {others[1].pid}" not in body, body
            await pilot.press("n")

            # Even asked directly (a stale identity, a bug), the demo's host refuses.
            for other in others:
                link.send(Kill(identity_of(other)))

            def refused() -> list[str]:
                return [text for _, text in app.events if "not a run the demo started" in text]

            await wait_until(lambda: len(refused()) == 2, 30, pause=pilot.pause)
        for other in others:
            assert other.poll() is None, f"pid {other.pid} was stopped by the demo"
    finally:
        end_started_runs(link)  # leaving would drain it for some 30 s: not this test's
        app.stop_links()
        link.done.wait(timeout=30)
        for other in others:
            other.kill()
            other.wait()


# ---- point 15: the demo's folder goes whatever ends the process ----------------------------


class Terminal:
    """`gen-tui --demo` in a tmux on a private server (closing it touches nothing else)."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.tmux = ["tmux", "-S", str(tmp_path / f"tmux-{name}")]  # no socket left in /tmp
        self.tmp_path = tmp_path
        command = shlex.join(
            ["env", f"TMPDIR={tmp_path}", sys.executable, "-m", "gen_tui.app.cli", "--demo"]
        )
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", "demo", "-x", "80", "-y", "24", command],
            check=True,
        )
        pane = subprocess.run(
            [*self.tmux, "list-panes", "-t", "demo", "-F", "#{pane_pid}"],
            capture_output=True, text=True, check=True,
        ).stdout.split()[0]  # fmt: skip
        shell = psutil.Process(int(pane))
        self.app = next(
            (p for p in (shell, *shell.children(recursive=True)) if "gen_tui.app.cli" in
             " ".join(p.cmdline())),
            shell,
        )  # fmt: skip

    def pane(self) -> str:
        return subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", "demo"], capture_output=True, text=True
        ).stdout

    def wait(self, check: Callable[[], object], what: str, timeout: float = 90.0) -> None:
        wait_until_sync(check, timeout, what, interval=0.2, detail=lambda: f"pane:\n{self.pane()}")

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "demo", *keys], check=True)

    def close(self) -> None:
        """The terminal goes away: its processes get SIGHUP and a dead pty."""
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)

    def family(self) -> Iterator[psutil.Process]:
        """The app, its children, and the stale run it started (detached: by its folder)."""
        yield self.app
        with_children = [*self.app.children(recursive=True)]
        yield from with_children
        for proc in psutil.process_iter(["cmdline"]):
            line = " ".join(proc.info["cmdline"] or ())
            if "prompts-stale" in line and str(self.tmp_path) in line:
                yield proc


def described(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            out.append(f"{proc.pid}: ?")
    return out


def size_mb(folder: Path) -> float:
    """What the folder holds now (for the message); it may be going away as this counts."""
    total = 0
    with contextlib.suppress(OSError):
        for path in folder.rglob("*"):
            with contextlib.suppress(OSError):
                total += path.lstat().st_size if path.is_file() else 0
    return total / 1e6


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.parametrize(
    ("quit_first", "signum"),
    [(True, signal.SIGHUP), (True, signal.SIGTERM), (False, signal.SIGHUP)],
    ids=["q-then-terminal-closed", "q-then-sigterm", "terminal-closed"],
)
def test_the_demo_folder_goes_whatever_ends_it(
    tmp_path: Path, quit_first: bool, signum: signal.Signals
) -> None:
    term = Terminal(tmp_path, f"{signum.name}-{quit_first}")
    try:
        term.wait(lambda: "RUNNING" in term.pane() and "tok/s" in term.pane(), "the demo")
        (folder,) = tmp_path.glob("gen-tui-demo-*")
        term.wait(lambda: any("prompts-stale" in " ".join(p.cmdline()) for p in term.family()
                              if p is not term.app), "the stale run")  # fmt: skip
        family = list(term.family())
        if quit_first:
            term.keys("q")
            term.wait(lambda: "Quit gen-tui?" in term.pane(), "the quit question")
            term.keys("y")
            # The dashboard is gone from the screen: `main` is waiting for the runs it
            # stopped (the stale run drains, its files are checked), the moment a signal
            # used to kill the process with its folder left behind.
            term.wait(
                lambda: "gen-tui" not in term.pane() or not term.app.is_running(),
                "the app leaving the screen",
            )
        left_mb = size_mb(folder)
        if signum == signal.SIGHUP:
            term.close()
        elif term.app.is_running():
            term.app.send_signal(signum)
        _gone, alive = psutil.wait_procs(family, timeout=60)
        assert not alive, f"still running: {described(alive)}"
        assert not folder.exists(), f"{folder} ({left_mb:.0f} MB) was left behind"
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_next_demo_removes_the_folder_of_a_killed_one(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: the folder stays until a demo starts again, which removes
    it, and only it (a live demo's folder and an unmarked folder are left alone)."""
    term = Terminal(tmp_path, "KILL")
    try:
        term.wait(lambda: "RUNNING" in term.pane(), "the demo")
        (folder,) = tmp_path.glob("gen-tui-demo-*")
        term.app.send_signal(signal.SIGKILL)
        psutil.wait_procs([term.app], timeout=30)
    finally:
        term.close()
        for proc in psutil.process_iter(["cmdline"]):  # the stale run outlives a SIGKILL
            if str(tmp_path) in " ".join(proc.info["cmdline"] or ()):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
    assert folder.exists(), "SIGKILL: the folder stays until the next start"
    live = tmp_path / "gen-tui-demo-live"
    live.mkdir()
    mark_owner(live)  # this test's own process: alive
    unmarked = tmp_path / "gen-tui-demo-unmarked"
    unmarked.mkdir()

    assert reap_demo_folders(tmp_path) == [folder]  # what `gen-tui --demo` does first
    assert not folder.exists() and live.exists() and unmarked.exists()
