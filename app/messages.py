"""The messages that carry news into the UI thread from the threads that make it: the
engine's worker (its events and budget crossings) and the host links (what they want said).

Textual delivers a message on the app's own loop, so a worker never touches a widget: it
posts one of these and the app's handler (`on_engine_event`, ...) does the rest.
"""

from __future__ import annotations

from textual.message import Message
from textual.notifications import SeverityLevel

from gen_tui.app.host_links import HostLink
from gen_tui.backends.progress.snapshot import BudgetEvent


class BudgetAnnounced(Message):
    """A dataset crossed its budget or finished (engine thread -> UI)."""

    def __init__(self, event: BudgetEvent) -> None:
        super().__init__()
        self.event = event


class EngineEvent(Message):
    """An engine event (level, message), posted from the engine thread."""

    def __init__(self, level: str, text: str) -> None:
        super().__init__()
        self.level = level
        self.text = text


class HostEvent(Message):
    """Something a host link wants said (a kill outcome, a resume, a refusal, a failure)."""

    def __init__(self, link: HostLink, severity: SeverityLevel, text: str) -> None:
        super().__init__()
        self.link = link
        self.severity = severity
        self.text = text
