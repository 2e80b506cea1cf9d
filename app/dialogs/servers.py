"""The servers view (`S` from the panel): a line per server of the config's `[[servers]]`,
as its supervisor sees it, and the keys that act on one: start, stop, restart, restart
with edited flags, and `L` on its log.

The screen reads whole rows (`ServerControl.rows`, taken in the servers' own thread) and
hands each key to the control, which runs it on that thread: nothing here blocks. A server
gen-tui did not start ("not ours") is restarted only after a question naming the pid
holding its port and that process's owner.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Protocol

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Label, Static

from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.peek import LogScreen
from gen_tui.app.dialogs.table_screen import ROW_MOVES, TableScreen
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.view import Holder, ServerRow
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.backends.untrusted import clean, one_line
from gen_tui.widgets.key_line import KeyLine
from gen_tui.widgets.server_table import LAST_LINE_CHARS, ServerTable

REFRESH_S = 0.5
CONTROL_ACTIONS = ("start", "kill", "resume", "edit")
"""What --readonly turns off here."""


class ServerControl(Protocol):
    """What the view needs of the panel's servers (app/served.py's PanelServers)."""

    @property
    def rows(self) -> tuple[ServerRow, ...]: ...

    @property
    def problem(self) -> str: ...

    def start(self, name: str) -> None: ...

    def stop(self, name: str) -> None: ...

    def restart(self, name: str, argv: Sequence[str] | None = None) -> None: ...

    def save_flags(self, name: str, argv: Sequence[str]) -> None: ...

    def log_tail(self, name: str, lines: int) -> Tail: ...


def foreign_question(row: ServerRow, holder: Holder | None) -> str:
    """The question before restarting a server not ours: whose process it stops."""
    who = (
        f"pid {holder.pid}, owned by {holder.user}: {holder.command or '?'}"
        if holder is not None
        else "a process whose pid cannot be seen here (another user's?)"
    )
    return (
        f"Something gen-tui did not start answers on {row.url} (port {row.port}): {who}.\n\n"
        f"Restart stops it (SIGTERM, then SIGKILL) and starts the recipe's server:\n"
        f"{shlex.join(row.argv)}"
    )


class FlagsScreen(ModalScreen[tuple[tuple[str, ...], bool] | None]):
    """Restart one server with edited flags: the full command, editable; returns the argv
    (split as a shell would, never run through one) and whether to save it in the config
    file too, or None."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without restarting", id="flags.cancel")
    ]

    def __init__(self, name: str, argv: Sequence[str]) -> None:
        super().__init__()
        self.server = name
        self.argv = tuple(argv)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = Content(one_line(f"Restart {self.server} with edited flags"))
            yield Label(
                "The full command (words split as a shell would; nothing runs through one). "
                "The edit applies to this panel's starts of it; tick the box to keep it in "
                "the config file too (the rest of the file is left as it is).",
                id="flags-about",
                markup=False,
            )
            yield Input(value=shlex.join(self.argv), id="flags")
            yield Checkbox("Save it in the config file", id="flags-save")
            yield Label("", id="flags-error", markup=False)
            yield Label("Enter restarts · Escape cancels", id="flags-help")

    def on_mount(self) -> None:
        self.query_one("#flags", Input).focus()

    @on(Input.Submitted, "#flags")
    def _submitted(self, event: Input.Submitted) -> None:
        error = self.query_one("#flags-error", Label)
        try:
            argv = tuple(shlex.split(event.value))
        except ValueError as exc:
            error.update(one_line(f"the command: {exc}"))
            return
        if not argv:
            error.update("the command: empty")
            return
        self.dismiss((argv, self.query_one("#flags-save", Checkbox).value))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ServersScreen(TableScreen):
    """A table of the supervised servers, refreshed twice a second."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "start", "Start", tooltip="Start the selected server", id="start"),
        Binding(
            "k",
            "kill",
            "Stop",
            tooltip="Stop the selected server (SIGTERM, then SIGKILL); it is not restarted",
            id="kill",
        ),
        Binding(
            "r",
            "resume",
            "Restart",
            tooltip="Stop the selected server and start it anew",
            id="resume",
        ),
        Binding(
            "e",
            "edit",
            "Edit flags",
            tooltip="Restart the selected server with an edited command",
            id="servers.edit",
        ),
        Binding("L", "log", "Log", tooltip="The end of the selected server's log", id="log"),
        Binding(
            "escape", "close", "Panels", tooltip="Back to the dataset panels", id="servers.close"
        ),
        Binding("S", "close", "Panels", show=False, id="servers"),
        *ROW_MOVES,
    ]
    """Start, stop and restart share the dashboard's ids (s, k, r): `[keys]` and `vim =
    true` move them here too (stop is `x` with vim), and `build_keymap` checks clashes."""

    def __init__(
        self,
        control: ServerControl,
        loads: Callable[[], Mapping[str, str]],
        holders: Callable[[str], Holder | None],
        *,
        readonly: bool = False,
    ) -> None:
        """`loads`: each server URL's /metrics load as the strip has it; `holders`: who
        holds a not-ours server's port, as last seen."""
        super().__init__()
        self.control = control
        self.loads = loads
        self.holders = holders
        self.readonly = readonly

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if self.readonly and action in CONTROL_ACTIONS else True

    def compose(self) -> ComposeResult:
        yield Label("", id="servers-title", markup=False)
        yield ServerTable(id="server-rows")
        yield Static("", id="servers-detail", markup=False)
        yield KeyLine()

    def on_mount(self) -> None:
        self.refresh_rows()
        self.set_interval(REFRESH_S, self.refresh_rows, name="servers-refresh")
        self.query_one(ServerTable).focus()

    def refresh_rows(self) -> None:
        rows = self.control.rows
        healthy = sum(1 for row in rows if row.state is ServerState.HEALTHY)
        title = f" Servers: {healthy} of {len(rows)} healthy" if rows else " Servers: starting…"
        if self.control.problem:
            title = f" Servers: {self.control.problem}"
        self.query_one("#servers-title", Label).update(title)
        self.query_one(ServerTable).show(rows, self.loads())
        picked = self._row()
        lines = []
        if picked is not None and picked.detail:
            lines.append(clean(one_line(f"{picked.name}: {picked.detail}", 600)))
        if picked is not None and picked.last_line:
            # The column is the table's last and narrowest: said in full here.
            lines.append(clean(one_line(f"its log: {picked.last_line}", LAST_LINE_CHARS)))
        self.query_one("#servers-detail", Static).update("\n".join(lines))

    def _row(self) -> ServerRow | None:
        key = self.query_one(ServerTable).selected_key
        return next((row for row in self.control.rows if row.name == key), None)

    def _picked(self) -> ServerRow | None:
        row = self._row()
        if row is None:
            self.notify("no server selected", severity="warning")
        return row

    def action_start(self) -> None:
        if (row := self._picked()) is not None:
            self.control.start(row.name)

    def action_kill(self) -> None:
        if (row := self._picked()) is None:
            return
        if row.state is ServerState.NOT_OURS:
            self.notify(f"{row.name} is not ours: gen-tui does not stop it", severity="warning")
            return
        self.control.stop(row.name)

    def action_resume(self) -> None:
        if (row := self._picked()) is not None:
            self._restart(row, None)

    def action_edit(self) -> None:
        if (row := self._picked()) is None:
            return

        def edited(answer: tuple[tuple[str, ...], bool] | None) -> None:
            if answer is not None:
                argv, save = answer
                if save:
                    self.control.save_flags(row.name, argv)
                self._restart(row, argv)

        self.app.push_screen(FlagsScreen(row.name, row.argv), edited)

    def _restart(self, row: ServerRow, argv: tuple[str, ...] | None) -> None:
        if row.state is not ServerState.NOT_OURS:
            self.control.restart(row.name, argv)
            return

        def decided(yes: bool | None) -> None:
            if yes:
                self.control.restart(row.name, argv)

        question = foreign_question(row, self.holders(row.name))
        self.app.push_screen(
            ConfirmScreen(f"Restart {row.name}? It is not ours", question, "Restart"), decided
        )

    def action_log(self) -> None:
        if (row := self._picked()) is None:
            return
        name = row.name
        peek = Peek(
            records=lambda _n: Tail(error="a server has no record file"),
            log=lambda lines: self.control.log_tail(name, lines),
        )
        self.app.push_screen(LogScreen(f"server {name}", peek, tuple))
