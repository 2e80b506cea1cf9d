"""`gen-tui` without a subcommand: the demo, a config, or hosts to watch, then the app."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from gen_tui.app.cli.exits import EXIT_USAGE
from gen_tui.app.engine_run import ConfigSource
from gen_tui.app.host_links import SHUTDOWN_GRACE_S
from gen_tui.app.host_sources import (
    HostSource,
    folder_name_problem,
    host_source,
    sources_from_config,
    ssh_options,
)
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.alerts import AlertConfig
from gen_tui.backends.config.run import EngineError
from gen_tui.backends.settings import (
    DEFAULT_GRACE_S,
    DEFAULT_STALE_AFTER_S,
    DEMO_STALE_AFTER_S,
)
from gen_tui.backends.untrusted import clean

if TYPE_CHECKING:
    from gen_tui.backends.config.file import FileConfig, PanelSettings

# ---- gen-tui (no subcommand) ----------------------------------------------------------------


START_HELP = """\
gen-tui: no run configured here.
Start one of:
  gen-tui --demo           the control panel on a built-in simulator (nothing to set up)
  gen-tui --config FILE    the run a TOML file describes (see docs/run.md, Config file)
  gen-tui run ...          the headless engine
A ./gen-tui.toml, or gen-tui.toml in {user_dir}, is picked up automatically."""


def config_source(path: Path) -> ConfigSource:
    """The engine config a TOML file describes, merged exactly as `gen-tui run` does."""
    from gen_tui.backends.config.file import load_config, merge_run

    return ConfigSource(merge_run(load_config(path), {}), path)


def panel_options(path: Path, panel: PanelSettings) -> dict[str, Any]:
    """GenTuiApp's `keymap` and `theme` from a config's `[panel]` and `[keys]`, checked
    against the app's bindings and Textual's themes. Raise ConfigError: one line naming
    the file and the key, before any window opens (a key that silently does nothing, or a
    theme that falls back, is a setting the user believes took)."""
    from textual.theme import BUILTIN_THEMES

    from gen_tui.app.dashboard.keys import DASHBOARD_KEYS, KeymapError, build_keymap
    from gen_tui.app.dialogs.run_list import RunsScreen
    from gen_tui.app.dialogs.servers import ServersScreen
    from gen_tui.backends.config.file import ConfigError

    if panel.theme not in BUILTIN_THEMES:
        names = ", ".join(sorted(BUILTIN_THEMES))
        raise ConfigError(f"{path}: panel.theme {panel.theme!r} is not a theme (one of {names})")
    app_keys = [b for b in GenTuiApp.BINDINGS if isinstance(b, Binding)]
    runs_keys = [b for b in RunsScreen.BINDINGS if isinstance(b, Binding)]
    servers_keys = [b for b in ServersScreen.BINDINGS if isinstance(b, Binding)]
    try:
        keymap = build_keymap(
            panel.keys,
            vim=panel.vim,
            bindings=[*DASHBOARD_KEYS, *app_keys],
            screens={
                "the run list": [*runs_keys, *app_keys],
                "the servers view": [*servers_keys, *app_keys],
            },
        )
    except KeymapError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return {"keymap": keymap, "theme": panel.theme}


def user_panel() -> dict[str, Any]:
    """The keymap and theme for `--demo` and `--host` without `--config`: the `[panel]` and
    `[keys]` of the config plain `gen-tui` would read (`find_config`), so a user's theme,
    vim and remaps hold in every mode; none if there is no such file. Raise ConfigError."""
    from gen_tui.backends.config.file import find_config, load_panel

    path = find_config()
    return panel_options(path, load_panel(path)) if path is not None else {}


def run_command(path: Path) -> list[str]:
    """`gen-tui run --config PATH` as this interpreter runs it: what `s` starts detached
    (issue 31, request 5), so that quitting the panel leaves the run going."""
    return [sys.executable, "-m", "gen_tui.app.cli", "run", "--config", str(path.resolve())]


def _error(message: str) -> int:
    """One line on stderr; it may quote a config file or a host: no control characters."""
    print(f"gen-tui: error: {clean(message)}", file=sys.stderr)
    return EXIT_USAGE


def main(args: argparse.Namespace) -> int:
    """`gen-tui [--demo | --config FILE] [--host TARGET --remote-dir DIR]`."""
    demo = bool(getattr(args, "tui_demo", False))
    path: Path | None = getattr(args, "tui_config", None)
    target: str | None = getattr(args, "tui_host", None)
    remote_dir: str | None = getattr(args, "tui_remote_dir", None)
    if demo and (path is not None or target is not None):
        print("gen-tui: error: --demo runs on its own: no --config or --host", file=sys.stderr)
        return EXIT_USAGE
    readonly = bool(getattr(args, "tui_readonly", False))
    given = getattr(args, "tui_stale_after", None)
    default = DEMO_STALE_AFTER_S if demo else DEFAULT_STALE_AFTER_S
    stale = float(given if given is not None else default)
    if stale <= 0:
        return _error(f"--stale-after must be more than 0 seconds, got {stale:g}")
    panel: dict[str, Any] = {}  # --config's own are read with the rest of its file
    if demo or (target is not None and remote_dir is not None and path is None):
        from gen_tui.backends.config.file import ConfigError

        try:
            panel = user_panel()  # --demo, --host: the user's config's look and keys
        except ConfigError as exc:
            return _error(str(exc))
    if demo:
        return run_dashboard_demo(stale, readonly=readonly, **panel)
    if (target is None) != (remote_dir is None):
        print("gen-tui: error: --host and --remote-dir go together", file=sys.stderr)
        return EXIT_USAGE
    options = ssh_options(
        getattr(args, "tui_ssh_config", None),
        getattr(args, "tui_known_hosts", None),
        getattr(args, "tui_identity", None),
    )
    grace = float(getattr(args, "tui_grace", DEFAULT_GRACE_S))
    host: HostSource | None = None  # --host's: watched alone, or beside the config's run
    if target is not None and remote_dir is not None:
        problem = folder_name_problem(remote_dir)
        if problem is not None:
            return _error(f"--remote-dir {problem}")
        try:
            host = host_source(
                target,
                remote_dir,
                pattern=getattr(args, "tui_pattern", None),
                options=options,
                grace_s=grace,
            )
            if path is None:
                return _watch_only([host], stale, readonly=readonly, **panel)
        except (ValueError, re.error) as exc:
            return _error(str(exc))
    if path is None:
        from gen_tui.backends.config.file import find_config

        path = find_config()
        if path is None:
            from platformdirs import user_config_dir

            print(START_HELP.format(user_dir=user_config_dir("gen-tui")), file=sys.stderr)
            return EXIT_USAGE
    from gen_tui.backends.config.file import ConfigError, load_config
    from gen_tui.backends.figures import CountError

    if not path.is_file():
        return _error(f"config file {path} does not exist")
    try:
        file = load_config(path)
        panel = panel_options(path, file.panel)
        extra = [host] if host is not None else []
        # `S` is not in the key line (80 columns hold the control keys): the hint says it.
        servers = bool(file.servers or file.router)
        if (
            (file.hosts or file.servers or file.router)
            and not file.datasets
            and file.defaults.prompts_dir is None
        ):
            # A file that only names hosts to watch or servers to keep up (a new user's
            # first gen-tui.toml): no run of its own, as with --host.
            hosts = [*sources_from_config(file.hosts, options, grace), *extra]
            return _watch_only(
                hosts,
                stale,
                readonly=readonly,
                alerts=file.alerts,
                server_config=file,
                notice=f"{path}: S shows its servers, ? for help" if servers else "",
                **panel,
            )
        source = config_source(path)
    except (ConfigError, CountError, EngineError, ValueError) as exc:
        return _error(str(exc))
    config = source.config
    try:
        # The config's own datasets, followed live from their files (whoever writes them).
        local = host_source(
            None,
            str(config.output_dir),
            datasets=[spec.name for spec in config.datasets],
            discover=False,
            grace_s=grace,
            command=run_command(path),
        )
        hosts = [local, *sources_from_config(file.hosts, options, grace), *extra]
    except ValueError as exc:  # a [[hosts]] output_dir no one can name on one line
        return _error(str(exc))
    app = GenTuiApp(
        source,
        autostart=False,
        hosts=hosts,
        stale_after_s=stale,
        alerts=file.alerts,
        readonly=readonly,
        server_config=file,
        **panel,
    )
    its_servers = ", S shows its servers" if servers else ""
    app.notice = app.start_hint = f"{path}: press s to start it{its_servers}, ? for help"
    return _finish(app, app.run())


def _watch_only(
    hosts: Sequence[HostSource],
    stale_after_s: float,
    *,
    readonly: bool,
    alerts: AlertConfig | None = None,
    server_config: FileConfig | None = None,
    notice: str = "",
    **options: Any,
) -> int:
    """`gen-tui --host ...` (or a config of `[[hosts]]` alone): no run of its own; watch,
    kill and resume what runs there. `options`: the config's keymap and theme."""
    app = GenTuiApp(
        None,
        hosts=hosts,
        stale_after_s=stale_after_s,
        readonly=readonly,
        alerts=alerts,
        server_config=server_config,
        **options,
    )
    if notice:
        app.notice = notice
    return _finish(app, app.run())


