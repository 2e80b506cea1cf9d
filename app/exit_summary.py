"""The one line printed once the panel has left (issue 31, request 9).

Why: the panel's figures vanish with its screen, and a user who quits after an hour wants to
know, in the terminal's scrollback, what the session wrote and where, and which runs it
started are still running (a detached run goes on after the panel quits).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.engine_run import ConfigSource, HostedRun
from gen_tui.app.host_links import HostLink
from gen_tui.backends.figures import counted
from gen_tui.backends.servers.view import ServerRow
from gen_tui.backends.untrusted import one_line


def _folder(run: HostedRun) -> Path | None:
    engine = run.engine
    if engine is not None:
        return Path(engine.config.output_dir)
    if isinstance(run.source, ConfigSource):
        return Path(run.source.config.output_dir)
    return None


TEMPORARY = "the demo's temporary folder (removed as the demo ends)"
"""Where the exit line says a demo wrote: its folder is gone once the line is read, and a
path would send the user looking for it (issue 31, tried again)."""


def _temporary(runs: Sequence[HostedRun]) -> list[Path]:
    """The folders the app removes as it ends (a run source's `removed_on_exit`)."""
    return [path for run in runs if (path := run.source.removed_on_exit) is not None]


def _where(folder: Path, temporary: Sequence[Path]) -> str:
    """`folder` as the exit line says it: TEMPORARY when it is under one of `temporary`."""
    if any(folder == root or root in folder.parents for root in temporary):
        return TEMPORARY
    return _shown(folder)


def _shown(folder: Path) -> str:
    """A folder as the user typed it, roughly: relative to here when under it."""
    try:
        text = os.path.relpath(folder)
    except ValueError:
        text = str(folder)
    if text.startswith(".."):
        text = str(folder)
    return one_line(text.rstrip("/") + "/", 200)


def still_running(links: Sequence[HostLink]) -> list[str]:
    """ "run PID still running on HOST" for each run this session started that the panel
    did not stop on its way out (a detached start), as last seen by its link.

    Every link that owns its runs is left out, ended or not (not only those with
    `HostLink.stops_started_runs`): it has stopped them, and its monitor's last list may
    not have caught up with the kill."""
    said: list[str] = []
    for link in links:
        monitor = link.monitor
        if monitor is None or link.source.owns_runs:
            continue  # a link that owns its runs stops them when the app leaves
        for identity in link.started:
            if any(run.identity.same_process(identity) for run in monitor.runs):
                said.append(f"run {identity.pid} still running on {one_line(link.name, 80)}")
    return said


def _watched(linked: HostLinks, temporary: Sequence[Path] = ()) -> tuple[dict[str, int], list[str]]:
    """Tokens each watched dataset gained while the panel watched it, and the folders
    (`host:folder` on another machine) where it did."""
    gained: dict[str, int] = {}
    folders: list[str] = []
    for name, (first, last) in linked.seen.items():
        link = linked.remote.get(name)
        monitor = link.monitor if link is not None else None
        if last <= first or link is None or monitor is None:
            continue
        gained[name] = last - first
        if link.source.remote:
            where = f"{one_line(link.name, 80)}:{_shown(Path(monitor.output_dir))}"
        else:
            where = _where(Path(monitor.output_dir), temporary)
        if where not in folders:
            folders.append(where)
    return gained, folders


def exit_summary(
    runs: Sequence[HostedRun], links: Sequence[HostLink], linked: HostLinks | None = None
) -> str | None:
    """ "gen-tui: 3 datasets, 1,234,567 tokens written to out/ this session; run 4242 still
    running on local", or None when the session neither ran nor started anything.

    Tokens written are each in-process run's own (a resumed dataset's earlier tokens are
    not counted again) and, from `linked`, what each watched dataset gained while the panel
    watched it (a detached run's, say); a dataset both ran here and watched counts once.
    """
    tokens: dict[str, int] = {}
    folders: list[str] = []
    temporary = _temporary(runs)
    for run in runs:
        for snap in run.snapshots():
            written = max(snap.tokens - snap.resumed_tokens, 0)
            tokens[snap.name] = tokens.get(snap.name, 0) + written
        folder = _folder(run)
        if folder is not None and (where := _where(folder, temporary)) not in folders:
            folders.append(where)
    if linked is not None:  # the same records seen twice (ours, watched) count once
        gained, watched = _watched(linked, temporary)
        for name, count in gained.items():
            tokens[name] = max(tokens.get(name, 0), count)
        folders.extend(folder for folder in watched if folder not in folders)
    running = still_running(links)
    started = any(link.started for link in links)
    if not runs and not started:
        return None
    parts: list[str] = []
    wrote = [name for name, count in tokens.items() if count > 0]
    if wrote:
        where = ", ".join(folders) or "this process's output"
        parts.append(
            f"{counted(len(wrote), 'dataset')}, {counted(sum(tokens.values()), 'token')} "
            f"written to {where} this session"
        )
    else:
        parts.append("nothing written this session")
    parts.extend(running)
    return "gen-tui: " + "; ".join(parts)


LEFT_RUNNING = frozenset({"starting", "loading", "healthy", "unhealthy", "draining"})
"""The states of a server the panel leaves running when it quits (and the next adopts)."""


def servers_left(rows: Sequence[ServerRow]) -> str | None:
    """The line the quit prints when it leaves supervised servers running (None: none).
    The panel said nothing, and a new user could not tell whether `q` had stopped them."""
    names = [row.name for row in rows if row.ref is not None and str(row.state) in LEFT_RUNNING]
    if not names:
        return None
    shown = one_line(", ".join(names), 300)
    return (
        f"gen-tui: left running: {shown} (the next gen-tui or `gen-tui servers up` adopts "
        "them; `gen-tui servers stop` stops them)"
    )
