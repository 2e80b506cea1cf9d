"""The dashboard's keys, and the help screen's rows for them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from textual.binding import Binding
from textual.keys import _character_to_key, format_key

from gen_tui.app.dialogs.modals import HelpRow

CONTROL_ACTIONS = frozenset(
    {"kill", "stop_one", "resume", "resume_all", "start", "pause", "pause_one", "plan"}
)
"""What --readonly turns off: every key that changes a run."""

LOOK_KEYS = frozenset(
    {"quality", "samples", "log", "history", "palette", "table", "sort"}
    | {"resume_all", "stop_one", "pause_one", "servers", "plan"}
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
    Binding(
        "T",
        "plan",
        "Deadline & cap",
        tooltip="A planned run's deadline and spend cap, changed live; the new plan previewed",
        id="plan",
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
        "S",
        "servers",
        "Servers",
        tooltip="The config's [[servers]]: state, pid, uptime, restarts; start, stop, restart",
        id="servers",
        show=False,  # 80 columns hold the control keys and q; it is in ? (help)
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
        "t",
        "table",
        "Table",
        tooltip="A table of one line per dataset, or the grid of panels (same selection)",
        id="table",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "o",
        "sort",
        "Sort",
        tooltip="In the table: sort by state, % done, ETA, tok/s, or as configured",
        id="sort",
        show=False,  # 80 columns hold the control keys and q; these are in ? (help)
    ),
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="Show only datasets whose name contains some text; state:WORD by state",
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
    # Not remappable (no id) and not listed: the way out of a filter kept with Enter, as the
    # empty board says ("Esc to clear"); with no filter kept, Escape passes on.
    Binding("escape", "clear_filter", "Clear filter", show=False),
    Binding("left", "move(-1, 0)", "Left", show=False, id="move.left"),
    Binding("right", "move(1, 0)", "Right", show=False, id="move.right"),
    # Priority: otherwise the scrolling board (9+ panels at 80x24) takes up/down itself.
    Binding("up", "move(0, -1)", "Up", show=False, id="move.up", priority=True),
    Binding("down", "move(0, 1)", "Down", show=False, id="move.down", priority=True),
]


VIM_KEYMAP: dict[str, str] = {
    "move.left": "left,h",
    "move.down": "down,j",
    "move.up": "up,k",
    "move.right": "right,l",
    "kill": "x",
    "history": "H",
    "runs": "g",
}
"""`[panel] vim = true`: h j k l move the selection as in vim (the arrows still do), so the
keys they took move: kill to x (vim's delete; still behind its confirmation), history to
H, the run list to g (K, P and R already stop, pause and resume one dataset or a whole
killed run). `[keys]` goes over this."""

RESERVED_KEYS: dict[str, str] = {
    "tab": "moving the focus",
    "shift+tab": "moving the focus",
    "ctrl+q": "quitting",
}
"""Keys the dashboard answers to without a binding id of its own: not to be remapped onto."""


class KeymapError(ValueError):
    """A `[keys]` entry that cannot be used: the message names the key (the caller the file)."""


def _normalized(keys: str) -> list[str]:
    """Keys as Textual matches them: `?` is `question_mark`, `K` stays `K`."""
    return [_character_to_key(key) if len(key) == 1 else key for key in keys.split(",")]


def build_keymap(
    keys: Iterable[tuple[str, str]],
    *,
    vim: bool,
    bindings: Sequence[Binding],
    screens: Mapping[str, Sequence[Binding]] | None = None,
) -> dict[str, str]:
    """The keymap for `App.set_keymap` from the config's `[keys]` (and `vim`), checked.

    Why checked here, not left to Textual: a keymap that names no binding does nothing, and
    one that puts two bindings on a key makes one of them unreachable, both silently. Each
    is one line naming the key instead. `bindings`: the dashboard's (the ids a user may
    name); `screens`: by name, the bindings of each other screen that shares some of those
    ids (the run list's kill is `kill`), checked for clashes among themselves the same way.
    Raise :class:`KeymapError`."""
    screens = screens or {}
    known = {binding.id: binding for binding in bindings if binding.id}
    keymap = dict(VIM_KEYMAP) if vim else {}
    given: dict[str, str] = {}
    for name, key in keys:
        if name not in known:
            ids = ", ".join(sorted(i for i in known if not i.startswith("quit.")))
            raise KeymapError(f"keys.{name}: no such binding (the ids are {ids})")
        keymap[name] = given[name] = ",".join(_normalized(key))

    def said(name: str, key: str) -> str:
        if name in given:
            return f"keys.{name} = {key!r}"
        return f"vim = true puts {name} on {key!r}"

    for where, group in [("", bindings), *((f" in {n}", g) for n, g in screens.items())]:
        owner: dict[str, str] = {}
        for binding in group:
            if not binding.id:
                continue  # not remappable, and the defaults never clash
            name = binding.id
            for key in _normalized(keymap.get(name, binding.key)):
                if key in RESERVED_KEYS and name in keymap:
                    raise KeymapError(f"{said(name, key)}: {key} is kept for {RESERVED_KEYS[key]}")
                other = owner.setdefault(key, name)
                if other != name:  # the defaults never clash: one of the two was moved here
                    # Name the [keys] entry if one of the two is (vim's are the fallback).
                    first = name in given or (name in keymap and other not in given)
                    moved, kept = (name, other) if first else (other, name)
                    raise KeymapError(f"{said(moved, key)}: {key} is already {kept}'s key{where}")
    return keymap


def remapped(bindings: Iterable[Binding], keymap: Mapping[str, str]) -> list[Binding]:
    """The bindings as the keymap leaves them, for the help screen (Textual remaps its own
    copies; these are what `?` lists, and it must name the keys that work)."""
    out = []
    for binding in bindings:
        keys = keymap.get(binding.id or "")
        if keys is None:
            out.append(binding)
            continue
        shown = " ".join(format_key(key) for key in keys.split(","))
        out.append(binding.with_key(key=keys, key_display=shown))
    return out


def move_keys(keymap: Mapping[str, str]) -> str:
    """The selection keys as help lists them (the arrows, and h j k l with vim)."""
    extra = [
        key
        for name in ("move.left", "move.down", "move.up", "move.right")
        for key in keymap.get(name, "").split(",")
        if key and key not in ("left", "right", "up", "down")
    ]
    return " ".join(["← ↑ → ↓", *extra, "/ tab"])


def help_rows(bindings: Iterable[Binding], moves: str = "← ↑ → ↓ / tab") -> list[HelpRow]:
    """One row per shown binding, then the keys that are not bindings of their own."""
    rows = []
    for binding in bindings:
        if not binding.show and binding.id not in LOOK_KEYS:
            continue
        key = binding.key_display or binding.key
        rows.append(HelpRow(key, binding.description, binding.tooltip))
    rows.append(HelpRow(moves, "Select", "Move between dataset panels or rows"))
    rows.append(HelpRow("ctrl+q ctrl+c", "Quit", "Same as q"))
    return rows
