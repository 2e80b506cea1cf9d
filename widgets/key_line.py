"""The key line at the bottom: Textual's Footer, rebuilt only when what it shows changes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[tuple[str, str, str, str | None, bool, str], ...]


def shown_keys(screen: Screen[object]) -> Shown:
    """What a footer on `screen` would draw: each shown binding, whether enabled, its tooltip."""
    return tuple(
        (binding.key, binding.action, binding.description, binding.key_display, enabled, tip)
        for _node, binding, enabled, tip in screen.active_bindings.values()
        if binding.show
    )


class KeyLine(Footer):
    """Footer recomposes all of its keys whenever its screen refreshes its bindings.

    That happens on every focus move between panels and every time a dialog closes, and
    each time two dozen key widgets and their styles are built and thrown away. The garbage
    piles up until a full garbage collection, which in this process takes most of 100 ms
    and lands on whatever key the user presses next. The keys here hardly ever change, so
    the line is rebuilt only when the bindings it would show differ from those it shows,
    and not at all while a dialog covers its screen (Footer would show the dialog's keys
    there, dimmed under the dialog, only to rebuild the screen's own when it closes).
    """

    def __init__(self) -> None:
        # Not the palette's `^p palette` at the right: 80 columns hold the control keys
        # and q; ctrl+p is in ? (help).
        super().__init__(show_command_palette=False)

    _drawn: Shown | None = None
    _pending = False
    """A rebuild is on its way: it draws the keys as they are by then, so one is enough."""

    def compose(self) -> ComposeResult:
        self._pending = False
        if self._bindings_ready:
            self._drawn = shown_keys(self.screen)
        return super().compose()

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self._pending and screen is self.screen:
            return
        if self._drawn is not None and screen is self.screen:
            if screen is not self.app.screen:
                return  # under a dialog: its keys are its own, these stay as they were
            if shown_keys(screen) == self._drawn:
                return
        self._pending = self.is_attached and screen is self.screen and screen.app.app_focus
        super().bindings_changed(screen)
