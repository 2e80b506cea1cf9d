"""The terminal's half of an alert: the bell, and a desktop notification where the terminal
has one (OSC 9 / OSC 777, see backends/alerts.py for which terminals and why it is safe).

Why through Textual's driver: the screen is Textual's, and its driver writes from one
writer thread in order; a sequence written past it (print, sys.stdout) could land in the
middle of a frame and corrupt it. `App.bell()` writes "\\a" the same way, and Textual's
own `copy_to_clipboard` writes its OSC 52 through `_driver.write` too, which is the one
place a sequence of our own may go. Call on the app's thread (the event loop).
"""

from __future__ import annotations

from textual.app import App

from gen_tui.backends.alerts import terminal_notification


def ring(app: App[object], title: str, body: str) -> None:
    """Ring the bell and raise a desktop notification, where the terminal can."""
    app.bell()
    sequence = terminal_notification(title, body)
    driver = app._driver
    if sequence and not app.is_headless and driver is not None:
        driver.write(sequence)
