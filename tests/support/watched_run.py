"""A detached `gen-tui run --config FILE` the panel watches (issue 31's runs this panel did
not start): the config of one dataset A against a server, the panel over it with a local
link watching its output folder, the detached run, and leaving with nothing behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gen_tui.app.cli.launch import config_source, run_command
from gen_tui.app.host_links import HostLink
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp


@dataclass
class WatchedRun:
    """The config file, its output folder, the panel (not started) and its local link."""

    path: Path
    out: Path
    app: GenTuiApp
    link: HostLink
    run: subprocess.Popen[bytes] | None = None
    """The detached run, once `start` started it."""

    def start(self) -> subprocess.Popen[bytes]:
        """`gen-tui run --config FILE` in a session of its own, as `s` starts it: it outlives
        the panel."""
        quiet = subprocess.DEVNULL
        self.run = subprocess.Popen(
            run_command(self.path), stdout=quiet, stderr=quiet, start_new_session=True
        )
        return self.run


@contextlib.contextmanager
def watched_run(
    folder: Path, server_url: str, tokenizer: Path, prompts: Path, run_table: str = ""
) -> Iterator[WatchedRun]:
    """In `folder`: a gen-tui.toml whose one dataset A (`prompts`/A.jsonl, 10M, answers of
    64 tokens at most) runs against `server_url` (`run_table`: more lines of its `[run]`),
    and the panel over it watching its output folder (`out`). On the way out the links
    stop and the detached run, if any, is SIGKILLed with its group."""
    out = folder / "out"
    path = folder / "gen-tui.toml"
    path.write_text(
        f'[run]\nserver_urls = ["{server_url}"]\ntokenizer = "{tokenizer}"\n'
        f'output_dir = "{out}"\nmax_tokens_per_dataset = "10M"\n{run_table}\n'
        "[sampling]\nmax_new_tokens = 64\n\n"
        f'[[datasets]]\nname = "A"\nprompts = "{prompts / "A.jsonl"}"\n'
    )
    source = config_source(path)
    local = host_source(
        None, str(source.config.output_dir), datasets=["A"], discover=False,
        command=run_command(path),
    )  # fmt: skip
    app = GenTuiApp(source, autostart=False, hosts=[local])
    watched = WatchedRun(path, out, app, app.links[0])
    try:
        yield watched
    finally:
        app.stop_links()
        watched.link.done.wait(timeout=30)
        if watched.run is not None:
            with contextlib.suppress(ProcessLookupError):  # ended: the test says why
                os.killpg(watched.run.pid, signal.SIGKILL)
            watched.run.wait()
