"""gen-tui as a user starts it: `main`'s refusals in one line, a window that does not wait for
heavy imports, and the demo in a real tmux terminal (keys, quit, a terminal that dies)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from gen_tui.app.cli.launch import main
from gen_tui.app.host_sources import HostSource
from tests.support.polling import wait_until_sync

TMUX = ["tmux", "-L", f"gen-tui-test-{os.getpid()}"]
"""A tmux server of this test process's own: a second suite beside it (or a user's own
tmux) neither shares its sessions nor gives them its environment."""


def test_main_without_a_config_explains_how_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code = main(argparse.Namespace(tui_demo=False, tui_config=None))
    assert code == 2
    err = capsys.readouterr().err
    assert "gen-tui --demo" in err and "gen-tui --config FILE" in err


def test_main_with_a_bad_config_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text('[run]\ntokenizer = "tok"\nbudget = "10M"\n')
    code = main(argparse.Namespace(tui_demo=False, tui_config=path))
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gen-tui: error: ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--stale-after", "0"], "--stale-after must be more than 0 seconds"),
        (["--host", "gpu-box"], "--host and --remote-dir go together"),
        (["--demo", "--host", "x", "--remote-dir", "y"], "--demo runs on its own"),
    ],
)
def test_main_refuses_bad_flags_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gen_tui.app.cli.parser import build_parser

    code = main(build_parser().parse_args(argv))
    assert code in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_the_window_does_not_wait_for_heavy_imports(tmp_path: Path) -> None:
    """transformers, the engine's aiohttp and the SSH stack load in workers, not at startup."""
    code = (
        "import sys, tempfile, pathlib; import gen_tui.app.cli.main, gen_tui.app.cli.launch; "
        "from gen_tui.app.demo_tui import DemoSource, stale_source; "
        "stale_source(DemoSource(pathlib.Path(tempfile.mkdtemp()))); "
        "print(sorted(m for m in ('transformers', 'aiohttp', 'asyncssh', 'psutil') "
        "if m in sys.modules))"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its mkdtemp: not one more folder in /tmp
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]", f"imported at startup: {out.stdout.strip()}"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_demo_in_a_real_tmux_session(tmp_path: Path) -> None:
    """`gen-tui --demo` at 80x24 in tmux: panels come up, keys answer, q drains and exits."""
    session = f"gen-tui-test-{os.getpid()}"
    command = (
        f"TMPDIR={tmp_path} {sys.executable} -m gen_tui.app.cli --demo; echo EXIT=$?; sleep 30"
    )
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command], check=True
    )

    def pane() -> str:
        return subprocess.run(
            [*TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_pane(*words: str, timeout: float = 40.0) -> str:
        return wait_until_sync(
            lambda: (text := pane()) and all(word in text for word in words) and text,
            timeout,
            f"{words} in the pane",
            interval=0.2,
            detail=lambda: f"pane:\n{pane()}",
        )

    try:
        text = wait_pane("B1_glaive", "B8_ultrachat", "RUNNING", "tok/s")
        assert list(tmp_path.glob("gen-tui-demo-*")), "the demo works in a temporary folder"
        assert "k Kill" in text and "q Quit" in text
        lines = text.splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
        subprocess.run([*TMUX, "send-keys", "-t", session, "?"], check=True)
        wait_pane("gen-tui keys", "Resume")
        subprocess.run([*TMUX, "send-keys", "-t", session, "Escape"], check=True)
        time.sleep(0.5)  # a key right after Escape would arrive as alt+key
        subprocess.run([*TMUX, "send-keys", "-t", session, "q"], check=True)
        wait_pane("Quit gen-tui?")
        subprocess.run([*TMUX, "send-keys", "-t", session, "y"], check=True)
        wait_pane("EXIT=0")
        assert not list(tmp_path.glob("gen-tui-demo-*")), "the demo folder was left behind"
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_demo_leaves_nothing_behind_when_its_terminal_dies(tmp_path: Path) -> None:
    """The tmux server killed under a live demo: the app, the stale run it started and the
    demo folder all go (SIGHUP), instead of an orphan spinning on a dead terminal."""
    socket = f"gen-tui-hup-{os.getpid()}"  # a private server: killing it touches nothing else
    tmux = ["tmux", "-L", socket]
    command = f"TMPDIR={tmp_path} {sys.executable} -m gen_tui.app.cli --demo"
    subprocess.run([*tmux, "new-session", "-d", "-s", "hup", "-x", "80", "-y", "24", command],
                   check=True)  # fmt: skip
    try:
        pid = int(
            subprocess.run(
                [*tmux, "list-panes", "-t", "hup", "-F", "#{pane_pid}"],
                capture_output=True, text=True, check=True,
            ).stdout.split()[0]
        )  # fmt: skip
        app = psutil.Process(pid)
        # The stale run is detached (its own session): look for it by its folder.
        stale = wait_until_sync(
            lambda: [
                p
                for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"]
                and "prompts-stale" in " ".join(p.info["cmdline"])
                and str(tmp_path) in " ".join(p.info["cmdline"])
            ],
            60,
            "the demo's stale run",
            interval=0.3,
        )
        family = [app, *app.children(recursive=True), *stale]
        assert list(tmp_path.glob("gen-tui-demo-*"))
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    _gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"still running after the terminal died: {alive}"
    assert not list(tmp_path.glob("gen-tui-demo-*")), "the demo folder was left behind"


def test_a_config_of_hosts_alone_watches_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gen-tui.toml naming only `[[hosts]]` (a watcher's config, with their servers) opens
    the panel over those hosts, as `--host` does; it used to be refused for having no
    `[[datasets]]`, then for having no tokenizer (a new user's trial)."""
    from gen_tui.app.tui import GenTuiApp

    out = tmp_path / "out"
    out.mkdir()
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        f'[[hosts]]\nname = "box"\ntarget = "local"\noutput_dir = "{out}"\n'
        'servers = ["http://127.0.0.1:30000"]\n'
    )
    opened: list[GenTuiApp] = []

    def run(app: GenTuiApp) -> int:
        opened.append(app)
        return 0

    monkeypatch.setattr(GenTuiApp, "run", run)
    assert main(argparse.Namespace(tui_demo=False, tui_config=path)) == 0
    (app,) = opened
    assert app.hosted.source is None and not app.autostart  # no run of its own
    (link,) = app.linked.links
    assert link.source.servers == ("http://127.0.0.1:30000",)


def test_a_config_of_servers_alone_opens_the_panel_over_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gen-tui.toml of `[[servers]]` alone (a new user's first step of issue 32's story,
    tried in tmux: the servers come before any run) opens the panel that supervises them;
    it was refused with "gen-tui: error: no datasets: give --prompts-dir DIR, or --config
    FILE with [[datasets]]", though the servers page says plain `gen-tui` supervises them."""
    from gen_tui.app.tui import GenTuiApp

    path = tmp_path / "gen-tui.toml"
    path.write_text(
        '[[servers]]\nname = "gpu0"\nargv = ["gen-tui", "sim", "--port", "30411"]\nport = 30411\n'
    )
    opened: list[GenTuiApp] = []

    def run(app: GenTuiApp) -> int:
        opened.append(app)
        return 0

    monkeypatch.setattr(GenTuiApp, "run", run)
    assert main(argparse.Namespace(tui_demo=False, tui_config=path)) == 0
    (app,) = opened
    assert app.hosted.source is None and not app.autostart  # no run of its own
    assert app.servers is not None  # supervised (started when the panel mounts)
    # `S` is not in the key line: the line under the header says it (it said nothing).
    assert app.notice == f"{path}: S shows its servers, ? for help", app.notice


def test_a_host_beside_a_config_is_watched_by_its_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gen-tui --config FILE --host T --remote-dir D --pattern P` watches T beside the
    config's run by P: the host used to be made a second time, without the pattern (found
    by mypy: one name held the host, then the config's run)."""
    from gen_tui.app.cli import launch
    from gen_tui.app.tui import GenTuiApp

    made: dict[int, tuple[str | None, str | None]] = {}
    real = launch.host_source

    def recording(target: str | None, output_dir: str, **kwargs: Any) -> HostSource:
        source = real(target, output_dir, **kwargs)
        made[id(source)] = (target, kwargs.get("pattern"))
        return source

    opened: list[GenTuiApp] = []

    def run(app: GenTuiApp) -> int:
        opened.append(app)
        for link in app.links:  # never started: nothing for the exit to wait for
            link.done.set()
        return 0

    monkeypatch.setattr(launch, "host_source", recording)
    monkeypatch.setattr(GenTuiApp, "run", run)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "a.jsonl").write_text('{"prompt": "hi"}\n')
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        f'[run]\ntokenizer = "tok"\nprompts_dir = "{prompts}"\noutput_dir = "{tmp_path / "out"}"\n'
    )
    argv = ["--config", str(path), "--host", "local", "--remote-dir", str(tmp_path)]
    from gen_tui.app.cli.parser import build_parser

    args = build_parser().parse_args([*argv, "--pattern", "my_run"])
    assert main(args) == 0
    (app,) = opened
    hosts = [made[id(link.source)] for link in app.linked.links]
    assert ("local", "my_run") in hosts and ("local", None) not in hosts, hosts


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_first_start_of_a_new_config_is_not_start_again(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    """A new user's first `s` in tmux (issue 32's story tried): the dataset shows "not
    started", yet `s` asked "Start again? Every dataset has finished (budget reached or
    prompts done)": a dataset never started counted as finished. It is "Start the run?"."""
    from gen_tui.backends.demo import write_prompts

    write_prompts(tmp_path / "prompts" / "B1.jsonl", 20)
    (tmp_path / "gen-tui.toml").write_text(
        f'[run]\nprompts_dir = "prompts"\ntokenizer = "{tokenizer_dir}"\n'
        'server_urls = ["http://127.0.0.1:9"]\noutput_dir = "out"\n'
    )
    session = f"gen-tui-first-{os.getpid()}"
    command = f"cd {tmp_path} && {sys.executable} -m gen_tui.app.cli; echo EXIT=$?; sleep 30"
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command],
        check=True,
    )

    def pane() -> str:
        return subprocess.run(
            [*TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_pane(*words: str, timeout: float = 60.0) -> str:
        return wait_until_sync(
            lambda: (text := pane()) and all(word in text for word in words) and text,
            timeout,
            f"{words} in the pane",
            interval=0.2,
            detail=lambda: f"pane:\n{pane()}",
        )

    try:
        # The local watcher has looked at the (not yet made) output folder: B1 has its state.
        wait_pane("not started", "local: output folder")
        subprocess.run([*TMUX, "send-keys", "-t", session, "s"], check=True)
        text = wait_pane("Start [y]")
        assert "Start the run?" in text and "Start again?" not in text, text
        assert "Every dataset has finished" not in text, text
        subprocess.run([*TMUX, "send-keys", "-t", session, "n"], check=True)
        time.sleep(0.5)
        subprocess.run([*TMUX, "send-keys", "-t", session, "q"], check=True)
        wait_pane("EXIT=0", timeout=30)
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_q_says_which_servers_it_leaves_running(tmp_path: Path) -> None:
    """Issue 32 tried in tmux: `q` leaves the config's servers running (the next panel adopts
    them), but said nothing, and a new user could not tell whether they had been stopped.
    The line it prints names them and how to stop them."""
    from tests.support.ports import free_port
    from tests.support.runs import GEN_TUI
    from tests.support.servers import kill_servers

    port = free_port()
    words = ", ".join(f'"{word}"' for word in [*GEN_TUI, "sim", "--port", str(port)])
    (tmp_path / "gen-tui.toml").write_text(
        f'[[servers]]\nname = "gpu0"\nargv = [{words}]\nport = {port}\n'
    )
    state = tmp_path / "state"
    session = f"gen-tui-left-{os.getpid()}"
    command = (
        f"cd {tmp_path} && XDG_STATE_HOME={state} {sys.executable} -m gen_tui.app.cli; "
        "echo EXIT=$?; sleep 30"
    )
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", session, "-x", "80", "-y", "30", command],
        check=True,
    )

    def pane() -> str:
        return subprocess.run(
            [*TMUX, "capture-pane", "-p", "-J", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_pane(*words: str, timeout: float = 60.0) -> str:
        return wait_until_sync(
            lambda: (text := pane()) and all(word in text for word in words) and text,
            timeout,
            f"{words} in the pane",
            interval=0.2,
            detail=lambda: f"pane:\n{pane()}",
        )

    try:
        wait_pane("server gpu0 healthy")
        subprocess.run([*TMUX, "send-keys", "-t", session, "q"], check=True)
        text = wait_pane("EXIT=0", timeout=30)
        said = " ".join(text.split())
        assert "gen-tui: left running: gpu0 (the next gen-tui" in said, text
        assert "`gen-tui servers stop` stops them" in said, text
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], capture_output=True)
        kill_servers(state / "gen-tui" / "servers")
