"""TUI cost: CPU share of the control panel showing live datasets, and key-press latency.

The panel runs as its own process in a private tmux server (80x24), watching datasets that
real `gen-tui run` processes write against a `gen-tui sim`, as `gen-tui --host local
--remote-dir DIR` would on a GPU box. CPU comes from psutil's cpu_times of the panel's
process over the window (and, apart, of the watcher and survey processes it starts).
Latency: `tmux send-keys ?` toggles the help screen, then `tmux capture-pane` is polled
until the change shows. The baseline, measured in the same run and under the same load, is
an idle minimal Textual app that toggles a modal screen on the same key; the same panel
watching an empty directory runs beside it. `gen-tui --demo` (engine and simulator inside
the panel's process) is measured afterwards, alone, for comparison; then the table view
over a fleet of FLEET datasets (the panel's default past 12), all written by one
`gen-tui run`, alone too.

`python -m bench.tui_cost idle` is the minimal app.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.common import CACHE, ENV, GEN_TUI, ROOT, Table, prompts, publish, simulator, verdict
from bench.common import tokenizer as bench_tokenizer
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.store.records import RAW_FILE

MARK = "gen-tui keys"  # the help screen's title, in gen-tui and in the idle app
CPU_TARGET = 0.10
P99_TARGET_S = 0.100
# Each writer keeps 4 requests of about 1,000 tokens in flight at 1,000 tok/s: about 4
# records and 4k tokens a second per dataset, so every panel changes on every refresh.
SIM = ("--slots", "64", "--tokens-per-s", "1000", "--default-mean", "1000")
POLL_S = 0.002
FLEET = 64
"""Datasets of the table-view case (issue 31: the panel's cost over 64 datasets)."""
TMUX_CONF = "set -g status off\nset -g escape-time 0\nset -g default-terminal tmux-256color\n"


def idle_app() -> None:
    """A minimal Textual app: one label, and `?` toggling a modal titled like gen-tui's help."""
    from textual.app import App, ComposeResult
    from textual.binding import Binding
    from textual.screen import ModalScreen
    from textual.widgets import Footer, Label

    class Help(ModalScreen[None]):
        BINDINGS = [Binding("escape,question_mark", "close", "Close")]

        def compose(self) -> ComposeResult:
            yield Label(MARK)

        def action_close(self) -> None:
            self.dismiss(None)

    class Idle(App[None]):
        BINDINGS = [Binding("question_mark", "help", "Help")]

        def compose(self) -> ComposeResult:
            yield Label("idle")
            yield Footer()

        def action_help(self) -> None:
            self.push_screen(Help())

    Idle().run()


class Tmux:
    """A private tmux server (`tmux -L bench-tui-PID`); never the default one.

    Keys and screen captures go through one control-mode client (`tmux -C`), so polling the
    screen costs a line on a pipe rather than a process per capture.
    """

    def __init__(self, folder: Path) -> None:
        self.socket = f"bench-tui-{os.getpid()}"
        self.conf = folder / "tmux.conf"
        self.conf.write_text(TMUX_CONF)
        self.control = subprocess.Popen(
            [*self._base(), "-C", "new-session", "-s", "control", "sleep 1000000"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=ENV,
            text=True,
            bufsize=1,
        )
        self._send("display-message -p ready")
        while self._block() != ["ready"]:
            pass  # the attach's own block comes first
        self.socket_path = Path(self.command("display-message -p '#{socket_path}'")[0])

    def _base(self) -> list[str]:
        return ["tmux", "-L", self.socket, "-f", str(self.conf)]

    def _line(self) -> str:
        assert self.control.stdout is not None
        line = self.control.stdout.readline()
        if not line:
            raise RuntimeError("the tmux control client went away")
        return line.rstrip("\n")

    def _send(self, command: str) -> None:
        assert self.control.stdin is not None
        self.control.stdin.write(command + "\n")
        self.control.stdin.flush()

    def command(self, command: str) -> list[str]:
        """Run one tmux command on the control client; its output lines."""
        self._send(command)
        return self._block(command)

    def _block(self, command: str = "") -> list[str]:
        while not (line := self._line()).startswith("%begin "):
            pass  # a notification, or the attach's own block
        number = line.split()[2]
        output = []
        while True:
            line = self._line()
            words = line.split()
            if words[:1] in (["%end"], ["%error"]) and len(words) > 2 and words[2] == number:
                if words[0] == "%error":
                    raise RuntimeError(f"tmux {command!r}: {output}")
                return output
            output.append(line)

    def start(self, session: str, argv: list[str]) -> psutil.Process:
        command = shlex.quote("exec " + shlex.join(argv))
        where = shlex.quote(str(ROOT))
        self.command(f"new-session -d -s {session} -x 80 -y 24 -c {where} {command}")
        pid = int(self.command(f"display-message -p -t {session} '#{{pane_pid}}'")[0])
        return psutil.Process(pid)

    def keys(self, session: str, *keys: str) -> None:
        self.command(f"send-keys -t {session} " + " ".join(shlex.quote(key) for key in keys))

    def screen(self, session: str) -> str:
        return "\n".join(self.command(f"capture-pane -p -t {session}"))

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run([*self._base(), "kill-server"], env=ENV, capture_output=True, check=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.control.wait(timeout=10)
        self.socket_path.unlink(missing_ok=True)  # the server leaves it behind


@dataclass
class App:
    label: str
    session: str
    argv: list[str]
    ready: Callable[[str], bool]
    process: psutil.Process | None = None
    cpu: tuple[float, float] = (0.0, 0.0)  # (own, with its child processes) over the window
    latencies: list[float] = field(default_factory=list)
    is_open: bool = False


def own_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def tree_cpu(process: psutil.Process) -> float:
    """The process's CPU, its reaped children's, and its live descendants'."""
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += own_cpu(child)
    return total


def wait_ready(tmux: Tmux, apps: list[App], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    for app in apps:
        while not app.ready(tmux.screen(app.session)):
            if app.process is not None and not app.process.is_running():
                raise RuntimeError(f"{app.label} exited: {tmux.screen(app.session)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{app.label} not ready:\n{tmux.screen(app.session)}")
            time.sleep(0.2)


def measure_cpu(apps: list[App], window_s: float) -> None:
    """Each app's CPU seconds over the same `window_s`, as a share of one core."""
    before = {}
    for app in apps:
        assert app.process is not None
        before[app.session] = (own_cpu(app.process), tree_cpu(app.process))
    started = time.perf_counter()
    time.sleep(window_s)
    for app in apps:
        assert app.process is not None
        own, tree = own_cpu(app.process), tree_cpu(app.process)
        elapsed = time.perf_counter() - started
        first_own, first_tree = before[app.session]
        app.cpu = ((own - first_own) / elapsed, (tree - first_tree) / elapsed)


def press(tmux: Tmux, app: App, timeout_s: float = 10.0) -> float:
    """Send `?` and wait until the help screen has opened (or closed): seconds it took."""
    want = not app.is_open
    started = time.perf_counter()
    tmux.keys(app.session, "?")
    while (MARK in tmux.screen(app.session)) != want:
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"{app.label}: the help screen did not toggle in {timeout_s:g} s")
        time.sleep(POLL_S)  # not a busy loop: on 2 cores it would take the app's CPU
    app.is_open = want
    return time.perf_counter() - started


def measure_latency(tmux: Tmux, apps: list[App], presses: int) -> None:
    """`presses` toggles per app, the apps taking turns, at random gaps (random refresh phase)."""
    rng = random.Random(0)
    for _ in range(presses):
        for app in apps:
            app.latencies.append(press(tmux, app))
            time.sleep(rng.uniform(0.02, 0.12))
    for app in apps:  # leave every help screen closed
        if app.is_open:
            press(tmux, app)


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def records(out: Path) -> int:
    total = 0
    for path in out.glob(f"*/{RAW_FILE}"):
        with open(path, "rb") as handle:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return total


@contextlib.contextmanager
def writers(url: str, out: Path, names: list[str], logs: Path) -> Iterator[None]:
    """One `gen-tui run` per dataset; SIGTERM (they drain) when done."""
    processes = []
    try:
        for name in names:
            argv = [
                *GEN_TUI,
                "run",
                *("--prompts-dir", str(prompts(name, 3000).parent)),
                *("--output-dir", str(out), "--server-url", url),
                *("--tokenizer", str(bench_tokenizer()), "--concurrency", "4", "--plain"),
            ]
            with open(logs / f"{name}.log", "wb") as log:
                processes.append(
                    subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV, cwd=logs)
                )
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_writing(out: Path, names: list[str], timeout_s: float = 120.0) -> None:
    """Until every writer has committed a record (they spend seconds importing first)."""
    deadline = time.monotonic() + timeout_s
    while not all(_size(out / name / RAW_FILE) for name in names):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the writers did not start within {timeout_s:g} s")
        time.sleep(0.2)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def fleet_prompts(count: int) -> Path:
    """A prompts folder of `count` small files, T01.jsonl on: one dataset each."""
    folder = CACHE / "prompts" / f"fleet-{count}"
    for index in range(count):
        path = folder / f"T{index + 1:02d}.jsonl"
        if not path.exists():
            write_prompts(path, 300)
    return folder


@contextlib.contextmanager
def fleet_writer(url: str, out: Path, count: int, logs: Path) -> Iterator[list[str]]:
    """One `gen-tui run` writing `count` datasets at once, a request in flight each; yields
    their names. SIGTERM (it drains) when done."""
    folder = fleet_prompts(count)
    argv = [
        *GEN_TUI,
        "run",
        *("--prompts-dir", str(folder), "--output-dir", str(out), "--server-url", url),
        *("--tokenizer", str(bench_tokenizer()), "--concurrency", str(count), "--plain"),
        *("--parallel-datasets", str(count)),
    ]
    with open(logs / "fleet.log", "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV, cwd=logs)
    try:
        yield sorted(path.stem for path in folder.glob("*.jsonl"))
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def has_all(names: list[str]) -> Callable[[str], bool]:
    return lambda screen: "? Help" in screen and all(name in screen for name in names)


def run(smoke: bool, write: bool) -> bool:
    count, window_s, presses = (1, 2.0, 8) if smoke else (8, 30.0, 100)
    names = [f"B{i + 1}" for i in range(count)]
    datasets = f"{count} live dataset{'s' if count > 1 else ''}"
    for name in names:
        prompts(name, 3000)
    bench_tokenizer()
    fleet_count = 16 if smoke else FLEET
    with tempfile.TemporaryDirectory(prefix="tui-", dir=CACHE) as temp:
        folder = Path(temp)
        out, empty, logs = folder / "out", folder / "empty", folder / "logs"
        fleet_out = folder / "fleet"
        for path in (out, empty, logs, fleet_out):
            path.mkdir()
        tmux = Tmux(folder)
        live = App(
            f"gen-tui, {datasets}",
            "live",
            [*GEN_TUI, "--host", "local", "--remote-dir", str(out)],
            has_all(names),
        )
        nothing = App(
            "gen-tui, no datasets",
            "empty",
            [*GEN_TUI, "--host", "local", "--remote-dir", str(empty)],
            has_all([]),
        )
        idle = App(
            "minimal Textual app, idle",
            "idle",
            [sys.executable, "-m", "bench.tui_cost", "idle"],
            lambda screen: "idle" in screen,
        )
        demo = App(
            "gen-tui --demo (engine + simulator in-process)",
            "demo",
            [*GEN_TUI, "--demo"],
            lambda screen: "? Help" in screen and "running" in screen,
        )
        fleet = App(
            f"gen-tui, table view of {fleet_count} live datasets",
            "fleet",
            [*GEN_TUI, "--host", "local", "--remote-dir", str(fleet_out)],
            lambda screen: f"{fleet_count} datasets · sort:" in screen and "running" in screen,
        )
        try:
            with (
                simulator(*SIM) as url,
                writers(url, out, names, logs),
            ):
                apps = [idle, live] if smoke else [idle, nothing, live]
                for app in apps:
                    app.process = tmux.start(app.session, app.argv)
                wait_writing(out, names)
                wait_ready(tmux, apps)
                time.sleep(2.0)  # the panel's first survey and full counts are startup
                written = records(out)
                measure_cpu(apps, window_s)
                written = records(out) - written
                measure_latency(tmux, apps, presses)
            if not smoke:  # its start (tokenizer, prompts, engine) would double the smoke
                demo.process = tmux.start(demo.session, demo.argv)
                wait_ready(tmux, [demo])
                time.sleep(2.0)
                measure_cpu([demo], window_s)
                measure_latency(tmux, [demo], presses // 2)
            with (
                simulator(*SIM) as url,
                fleet_writer(url, fleet_out, fleet_count, logs) as fleet_names,
            ):
                wait_writing(fleet_out, fleet_names)
                fleet.process = tmux.start(fleet.session, fleet.argv)
                wait_ready(tmux, [fleet])
                time.sleep(2.0)
                measure_cpu([fleet], window_s)
                measure_latency(tmux, [fleet], presses // 2)
        finally:
            tmux.close()  # SIGHUP to every app; the demo drains its engine first
            for app in (idle, nothing, live, demo, fleet):
                if app.process is not None:
                    try:
                        app.process.wait(timeout=30)
                    except psutil.TimeoutExpired:
                        app.process.kill()
                    except psutil.NoSuchProcess:
                        pass
    base = {q: p(idle.latencies, q) for q in (0.5, 0.99)}
    table = Table(
        "tui_cost",
        f"TUI cost ({datasets}, 80x24 tmux, {window_s:g} s window, {presses} key presses)",
        f"python -m bench tui_cost{' --smoke' if smoke else ''}",
        [
            "process",
            "CPU (own)",
            "CPU (with watcher)",
            "key p50 (vs idle app)",
            "key p99 (vs idle app)",
            "target",
        ],
    )
    met = {
        app.session: (app.cpu[0] <= CPU_TARGET, p(app.latencies, 0.99) <= P99_TARGET_S)
        for app in (live, fleet)
        if app.latencies
    }
    for app in (idle, nothing, live, demo, fleet):
        if not app.latencies:
            continue
        if app.session in met:
            cpu_met, key_met = met[app.session]
            target = (
                f"CPU <= {CPU_TARGET:.0%}: {verdict(cpu_met)}; "
                f"p99 <= {P99_TARGET_S * 1000:.0f} ms: {verdict(key_met)}"
            )
        elif app is idle:
            target = "(baseline)"
        else:
            target = "(for comparison)"
        table.add(
            app.label,
            f"{app.cpu[0]:.1%}",
            f"{app.cpu[1]:.1%}",
            *(
                f"{p(app.latencies, q) * 1000:.0f} ms ({p(app.latencies, q) / base[q]:.1f}x)"
                for q in (0.5, 0.99)
            ),
            target,
        )
    table.notes.append(
        f"CPU is the share of one core over the window: the process alone, and with the "
        f"watcher and survey processes it starts. During the window, {count} `gen-tui run` "
        f"process{'es' if count > 1 else ''} (one per dataset) wrote "
        f"{written / window_s:.0f} records/s in all. The panels and the idle "
        f"app ran at once under that load{'' if smoke else '; the demo ran afterwards, alone'}"
        f"; then the table view, alone, of {fleet_count} datasets that one `gen-tui run` "
        f"wrote at once (a request in flight each). "
        f"Key latency is `tmux "
        f"send-keys ?` until `tmux capture-pane` shows the help screen open or closed, both "
        f"sent over one tmux control-mode client and polled every {POLL_S * 1000:g} ms (a "
        f"capture costs about 0.1 ms)."
    )
    publish(table, write)
    return all(cpu and key for cpu, key in met.values())


if __name__ == "__main__":
    if sys.argv[1:] == ["idle"]:
        idle_app()
    else:
        raise SystemExit("usage: python -m bench.tui_cost idle")
