"""The dashboard's keys, and the help screen's rows for them."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding

from gen_tui.app.dialogs.modals import HelpRow

CONTROL_ACTIONS = frozenset(
    {"kill", "stop_one", "resume", "resume_all", "start", "pause", "pause_one"}
)
"""What --readonly turns off: every key that changes a run."""

LOOK_KEYS = frozenset(
    {"quality", "samples", "log", "history", "resume_all", "stop_one", "pause_one"}
)
"""Keys left off the key line (no room at 80 columns) but listed in help."""

DASHBOARD_KEYS: list[Binding] = [
    Binding(
        "k",
        "kill",
        "Kill",
        tooltip="Stop the selected dataset's run: drain in-flight requests, then abort",
        id="kill",
    ),
    Binding(
        "r",
        "resume",
        "Resume",
        tooltip="Give the selected dataset a new token budget and run it to that",
        id="resume",
    ),
    Binding(
        "K",
        "stop_one",
        "Stop one",
        tooltip="Stop the selected dataset alone; its run goes on with the others",
        id="stop_one",
        show=False,  # 80 columns hold the control keys and q; it is in ? (help)
    ),
    Binding(
        "P",
        "pause_one",
        "Pause one",
        tooltip="Hold or release the selected dataset alone; its run goes on with the others",
        id="pause_one",
        show=False,  # 80 columns hold the control keys and q; it is in ? (help)
    ),
    Binding(
        "R",
        "resume_all",
        "Resume all",
        tooltip="Start every dataset of the selected dataset's killed run again, as launched",
        id="resume_all",
        show=False,  # 80 columns hold the control keys and q; it is in ? (help)
    ),
    Binding("s", "start", "Start", tooltip="Start the configured run", id="start"),
    Binding(
        "l",
        "runs",
        "Runs",
        tooltip="Every generation process on the watched hosts; k and r act on them",
        id="runs",
    ),
    Binding(
        "p",
        "pause",
        "Pause",
        tooltip="Hold or release dispatch; in-flight requests carry on",
        id="pause",
    ),
    Binding(
        "d",
        "quality",
        "Quality",
        tooltip="The selected dataset's data quality: finish reasons, lengths, latency, errors",
        id="quality",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "v",
        "samples",
        "Samples",
        tooltip="The selected dataset's last answers, read from the end of its record file",
        id="samples",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "L",
        "log",
        "Log",
        tooltip="The end of the selected dataset's run log, followed",
        id="log",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "h",
        "history",
        "History",
        tooltip="Plots of the selected dataset's history: tokens with its budget, tok/s",
        id="history",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="Show only datasets whose name contains some text",
        id="filter",
    ),
    Binding(
        "question_mark",
        "help",
        "Help",
        key_display="?",
        tooltip="Every key and what it does",
        id="help",
    ),
    Binding("left", "move(-1, 0)", "Left", show=False, id="move.left"),
    Binding("right", "move(1, 0)", "Right", show=False, id="move.right"),
    # Priority: otherwise the scrolling board (9+ panels at 80x24) takes up/down itself.
    Binding("up", "move(0, -1)", "Up", show=False, id="move.up", priority=True),
    Binding("down", "move(0, 1)", "Down", show=False, id="move.down", priority=True),
]


def help_rows(bindings: Iterable[Binding]) -> list[HelpRow]:
    """One row per shown binding, then the keys that are not bindings of their own."""
    rows = []
    for binding in bindings:
        if not binding.show and binding.id not in LOOK_KEYS:
            continue
        key = binding.key_display or binding.key
        rows.append(HelpRow(key, binding.description, binding.tooltip))
    rows.append(HelpRow("← ↑ → ↓ / tab", "Select", "Move between dataset panels"))
    rows.append(HelpRow("ctrl+q ctrl+c", "Quit", "Same as q"))
    return rows