def demo_app(
    root: Path,
    stale_after_s: float = DEMO_STALE_AFTER_S,
    *,
    autostart: bool = True,
    readonly: bool = False,
    **options: Any,
) -> GenTuiApp:
    """The demo's app working in `root` (tokenizer, prompts, output), not yet running.
    `options`: the user's config's keymap and theme (`user_panel`)."""
    from gen_tui.app.demo_tui import DemoSource, stale_source

    source = DemoSource(root)
    return GenTuiApp(
        source,
        autostart=autostart,
        hosts=[stale_source(source)],
        stale_after_s=stale_after_s,
        readonly=readonly,
        **options,
    )


def run_dashboard_demo(
    stale_after_s: float = DEMO_STALE_AFTER_S, *, readonly: bool = False, **options: Any
) -> int:
    """`gen-tui --demo`: the app over a temporary folder that goes whatever ends it.

    The folder (a few hundred MB once the runs have written) goes on a normal quit, on an
    exception, and on SIGHUP (the terminal closed) or SIGTERM at any moment: while the app
    is up its own handlers stop the runs and leave; before and after (while `q`'s drain
    and the stale run's stop are waited for) :func:`_leave_on_signals` does the same, so
    a signal never takes the default action (dying with the folder left behind). Handlers
    rather than a folder reaped by a later start: the folder goes now, not whenever the
    demo is next started (perhaps never). SIGKILL cannot be caught: the next demo started
    on this machine removes that folder (:func:`reap_demo_folders`).
    """
    caught: list[int] = []
    reap_demo_folders(Path(tempfile.gettempdir()))
    try:
        with tempfile.TemporaryDirectory(prefix=DEMO_PREFIX, ignore_cleanup_errors=True) as tmp:
            mark_owner(Path(tmp))
            app = demo_app(Path(tmp), stale_after_s, readonly=readonly, **options)
            app.cleanups.append(functools.partial(remove_folder, tmp))
            with _leave_on_signals(app, caught):
                result: int | None = None
                try:
                    result = app.run()
                finally:
                    code = _finish(app, result)
                    # Still under the handlers: a hang-up while the folder is being removed
                    # must not take the default action (dying with it half removed).
                    remove_folder(tmp)
    finally:
        if caught:
            # The runs have ended and the folder is gone. After a hangup Textual's input
            # thread may still wait on the dead terminal (and its shutdown may have failed
            # writing to it): nothing is left to do, so nothing waits for it.
            os._exit(128 + caught[0])
    return code


