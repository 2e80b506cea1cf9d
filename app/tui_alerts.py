"""The control panel's alerts: what a person watching (or away from) the panel is pinged for.

It watches what the dashboard shows, once a refresh: a dataset turning stale, a host going
from reachable to lost, and (from the budget announcer) a crossing. Each rings the terminal
(the bell, and a desktop notification where it has one) and goes to the `[alerts]` URLs of
the config through apprise, in a thread of its own; a send that fails is said once. Each
episode pings once: a dataset stays stale or a host stays lost without ringing again until
it has been well in between (a reconnect countdown is not a new episode).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Mapping
from typing import Any

from textual.app import App

from gen_tui.app.terminal_alert import ring
from gen_tui.backends.alerts import AlertConfig, Alerter, AlertEvent
from gen_tui.backends.host_status import is_lost
from gen_tui.widgets.dataset_panel import PanelView


class TuiAlerts:
    """Turns the dashboard's state into alerts (call :meth:`observe` on the app's thread)."""

    def __init__(
        self, app: App[Any], config: AlertConfig | None, say: Callable[[str, str], None]
    ) -> None:
        self.app = app
        self._say = say
        self.alerter = Alerter(config, on_failure=self._failed) if config else None
        self._host = socket.gethostname()
        self._stale: set[str] = set()
        self._lost: set[str] = set()

    def _failed(self, message: str) -> None:
        """From the sending thread: said on the app's."""
        with contextlib.suppress(RuntimeError):  # the app has gone: nobody to tell
            self.app.call_from_thread(self._say, "warning", message)

    def alert(self, event: AlertEvent, title: str, body: str) -> None:
        """Ring the terminal and send to the configured URLs (never blocks)."""
        ring(self.app, f"gen-tui: {title}", body)
        if self.alerter is not None:
            self.alerter.send(event, f"gen-tui on {self._host}: {title}", body)

    def observe(self, views: Mapping[str, PanelView], hosts: tuple[tuple[str, str], ...]) -> None:
        """One refresh's panels and host states: alert on each new stale dataset or lost host."""
        for name, view in views.items():
            if view.stale and name not in self._stale:
                self._stale.add(name)
                self.alert(AlertEvent.STALE, f"{name} is stale", view.stale_reason or "stale")
            elif not view.stale:
                self._stale.discard(name)
        for host, state in hosts:
            lost = is_lost(state)
            if lost and host not in self._lost:
                self._lost.add(host)
                self.alert(AlertEvent.HOST_LOST, f"host {host} lost", state)
            elif state == "connected":
                self._lost.discard(host)

    def close(self) -> None:
        if self.alerter is not None:
            self.alerter.close()
