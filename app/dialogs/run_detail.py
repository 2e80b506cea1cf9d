"""One run whole (Enter or `i` in the run list): its command line, wrapped and never cut at the
screen's edge, the folder it runs in and writes to, when it started, who owns it, its pid;
`c` copies the command to the clipboard (issue 31, point 12 and the power users' point 3).

The list shows a command on one row, cut at the edge of the terminal: the details are where
it is read, and copied to run again or to paste in a message. Every value comes from a
process on a host, maybe another user's: each goes through the untrusted-text rule
(`one_line`: control characters and line breaks made visible, bounded) and is drawn as
plain `Text`, never markup. The clipboard gets exactly the text shown: a paste never carries
an escape sequence the screen hid (and OSC 52 cannot carry the undecodable bytes a command
line may hold).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Label, Static

from gen_tui.backends.figures import format_dollars
from gen_tui.backends.progress.batches import batches_line, span_text
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_duration
from gen_tui.widgets.key_line import KeyLine

if TYPE_CHECKING:
    from gen_tui.backends.hosts import RunProcess

COMMAND_CHARS = 32_768
"""The most of a command line shown and copied: a whole one in practice (400 lines at 80
columns, scrolled), while an argv of megabytes (Linux allows 2 MB) is cut, the cut said."""
FIELD_CHARS = 4096
"""The most of a folder, dataset list or host name shown."""


def started_text(start_time: float, now: float) -> str:
    """ "2026-12-05 01:02:03 (3m12s ago)", in this machine's local time."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start_time))
    return f"{stamp} ({format_duration(max(0.0, now - start_time))} ago)"


def detail_fields(
    run: RunProcess, *, ended: bool, elsewhere: bool, now: float
) -> list[tuple[str, str, str]]:
    """(id, label, value) of each line of the details, every value made safe to show."""
    identity = run.identity
    output = one_line(run.written_folder, FIELD_CHARS)
    if elsewhere:
        output += " (another folder, not watched here)"
    owner = run.owner + (" (you)" if run.mine else "")
    return [
        ("command", "Command", one_line(identity.command, COMMAND_CHARS)),
        ("cwd", "Working folder", one_line(run.cwd, FIELD_CHARS) if run.cwd else "unknown"),
        ("output", "Output", output),
        ("datasets", "Datasets", one_line(", ".join(run.datasets), FIELD_CHARS) or "-"),
        ("started", "Started", started_text(identity.start_time, now)),
        ("owner", "Owner", owner),
        ("pid", "Pid", f"{identity.pid} on {one_line(identity.host, FIELD_CHARS)}"),
        ("state", "State", "ended" if ended else run.state),
    ]


def batch_fields(snapshots: Sequence[DatasetSnapshot]) -> list[tuple[str, str, str]]:
    """(id, label, value) of each dataset of the run with batches in flight (`--api
    openai-batch`): one line for them all, one a batch (id, status, the provider's counts,
    age against its window, ETA), and what it has spent and saved against the live price.
    The ids and statuses are the provider's words, cleaned when progress.json was read."""
    fields: list[tuple[str, str, str]] = []
    for snap in snapshots:
        now = snap.updated_at
        lines = [batches_line(snap.batches, now)] if snap.batches else []
        for batch in snap.batches:
            age, eta = batch.age_s(now), batch.eta_s(now)
            line = f"{one_line(batch.id)}: {one_line(batch.status)} {batch.completed:,}"
            line += f"/{batch.total:,}" + (f" ({batch.failed:,} failed)" if batch.failed else "")
            if age is not None:
                line += f" · {format_duration(age)} of {span_text(batch.window_s)}"
            if eta is not None:
                line += f" · ETA {format_duration(eta)}"
            lines.append(line)
        if snap.cost is not None and (snap.batches or snap.cost_saved):
            spent = f"{format_dollars(snap.cost)} spent"
            if snap.cost_saved:
                spent += f", {format_dollars(snap.cost_saved)} saved against the live price"
            lines.append(spent)
        if lines:
            name = one_line(snap.name, FIELD_CHARS)
            fields.append((f"batches-{len(fields)}", f"Batches of {name}", "\n".join(lines)))
    return fields


class RunDetailScreen(Screen[None]):
    """One run's details as they were when opened (the list refreshes; a run's own facts
    do not change)."""

    DEFAULT_CSS = """
    RunDetailScreen #detail-title { height: 1; width: 100%; background: $panel; text-style: bold; }
    RunDetailScreen #detail-body { height: 1fr; padding: 0 1; }
    RunDetailScreen .detail-field { width: 100%; margin-bottom: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "c",
            "copy",
            "Copy command",
            tooltip="Copy the command line to the clipboard (OSC 52: tmux needs set-clipboard on)",
            id="detail.copy",
        ),
        Binding("escape,i", "close", "Back", tooltip="Back to the run list", id="detail.close"),
    ]

    def __init__(
        self,
        run: RunProcess,
        *,
        ended: bool = False,
        elsewhere: bool = False,
        snapshots: Sequence[DatasetSnapshot] = (),
    ) -> None:
        super().__init__()
        self.listed_run = run
        self.fields = detail_fields(run, ended=ended, elsewhere=elsewhere, now=time.time())
        self.fields += batch_fields(snapshots)
        self.command = self.fields[0][2]
        """What `c` copies: the command as shown."""

    def compose(self) -> ComposeResult:
        yield Label(Text(f" Run pid {self.listed_run.pid}"), id="detail-title")
        with VerticalScroll(id="detail-body"):
            for key, label, value in self.fields:
                line = Text.assemble((f"{label}: ", "bold"), value)
                yield Static(line, id=f"detail-{key}", classes="detail-field")
        yield KeyLine()

    def on_mount(self) -> None:
        self.query_one("#detail-body", VerticalScroll).focus()

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.command)
        changed = self.command != self.listed_run.identity.command
        said = " (as shown: control characters replaced or cut)" if changed else ""
        self.notify(f"pid {self.listed_run.pid}'s command copied to the clipboard{said}")

    def action_close(self) -> None:
        self.dismiss(None)
