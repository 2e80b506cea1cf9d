"""The servers' events that are worth a ping (`[alerts]`, event "server"): a server exited,
went down, never came up, or is healthy again after a restart. Loading, restarting and the
like are for the panel and the log only: an alert is a glance, not a stream."""

from __future__ import annotations

import socket

from gen_tui.backends.alerts import Alerter, AlertEvent
from gen_tui.backends.servers.events import ServerEvent, ServerState

ALERTING = frozenset({ServerState.EXITED, ServerState.DOWN, ServerState.FAILED})


def worth_an_alert(event: ServerEvent) -> bool:
    if event.state in ALERTING:
        return True
    return event.state is ServerState.HEALTHY and event.detail.startswith("healthy again")


class ServerAlerts:
    """An event sink that sends the events worth an alert through `alerter`."""

    def __init__(self, alerter: Alerter, host: str | None = None) -> None:
        self.alerter = alerter
        self.host = host or socket.gethostname()

    def __call__(self, event: ServerEvent) -> None:
        if worth_an_alert(event):
            title = f"gen-tui on {self.host}: server {event.name} {event.state}"
            self.alerter.send(AlertEvent.SERVER, title, event.line())
