"""`gen-tui` without a subcommand: the demo, a config, or hosts to watch, then the app."""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gen_tui.app.engine_run import ConfigSource
from gen_tui.app.hosts import (
    SHUTDOWN_GRACE_S,
    HostSource,
    host_source,
    sources_from_config,
    ssh_options,
)
from gen_tui.app.tui import DEFAULT_STALE_AFTER_S, GenTuiApp
from gen_tui.backends.run_config import EngineError

EXIT_USAGE = 2
EXIT_ERROR = 1


# ---- gen-tui (no subcommand) ----------------------------------------------------------------


START_HELP = """\
gen-tui: no run configured here.
Start one of:
  gen-tui --demo           the control panel on a built-in simulator (nothing to set up)
  gen-tui --config FILE    the run a TOML file describes (see README)
  gen-tui run ...          the headless engine
A ./gen-tui.toml, or gen-tui.toml in {user_dir}, is picked up automatically."""


def find_config(cwd: Path | None = None) -> Path | None:
    from platformdirs import user_config_dir

    for candidate in (
        (cwd or Path.cwd()) / "gen-tui.toml",
        Path(user_config_dir("gen-tui")) / "gen-tui.toml",
    ):
        if candidate.is_file():
            return candidate
    return None


def config_source(path: Path) -> ConfigSource:
    """The engine config a TOML file describes, merged exactly as `gen-tui run` does."""
    from gen_tui.backends.config import load_config, merge_run

    return ConfigSource(merge_run(load_config(path), {}), path)


def _error(message: str) -> int:
    print(f"gen-tui: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def main(args: argparse.Namespace) -> int:
    """`gen-tui [--demo | --config FILE] [--host TARGET --remote-dir DIR]`."""
    demo = bool(getattr(args, "tui_demo", False))
    path: Path | None = getattr(args, "tui_config", None)
    target: str | None = getattr(args, "tui_host", None)
    remote_dir: str | None = getattr(args, "tui_remote_dir", None)
    if demo and (path is not None or target is not None):
        print("gen-tui: error: --demo runs on its own: no --config or --host", file=sys.stderr)
        return EXIT_USAGE
    stale = float(getattr(args, "tui_stale_after", DEFAULT_STALE_AFTER_S))
    if stale <= 0:
        return _error(f"--stale-after must be more than 0 seconds, got {stale:g}")
    if demo:
        return run_dashboard_demo(stale)
    if (target is None) != (remote_dir is None):
        print("gen-tui: error: --host and --remote-dir go together", file=sys.stderr)
        return EXIT_USAGE
    options = ssh_options(
        getattr(args, "tui_ssh_config", None),
        getattr(args, "tui_known_hosts", None),
        getattr(args, "tui_identity", None),
    )
    grace = float(getattr(args, "tui_grace", 30.0))
    if target is not None and remote_dir is not None:
        try:
            source = host_source(
                target,
                remote_dir,
                pattern=getattr(args, "tui_pattern", None),
                options=options,
                grace_s=grace,
            )
            if path is None:
                return _watch_only([source], stale)
        except (ValueError, re.error) as exc:
            return _error(str(exc))
    if path is None:
        path = find_config()
        if path is None:
            from platformdirs import user_config_dir

            print(START_HELP.format(user_dir=user_config_dir("gen-tui")), file=sys.stderr)
            return EXIT_USAGE
    from gen_tui.backends.config import ConfigError, load_config
    from gen_tui.backends.counts import CountError

    if not path.is_file():
        return _error(f"config file {path} does not exist")
    try:
        source = config_source(path)
        entries = load_config(path).hosts
    except (ConfigError, CountError, EngineError, ValueError) as exc:
        return _error(str(exc))
    config = source.config
    # The config's own datasets, followed live from their files (whoever writes them).
    local = host_source(
        None,
        str(config.output_dir),
        datasets=[spec.name for spec in config.datasets],
        discover=False,
        grace_s=grace,
    )
    extra = [host_source(target, remote_dir, options=options, grace_s=grace)] if target else []
    hosts = [local, *sources_from_config(entries, options, grace), *extra]
    app = GenTuiApp(source, autostart=False, hosts=hosts, stale_after_s=stale)
    app.notice = app.start_hint = f"{path}: press s to run it in this process, ? for help"
    return _finish(app, app.run())


def _watch_only(hosts: Sequence[HostSource], stale_after_s: float) -> int:
    """`gen-tui --host ...`: no run of its own; watch, kill and resume what runs there."""
    app = GenTuiApp(None, hosts=hosts, stale_after_s=stale_after_s)
    return _finish(app, app.run())


def demo_app(
    root: Path, stale_after_s: float = DEFAULT_STALE_AFTER_S, *, autostart: bool = True
) -> GenTuiApp:
    """The demo's app working in `root` (tokenizer, prompts, output), not yet running."""
    from gen_tui.app.demo_tui import DemoSource, stale_source

    source = DemoSource(root)
    return GenTuiApp(
        source, autostart=autostart, hosts=[stale_source(source)], stale_after_s=stale_after_s
    )


def run_dashboard_demo(stale_after_s: float = DEFAULT_STALE_AFTER_S) -> int:
    with tempfile.TemporaryDirectory(prefix="gen-tui-demo-") as tmp:
        app = demo_app(Path(tmp), stale_after_s)
        app.cleanups.append(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
        code = _finish(app, app.run())
    return code


def _finish(app: GenTuiApp, result: int | None) -> int:
    """Make sure no engine thread or started process outlives the app (their folders go)."""
    for run in app.runs:
        if run.active:
            run.abort()
    app.stop_links()
    for run in app.runs:
        run.done.wait(timeout=run.grace_s + 5)
    for link in app.links:
        link.done.wait(timeout=SHUTDOWN_GRACE_S + 15)
    return result if result is not None else (app.return_code or 0)