def remove_folder(path: str, within_s: float = 10.0) -> None:
    """Remove `path` and keep at it for up to `within_s`: a run the demo stopped may still
    be closing a file in it (a stopped run's last write, a watcher's sample), and one pass
    of rmtree then leaves the folder half-deleted; and the hang-up thread and the normal
    exit may both be removing it at once."""
    deadline = time.monotonic() + within_s
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path) or time.monotonic() > deadline:
            return
        time.sleep(0.2)


@contextlib.contextmanager
def _leave_on_signals(app: GenTuiApp, caught: list[int]) -> Iterator[None]:
    """SIGHUP and SIGTERM, outside the app's own handlers: leave normally, not die at once.

    Appends the signals to `caught` and, if the app's loop still runs (starting up or
    shutting down), asks it to exit. Nothing else: the handler may interrupt the main
    thread anywhere (inside a link's lock, say), and what stopping needs is done anyway,
    by the app's unmount (runs aborted, links closed) and by `_finish`, which waits for
    them; the caller then returns through its `with` blocks, which remove the folder.
    """

    def leave(signum: int, _frame: object) -> None:
        caught.append(signum)
        with contextlib.suppress(RuntimeError):  # no loop running: `app.run` is over
            asyncio.get_running_loop().call_soon_threadsafe(app.exit, 128 + signum)

    previous = {signum: signal.signal(signum, leave) for signum in (signal.SIGHUP, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


DEMO_PREFIX = "gen-tui-demo-"
OWNER_FILE = ".gen-tui-owner"
"""In a demo folder: "PID START_TICKS HOSTNAME" of the process that made it."""


def _start_ticks(pid: int) -> str | None:
    """When `pid` started, in clock ticks since boot (Linux); None if it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def mark_owner(folder: Path) -> None:
    """Say which process owns `folder`, so a later demo can tell when it is gone."""
    ticks = _start_ticks(os.getpid())
    if ticks is not None:
        (folder / OWNER_FILE).write_text(f"{os.getpid()} {ticks} {socket.gethostname()}\n")


def reap_demo_folders(root: Path) -> list[Path]:
    """Remove the demo folders under `root` whose demo was killed (SIGKILL, OOM, power).

    Only a folder that is this user's, carries an owner mark from this machine (a
    container sharing /tmp has its own pids) and names a process that is gone (no such pid,
    or another process under it). A folder without a mark is left alone: it may be
    someone else's, or a demo's that has not written its mark yet.
    """
    removed: list[Path] = []
    for folder in root.glob(f"{DEMO_PREFIX}*"):
        try:
            if folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            pid, ticks, host = (folder / OWNER_FILE).read_text().split()
            if host != socket.gethostname() or _start_ticks(int(pid)) == ticks:
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _finish(app: GenTuiApp, result: int | None) -> int:
    """Make sure no engine thread or started process outlives the app (their folders go)."""
    for run in app.runs:
        if run.active:
            run.abort()
    app.stop_links()
    waiting = [name for run in app.runs if not run.done.is_set() for name in run.names]
    # a detached start (a link that does not own its runs) outlives the app
    waiting += [link.name for link in app.links if link.stops_started_runs]
    if waiting:  # the screen is gone: say why the terminal is not back yet
        print(
            f"gen-tui: waiting for what this session started to stop ({', '.join(waiting)})…",
            file=sys.stderr,
        )
    for run in app.runs:
        run.done.wait(timeout=run.grace_s + 5)
    for link in app.links:
        link.done.wait(timeout=SHUTDOWN_GRACE_S + 15)
    from gen_tui.app.exit_summary import exit_summary, servers_left

    summary = exit_summary(app.runs, app.links, app.linked)
    if summary is not None:  # the screen is gone: what the session wrote, in the scrollback
        print(summary, file=sys.stderr)
    left = servers_left(app.servers.rows) if app.servers is not None else None
    if left is not None:
        print(left, file=sys.stderr)
    return result if result is not None else (app.return_code or 0)
